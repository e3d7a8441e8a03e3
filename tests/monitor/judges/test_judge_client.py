"""The `JudgeClient` seams: the injected `Backoff` sets every wait, an injected `httpx2.AsyncClient` carries the
requests, and a judge sends through a ready client or builds its own from the same options."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx2
import pytest

from monitor.backoff import Backoff
from monitor.judges.batches import BatchItem, BatchJudge
from monitor.judges.judge_client import JudgeClient
from monitor.judges.rubric import RubricJudge
from monitor.judges.settings import JudgeSettings
from schemas.errors import JudgeReplyInvalid
from tests.fake_messages_api import FakeMessagesAPI, Reply, overloaded, rate_limited
from tests.monitor.judges.conftest import FAST, QUESTION, TIGHT, MakeJudge, judge_settings
from tests.monitor.test_backoff import Recording


async def test_every_wait_of_a_judge_call_comes_from_the_injected_backoff(
    fake_messages_api: FakeMessagesAPI,
    make_judge: MakeJudge,
) -> None:
    """Three 529s wait the injected Backoff's steps (base doubling to the cap), then the fourth attempt succeeds."""
    fake_messages_api.fail_next(3, overloaded())
    rng = Recording()
    judge = make_judge("rubric", judge_kwargs={"backoff": Backoff(base_s=0.01, max_s=0.02, rng=rng)})
    started = time.monotonic()
    assert (await judge.judge(QUESTION, TIGHT)).score == 1.0
    assert time.monotonic() - started >= sum(rng.waits) - 0.001  # it slept the waits it drew
    assert rng.steps == [0.01, 0.02, 0.02]


async def test_an_invalid_reply_is_sent_back_once_at_once_whatever_the_backoff(
    fake_messages_api: FakeMessagesAPI,
    make_judge: MakeJudge,
) -> None:
    """An invalid reply is retried once, without a wait even with a backoff of seconds, carrying the reply and its
    validation error in a corrective turn; the corrected reply is the score."""
    fake_messages_api.script(Reply("nope"))
    rng = Recording()
    judge = make_judge("rubric", judge_kwargs={"backoff": Backoff(base_s=5.0, max_s=5.0, rng=rng)})
    started = time.monotonic()
    assert (await judge.judge(QUESTION, TIGHT)).score == 1.0
    assert time.monotonic() - started < 2.0 and rng.halves == []
    assert fake_messages_api.statuses() == [200, 200] and judge.stats["retry.invalid_reply"] == 1
    retry = fake_messages_api.message_requests[-1].body["messages"]
    assert [m["role"] for m in retry] == ["user", "assistant", "user"] and retry[1]["content"] == "nope"
    assert "not valid" in retry[2]["content"]


async def test_a_second_invalid_reply_is_an_error_never_a_score(
    fake_messages_api: FakeMessagesAPI,
    make_judge: MakeJudge,
) -> None:
    """Two invalid replies in a row (the first, then its correction) end in `JudgeReplyInvalid` with what both cost,
    after exactly two requests: the retry budget for transient errors is not spent on a model that cannot comply."""
    fake_messages_api.script(Reply("nope"), Reply('{"reasoning": "x", "score": 9}'))
    judge = make_judge("rubric", judge_structured_output="json_schema")
    with pytest.raises(JudgeReplyInvalid, match="after a corrective retry") as exc:
        await judge.judge(QUESTION, TIGHT)
    assert fake_messages_api.statuses() == [200, 200]
    assert exc.value.usage is not None and exc.value.usage.input_tokens > 0
    assert judge.stats["gave_up.invalid_reply"] == 1 and judge.stats["invalid.json_schema"] == 2


async def test_batch_calls_wait_the_injected_backoff_and_its_retry_after_cap(
    fake_messages_api: FakeMessagesAPI,
    make_judge: MakeJudge,
) -> None:
    """A batch create retried after a 529 and a 429 draws the Backoff's steps and caps retry-after at its cap."""
    fake_messages_api.batch_processing(None)
    fake_messages_api.fail_batch_call("create", overloaded(), rate_limited(retry_after=30))
    rng = Recording()
    backoff = Backoff(base_s=0.01, max_s=0.05, retry_after_cap_s=0.3, rng=rng)
    batch = BatchJudge(make_judge("rubric", judge_kwargs={"backoff": backoff}))
    started = time.monotonic()
    await batch.submit([BatchItem("i0", QUESTION, TIGHT)])
    assert 0.3 <= time.monotonic() - started < 3
    assert rng.steps == [0.01, 0.02]
    assert [r.status for r in fake_messages_api.batch_calls("create")] == [529, 429, 200]


def _message(text: str) -> dict[str, Any]:
    """A Messages API reply in its wire format."""
    usage = {"input_tokens": 12, "output_tokens": 3, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
    content = [{"type": "text", "text": text}]
    return {"id": "msg_mock_1", "type": "message", "role": "assistant", "model": "claude-haiku-5-5", "content": content,
            "stop_reason": "end_turn", "stop_sequence": None, "usage": usage}  # fmt: skip


async def test_an_injected_http_client_carries_the_judge_requests() -> None:
    """Through an httpx2 MockTransport, with no server: a 529 is retried and the judge's reply is parsed."""
    seen: list[httpx2.Request] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        if len(seen) == 1:
            busy = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
            return httpx2.Response(529, json=busy)
        return httpx2.Response(200, json=_message(json.dumps({"reasoning": "Answers it.", "score": 3})))

    settings = JudgeSettings(judge="rubric", anthropic_api_key="sk-ant-mock", anthropic_base_url="http://judge.mock")
    http_client = httpx2.AsyncClient(transport=httpx2.MockTransport(answer))
    judge = RubricJudge(settings, backoff=FAST, http_client=http_client)
    try:
        verdict = await judge.judge(QUESTION, TIGHT)
    finally:
        await judge.aclose()
    assert (verdict.raw_score, verdict.reasoning, verdict.usage.input_tokens) == (3, "Answers it.", 12)
    assert [str(r.url) for r in seen] == ["http://judge.mock/v1/messages"] * 2
    body = json.loads(seen[-1].content)
    assert body["model"] == settings.model and QUESTION in body["messages"][0]["content"]
    assert seen[-1].headers["authorization"] == "Bearer sk-ant-mock"
    assert judge.stats["retry.overloaded"] == 1 and http_client.is_closed


async def test_a_judge_on_a_ready_client_sends_through_it_and_leaves_it_open(
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """A judge given a JudgeClient counts its calls there, and closing the judge leaves the client to its owner."""
    settings = judge_settings(fake_messages_api, "rubric").judge
    client = JudgeClient(settings, backoff=FAST)
    try:
        first = RubricJudge(settings, client=client)
        await first.judge(QUESTION, TIGHT)
        await first.aclose()
        second = RubricJudge(settings, client=client)
        assert second.client is client and (await second.judge(QUESTION, TIGHT)).score == 1.0
        assert client.stats["ok"] == 2 and first.info == second.info
    finally:
        await client.aclose()


def test_a_ready_client_comes_alone_and_for_the_judges_own_settings() -> None:
    """A ready client with options too, or built for other settings (another model), is refused."""
    settings = JudgeSettings(judge="rubric", anthropic_api_key="sk-ant-mock")
    client = JudgeClient(settings)
    with pytest.raises(TypeError, match="not both"):
        RubricJudge(settings, client=client, backoff=FAST)
    with pytest.raises(ValueError, match="other judge settings"):
        RubricJudge(settings.model_copy(update={"model": "claude-opus-5-5"}), client=client)
