"""The fake Messages API's Message Batches endpoints, through the real (synchronous) `anthropic` client and raw HTTP."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from anthropic.types.messages.batch_create_params import Request

from tests.fake_messages_api import (
    API_KEY,
    Drop,
    FakeMessagesAPI,
    Reply,
    bad_request,
    canceled,
    expired,
    malformed,
    overloaded,
    server_error,
)


@pytest.fixture
def client(fake_messages_api: FakeMessagesAPI) -> Iterator[anthropic.Anthropic]:
    """A real SDK client on the fake, with the SDK's own retries off (so every fault is seen)."""
    c = anthropic.Anthropic(api_key=API_KEY, base_url=fake_messages_api.base_url, max_retries=0, timeout=5)
    yield c
    c.close()


def params(user: str = "hi", system: str = "You judge.") -> dict[str, Any]:
    """A minimal Messages request body with a cached system block."""
    return {
        "model": "claude-haiku-5-5",
        "max_tokens": 50,
        "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": user}],
    }


def requests(*custom_ids: str) -> list[Request]:
    """One minimal request per custom id."""
    return [{"custom_id": c, "params": params(f"question {c}")} for c in custom_ids]  # type: ignore[typeddict-item]


def http(api: FakeMessagesAPI, method: str, path: str, body: object | None = None) -> tuple[int, dict[str, str], bytes]:
    """One raw HTTP call to the fake; returns (status, headers, body), errors included."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        api.base_url + path, data=data, headers={"content-type": "application/json"}, method=method
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def results(client: anthropic.Anthropic, batch_id: str) -> dict[str, Any]:
    """The batch's results as plain dicts, by custom_id."""
    return {line.custom_id: line.result.model_dump() for line in client.messages.batches.results(batch_id)}


def test_create_answers_an_in_progress_batch_with_the_api_fields(
    fake_messages_api: FakeMessagesAPI, client: anthropic.Anthropic
) -> None:
    """Create answers a message_batch in progress: all requests processing, no end, no results URL, expiry after 24
    h."""
    batch = client.messages.batches.create(requests=requests("a", "b", "c"))
    assert batch.id.startswith("msgbatch_") and batch.type == "message_batch"
    assert batch.processing_status == "in_progress"
    assert batch.request_counts.model_dump() == {
        "processing": 3,
        "succeeded": 0,
        "errored": 0,
        "canceled": 0,
        "expired": 0,
    }
    assert (
        batch.ended_at is None
        and batch.results_url is None
        and batch.cancel_initiated_at is None
        and batch.archived_at is None
    )
    assert (batch.expires_at - batch.created_at).total_seconds() == 24 * 3600
    assert [r.custom_id for r in fake_messages_api.batch_requests] == ["a", "b", "c"]
    assert fake_messages_api.batch_requests[1].body == params("question b")
    assert fake_messages_api.message_requests == []


def test_a_batch_ends_at_the_first_read_after_its_processing_time(
    fake_messages_api: FakeMessagesAPI, client: anthropic.Anthropic
) -> None:
    """With processing time 0 the first read finds the batch ended, with counts and the results URL filled."""
    fake_messages_api.batch_processing(0)
    batch = client.messages.batches.create(requests=requests("a", "b"))
    assert batch.processing_status == "in_progress"  # the create answer is always in progress
    read = client.messages.batches.retrieve(batch.id)
    assert read.processing_status == "ended" and read.ended_at is not None
    assert read.request_counts.model_dump() == {
        "processing": 0,
        "succeeded": 2,
        "errored": 0,
        "canceled": 0,
        "expired": 0,
    }
    assert read.results_url == f"{fake_messages_api.base_url}/v1/messages/batches/{batch.id}/results"


def test_the_default_processing_time_ends_a_batch_on_its_own(
    fake_messages_api: FakeMessagesAPI, client: anthropic.Anthropic
) -> None:
    """With the default (short) processing time a polled batch ends without any control being called."""
    batch = client.messages.batches.create(requests=requests("a"))
    for _ in range(200):
        if client.messages.batches.retrieve(batch.id).processing_status == "ended":
            break
        threading.Event().wait(0.02)
    assert client.messages.batches.retrieve(batch.id).processing_status == "ended"


