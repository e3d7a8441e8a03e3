"""The fake Chat Completions server's Batch API, driven by the REAL `openai` SDK (files, batches, results)."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI

from tests.fake_chat_completions import ChatReply, FakeChatCompletions, bad_request, expired, server_error

pytest_plugins = ["tests.monitor.judges.conftest_providers"]  # until the suite's conftest loads it

SYSTEM = 'You grade relevancy 0-4. Reply with a JSON object with keys "reasoning" and "score". '
USER = (
    "<user_question_c0de>\nWhen did order A17 ship?\n</user_question_c0de>\n"
    "<assistant_response_c0de>\nOrder A17 shipped on 3 March.\n</assistant_response_c0de>"
)


def line(custom_id: str, **body: Any) -> dict[str, Any]:
    """One input line: a judge request (prompt mode unless `body` adds fields)."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "gpt-test", "messages": messages, **body},
    }


async def submit(client: AsyncOpenAI, lines: list[Any]) -> str:
    """Upload `lines` as JSONL (a str line is written as is) and create a batch; returns its id."""
    text = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines)
    upload = await client.files.create(file=("judge.jsonl", text.encode()), purpose="batch")
    batch = await client.batches.create(
        input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    assert batch.status == "validating" and batch.input_file_id == upload.id
    return batch.id


async def jsonl(client: AsyncOpenAI, file_id: str | None) -> list[dict[str, Any]]:
    """The lines of a result file."""
    assert file_id is not None
    content = await client.files.content(file_id)
    return [json.loads(x) for x in content.text.splitlines()]


async def test_a_batch_answers_each_line_as_the_chat_endpoint_would(
    fake_chat_completions: FakeChatCompletions, openai_client: AsyncOpenAI
) -> None:
    """Lines are answered like chat requests (brain replies, capability refusals) unless scripted; 200s go to the
    output file, the rest (a scripted 400, a refused json_schema, an expired request) to the error file."""
    fake_chat_completions.batch_processing(None)
    fake_chat_completions.json_object_only()
    fake_chat_completions.script_batch(ChatReply(), bad_request("prompt too long"), ChatReply(), expired())
    schema = {"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object"}}}
    batch_id = await submit(
        openai_client, [line("d"), line("c"), line("b", response_format=schema), line("a"), line("e")]
    )
    assert (await openai_client.batches.retrieve(batch_id)).status == "in_progress"
    fake_chat_completions.end_batch()
    batch = await openai_client.batches.retrieve(batch_id)
    assert batch.status == "completed" and batch.completed_at is not None
    assert batch.request_counts is not None and (batch.request_counts.completed, batch.request_counts.failed) == (2, 3)
    outputs = await jsonl(openai_client, batch.output_file_id)
    assert [x["custom_id"] for x in outputs] == ["d", "e"]  # sorted by custom_id, not in input order
    body = outputs[1]["response"]["body"]
    assert outputs[1]["response"]["status_code"] == 200 and body["object"] == "chat.completion"
    assert json.loads(body["choices"][0]["message"]["content"])["score"] == 4
    errors = {x["custom_id"]: x for x in await jsonl(openai_client, batch.error_file_id)}
    assert errors["c"]["response"]["status_code"] == 400
    assert errors["c"]["response"]["body"]["error"]["message"] == "prompt too long"
    assert "unavailable now" in errors["b"]["response"]["body"]["error"]["message"]
    assert errors["a"]["response"] is None and errors["a"]["error"]["code"] == "batch_expired"
    assert [r.custom_id for r in fake_chat_completions.batch_requests] == ["d", "c", "b", "a", "e"]


async def test_bad_input_files_fail_the_batch_and_bad_calls_are_refused(
    fake_chat_completions: FakeChatCompletions, openai_client: AsyncOpenAI
) -> None:
    """An input file with an unparseable line and a duplicate custom_id fails at validation with one error per bad
    line; an unknown file, endpoint or batch is refused by the call itself."""
    batch_id = await submit(openai_client, [line("a"), "{oops", line("a")])
    batch = await openai_client.batches.retrieve(batch_id)
    assert batch.status == "failed" and batch.errors is not None and batch.errors.data is not None
    assert [(e.code, e.line) for e in batch.errors.data] == [("invalid_json_line", 2), ("duplicate_custom_id", 3)]
    with pytest.raises(openai.BadRequestError, match="input_file_id"):
        await openai_client.batches.create(
            input_file_id="file-missing", endpoint="/v1/chat/completions", completion_window="24h"
        )
    with pytest.raises(openai.BadRequestError, match="endpoint"):
        await openai_client.batches.create(
            input_file_id="file-missing", endpoint="/v1/embeddings", completion_window="24h"
        )
    with pytest.raises(openai.NotFoundError):
        await openai_client.batches.retrieve("batch_unknown")


async def test_expiry_cancel_timing_and_failed_calls(
    fake_chat_completions: FakeChatCompletions, openai_client: AsyncOpenAI
) -> None:
    """A batch completes on the first read after its processing time; `expire_batch` expires every unscripted
    request; a cancel ends the batch `cancelled` on the next read; `fail_batch_call` fails the HTTP call itself."""
    fake_chat_completions.batch_processing(0)
    quick = await submit(openai_client, [line("a")])
    assert (await openai_client.batches.retrieve(quick)).status == "completed"
    fake_chat_completions.batch_processing(None)
    slow = await submit(openai_client, [line("a"), line("b")])
    fake_chat_completions.expire_batch(slow)
    batch = await openai_client.batches.retrieve(slow)
    assert batch.status == "expired" and batch.output_file_id is None
    assert {x["error"]["code"] for x in await jsonl(openai_client, batch.error_file_id)} == {"batch_expired"}
    doomed = await submit(openai_client, [line("a")])
    assert (await openai_client.batches.cancel(doomed)).status == "cancelling"
    assert (await openai_client.batches.retrieve(doomed)).status == "cancelled"
    fake_chat_completions.fail_batch_call("retrieve", server_error(503))
    with pytest.raises(openai.InternalServerError):
        await openai_client.batches.retrieve(doomed)
    assert (await openai_client.batches.retrieve(doomed)).status == "cancelled"
    assert [r.status for r in fake_chat_completions.batch_calls("retrieve")][-2:] == [503, 200]