def test_without_processing_time_a_batch_stays_in_progress_until_ended(
    fake_messages_api: FakeMessagesAPI, client: anthropic.Anthropic
) -> None:
    """`batch_processing(None)` keeps a batch in progress over any number of reads, until `end_batch`."""
    fake_messages_api.batch_processing(None)
    batch = client.messages.batches.create(requests=requests("a"))
    assert [client.messages.batches.retrieve(batch.id).processing_status for _ in range(3)] == ["in_progress"] * 3
    status, _, body = http(fake_messages_api, "GET", f"/v1/messages/batches/{batch.id}/results")
    assert status == 400 and json.loads(body)["error"]["type"] == "invalid_request_error"
    fake_messages_api.end_batch(batch.id)
    assert client.messages.batches.retrieve(batch.id).processing_status == "ended"


def test_a_succeeded_result_is_what_post_messages_answers_for_the_same_params(client: anthropic.Anthropic) -> None:
    """A batch's succeeded message has the content and usage POST /v1/messages gives the same params on a fresh
    server."""
    body = params("When did order A17 ship?", system="Judge. " * 50)
    with FakeMessagesAPI() as batched, FakeMessagesAPI() as direct:
        batched.batch_processing(0)
        c = anthropic.Anthropic(api_key=API_KEY, base_url=batched.base_url, max_retries=0)
        batch = c.messages.batches.create(requests=[{"custom_id": "x", "params": body}])  # type: ignore[typeddict-item]
        c.messages.batches.retrieve(batch.id)
        [line] = list(c.messages.batches.results(batch.id))
        c.close()
        message = anthropic.Anthropic(api_key=API_KEY, base_url=direct.base_url, max_retries=0).messages.create(**body)
    assert line.result.type == "succeeded"
    got = line.result.message
    assert got.content == message.content and got.usage == message.usage and got.model == message.model
    assert got.stop_reason == "end_turn"


def test_batched_requests_share_the_prompt_cache(
    fake_messages_api: FakeMessagesAPI, client: anthropic.Anthropic
) -> None:
    """The first batched request writes the cached system prefix and the next ones read it, as on the messages path."""
    fake_messages_api.batch_processing(0)
    batch = client.messages.batches.create(requests=requests("a", "b", "c"))
    client.messages.batches.retrieve(batch.id)
    usage = {
        k: (v["message"]["usage"]["cache_creation_input_tokens"], v["message"]["usage"]["cache_read_input_tokens"])
        for k, v in results(client, batch.id).items()
    }
    written = usage["a"][0]
    assert written > 0
    assert usage == {"a": (written, 0), "b": (0, written), "c": (0, written)}


def test_results_are_jsonl_sorted_by_custom_id_not_request_order(
    fake_messages_api: FakeMessagesAPI, client: anthropic.Anthropic
) -> None:
    """The results file is application/binary JSONL, one line per request, not in request order."""
    fake_messages_api.batch_processing(0)
    batch = client.messages.batches.create(requests=requests("c", "a", "b"))
    client.messages.batches.retrieve(batch.id)
    status, headers, body = http(fake_messages_api, "GET", f"/v1/messages/batches/{batch.id}/results")
    assert status == 200 and headers["content-type"] == "application/binary"
    assert [json.loads(line)["custom_id"] for line in body.splitlines()] == ["a", "b", "c"]


def test_scripted_outcomes_become_succeeded_errored_expired_and_canceled_entries(
    fake_messages_api: FakeMessagesAPI, client: anthropic.Anthropic
) -> None:
    """Scripted steps give a succeeded reply (malformed or not), an errored entry with the error type, expired and
    canceled."""
    fake_messages_api.batch_processing(0)
    fake_messages_api.script_batch(
        Reply("hello", stop_reason="max_tokens"), bad_request("prompt is too long"), malformed(), expired(), canceled()
    )
    batch = client.messages.batches.create(requests=requests("a", "b", "c", "d", "e", "f"))
    counts = client.messages.batches.retrieve(batch.id).request_counts.model_dump()
    assert counts == {"processing": 0, "succeeded": 3, "errored": 1, "canceled": 1, "expired": 1}
    got = results(client, batch.id)
    assert got["a"]["message"]["content"][0]["text"] == "hello" and got["a"]["message"]["stop_reason"] == "max_tokens"
    assert got["b"] == {
        "type": "errored",
        "error": {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "prompt is too long"},
            "request_id": None,
        },
    }
    assert got["c"]["message"]["content"][0]["text"] == "{not json"
    assert got["d"] == {"type": "expired"} and got["e"] == {"type": "canceled"}
    assert got["f"]["type"] == "succeeded"  # the script ran out: a brain reply


def test_an_outcome_by_custom_id_wins_and_is_used_once(
    fake_messages_api: FakeMessagesAPI, client: anthropic.Anthropic
) -> None:
    """`batch_outcome` sets one custom_id's outcome before the queue, and a resubmission gets a normal reply."""
    fake_messages_api.batch_processing(0)
    fake_messages_api.script_batch(expired())
    fake_messages_api.batch_outcome("b", overloaded())
    first = client.messages.batches.create(requests=requests("a", "b"))
    second = client.messages.batches.create(requests=requests("b"))
    assert [client.messages.batches.retrieve(b.id).processing_status for b in (first, second)] == ["ended", "ended"]
    got = results(client, first.id)
    assert got["a"] == {"type": "expired"}
    assert got["b"]["type"] == "errored" and got["b"]["error"]["error"]["type"] == "overloaded_error"
    assert results(client, second.id)["b"]["type"] == "succeeded"


def test_script_batch_rejects_a_dropped_connection(fake_messages_api: FakeMessagesAPI) -> None:
    """A batched request cannot drop a connection, so scripting one is refused."""
    with pytest.raises(TypeError):
        fake_messages_api.script_batch(Drop())  # type: ignore[arg-type]


def test_expire_batch_expires_every_unscripted_request(
    fake_messages_api: FakeMessagesAPI, client: anthropic.Anthropic
) -> None:
    """An expired batch ends with its unscripted requests expired and its scripted ones as scripted."""
    fake_messages_api.batch_processing(None)
    fake_messages_api.batch_outcome("a", Reply("done early"))
    batch = client.messages.batches.create(requests=requests("a", "b", "c"))
    fake_messages_api.expire_batch()
    read = client.messages.batches.retrieve(batch.id)
    assert read.processing_status == "ended"
    assert read.request_counts.model_dump() == {
        "processing": 0,
        "succeeded": 1,
        "errored": 0,
        "canceled": 0,
        "expired": 2,
    }


def test_cancel_answers_canceling_then_the_batch_ends_with_unprocessed_requests_canceled(
    fake_messages_api: FakeMessagesAPI, client: anthropic.Anthropic
) -> None:
    """Cancel answers `canceling` with cancel_initiated_at; the next read finds it ended, unscripted requests
    canceled."""
    fake_messages_api.batch_processing(None)
    fake_messages_api.script_batch(Reply("processed before the cancel"))
    batch = client.messages.batches.create(requests=requests("a", "b", "c"))
    answer = client.messages.batches.cancel(batch.id)
    assert answer.processing_status == "canceling" and answer.cancel_initiated_at is not None
    read = client.messages.batches.retrieve(batch.id)
    assert read.processing_status == "ended"
    assert read.request_counts.model_dump() == {
        "processing": 0,
        "succeeded": 1,
        "errored": 0,
        "canceled": 2,
        "expired": 0,
    }
    assert [r["type"] for r in results(client, batch.id).values()] == ["succeeded", "canceled", "canceled"]


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        (
            {"requests": [{"custom_id": "same", "params": params()}, {"custom_id": "same", "params": params()}]},
            "duplicate custom_id",
        ),
        ({"requests": []}, "at least 1 item"),
        ({}, "requests: Field required"),
        ({"requests": [{"custom_id": "x" * 65, "params": params()}]}, "should match pattern"),
        ({"requests": [{"custom_id": "has space", "params": params()}]}, "should match pattern"),
        ({"requests": [{"custom_id": "trailing\n", "params": params()}]}, "should match pattern"),
        ({"requests": [{"custom_id": "ok"}]}, "params: Field required"),
        ({"requests": [{"custom_id": "ok", "params": {"model": "m", "messages": []}}]}, "max_tokens: Field required"),
    ],
    ids=[
        "duplicate",
        "empty",
        "no-requests",
        "too-long-id",
        "space-in-id",
        "newline-in-id",
        "no-params",
        "no-max-tokens",
    ],
)
def test_create_validates_like_the_api(
    fake_messages_api: FakeMessagesAPI, body: dict[str, Any], complaint: str
) -> None:
    """An invalid create is a 400 invalid_request_error naming the problem, and creates no batch."""
    status, _, answer = http(fake_messages_api, "POST", "/v1/messages/batches", body)
    error = json.loads(answer)
    assert status == 400 and error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert complaint in error["error"]["message"]
    assert fake_messages_api.batch_requests == []


def test_the_sdk_sees_a_duplicate_custom_id_as_a_bad_request(client: anthropic.Anthropic) -> None:
    """Through the SDK a duplicate custom_id raises BadRequestError."""
    with pytest.raises(anthropic.BadRequestError, match="duplicate custom_id"):
        client.messages.batches.create(requests=requests("x", "x"))


@pytest.mark.parametrize(("method", "suffix"), [("GET", ""), ("GET", "/results"), ("POST", "/cancel")])
def test_an_unknown_batch_is_404(fake_messages_api: FakeMessagesAPI, method: str, suffix: str) -> None:
    """Reading, downloading or canceling an unknown batch answers 404 not_found_error."""
    status, _, answer = http(
        fake_messages_api, method, f"/v1/messages/batches/msgbatch_nope{suffix}", {} if method == "POST" else None
    )
    assert status == 404 and json.loads(answer)["error"]["type"] == "not_found_error"


def test_batch_call_faults_fail_the_http_calls_themselves(
    fake_messages_api: FakeMessagesAPI, client: anthropic.Anthropic
) -> None:
    """Scripted faults fail create, retrieve and results calls in turn (a failed create makes no batch), then they
    succeed."""
    fake_messages_api.batch_processing(0)
    fake_messages_api.fail_batch_call("create", overloaded(), Drop())
    fake_messages_api.fail_batch_call("retrieve", server_error())
    fake_messages_api.fail_batch_call("results", overloaded())
    with pytest.raises(anthropic.InternalServerError):  # the SDK's class for 529 as for any 5xx
        client.messages.batches.create(requests=requests("a"))
    with pytest.raises(anthropic.APIConnectionError):
        client.messages.batches.create(requests=requests("a"))
    assert fake_messages_api.batch_requests == []
    batch = client.messages.batches.create(requests=requests("a"))
    with pytest.raises(anthropic.InternalServerError):
        client.messages.batches.retrieve(batch.id)
    with pytest.raises(anthropic.InternalServerError):
        results(client, batch.id)
    assert results(client, batch.id)["a"]["type"] == "succeeded"
    assert [r.status for r in fake_messages_api.batch_calls("create")] == [529, 0, 200]
    assert [r.status for r in fake_messages_api.batch_calls("retrieve")] == [
        500,
        200,
        200,
    ]  # results reads the batch first
    assert [r.status for r in fake_messages_api.batch_calls("results")] == [529, 200]


def test_message_controls_leave_batch_calls_alone_and_reset_clears_batches(
    fake_messages_api: FakeMessagesAPI, client: anthropic.Anthropic
) -> None:
    """An outage of POST /v1/messages does not fail batch calls, message_requests excludes them and reset forgets
    batches."""
    fake_messages_api.fail_for(60)
    batch = client.messages.batches.create(requests=requests("a"))
    assert client.messages.batches.retrieve(batch.id).id == batch.id
    assert fake_messages_api.message_requests == [] and len(fake_messages_api.batch_calls()) == 2
    fake_messages_api.reset()
    assert fake_messages_api.batch_requests == [] and fake_messages_api.requests == []
    with pytest.raises(anthropic.NotFoundError):
        client.messages.batches.retrieve(batch.id)
