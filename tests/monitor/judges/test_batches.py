"""The batch judge (monitor/judges/batches.py) against the fake Messages API's batch endpoints, through the real SDK."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from monitor.judges.base import JudgeFailure, Judgement
from monitor.judges.batches import BatchItem, BatchJudge, BatchStatus, custom_id_for
from monitor.judges.llm import EMPTY_REASONING
from monitor.judges.pricing import BATCH_DISCOUNT, DEFAULT_PRICES
from schemas.errors import JudgeApiError, JudgeUnavailable
from schemas.events import Turn
from tests.fake_messages_api import (
    Drop,
    FakeMessagesAPI,
    Fault,
    Reply,
    bad_request,
    canceled,
    expired,
    malformed,
    mismatched_verdicts,
    out_of_range_score,
    overloaded,
    rate_limited,
    server_error,
)
from tests.monitor.judges.conftest import PADDED, QUESTION, TIGHT, MakeJudge

MakeBatch = Callable[..., BatchJudge]
USAGE = {
    "input_tokens": 1000,
    "output_tokens": 100,
    "cache_read_input_tokens": 5000,
    "cache_creation_input_tokens": 2000,
}


@pytest.fixture
def make_batch(fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge) -> MakeBatch:
    """Batch judges over `make_judge`'s judges (closed by that fixture); batches end only when a test says so."""
    fake_messages_api.batch_processing(None)

    def make(method: str = "rubric", **overrides: Any) -> BatchJudge:
        return BatchJudge(make_judge(method, **overrides))

    return make


def items(*pairs: tuple[str, str]) -> list[BatchItem]:
    """Batch items with custom ids i0, i1, ..."""
    return [BatchItem(f"i{n}", q, r) for n, (q, r) in enumerate(pairs)]


async def judged(
    api: FakeMessagesAPI, batch: BatchJudge, batch_items: list[BatchItem]
) -> dict[str, Judgement | JudgeFailure]:
    """Submit, end the batch at the fake, and read every outcome."""
    batch_id = await batch.submit(batch_items)
    api.end_batch(batch_id)
    return await batch.results(batch_id)


def failure(outcome: Judgement | JudgeFailure) -> JudgeFailure:
    """`outcome`, asserted to be a failure."""
    assert isinstance(outcome, JudgeFailure), outcome
    return outcome


def judgement(outcome: Judgement | JudgeFailure) -> Judgement:
    """`outcome`, asserted to be a judgement."""
    assert isinstance(outcome, Judgement), outcome
    return outcome


def without_section_code(body: dict[str, Any]) -> dict[str, Any]:
    """`body` with the user message's random section code replaced by CODE (it differs on every request)."""
    [message] = body["messages"]
    codes = set(re.findall(r"</assistant_response_([0-9a-f]+)>", message["content"]))
    assert len(codes) == 1
    return {**body, "messages": [{**message, "content": message["content"].replace(codes.pop(), "CODE")}]}


async def test_rubric_submit_status_results(fake_messages_api: FakeMessagesAPI, make_batch: MakeBatch) -> None:
    """A rubric batch is in progress until it ends, then its counts and judgements match the one-call path's."""
    batch = make_batch("rubric")
    batch_id = await batch.submit(items((QUESTION, TIGHT), (QUESTION, PADDED)))
    assert await batch.status(batch_id) == BatchStatus(
        batch_id, ended=False, processing=2, succeeded=0, errored=0, canceled=0, expired=0
    )
    fake_messages_api.end_batch(batch_id)
    assert await batch.status(batch_id) == BatchStatus(
        batch_id, ended=True, processing=0, succeeded=2, errored=0, canceled=0, expired=0
    )
    got = await batch.results(batch_id)
    direct = [await batch.judge.judge(QUESTION, TIGHT), await batch.judge.judge(QUESTION, PADDED)]
    tight, padded = judgement(got["i0"]), judgement(got["i1"])
    assert (tight.score, tight.raw_score, padded.score, padded.raw_score) == (1.0, 4.0, 0.25, 1.0)
    assert [(j.score, j.raw_score, j.reasoning) for j in (tight, padded)] == [
        (j.score, j.raw_score, j.reasoning) for j in direct
    ]
    assert batch.stats["result.ok"] == 2


async def test_statements_submit_status_results(fake_messages_api: FakeMessagesAPI, make_batch: MakeBatch) -> None:
    """A statements batch gives the statements, verdicts and score the one-call path gives."""
    batch = make_batch("statements")
    got = await judged(fake_messages_api, batch, items((QUESTION, PADDED)))
    padded = judgement(got["i0"])
    direct = await batch.judge.judge(QUESTION, PADDED)
    assert padded.score == pytest.approx(1 / 3)
    assert (padded.statements, padded.verdicts, padded.verdict_reasons, padded.reasoning) == (
        direct.statements,
        direct.verdicts,
        direct.verdict_reasons,
        direct.reasoning,
    )


@pytest.mark.parametrize("method", ["rubric", "statements"])
async def test_batch_request_params_equal_the_normal_request_body(
    fake_messages_api: FakeMessagesAPI, make_batch: MakeBatch, method: str
) -> None:
    """Each batched request's params are the one-call path's body: model, max_tokens, cached system block, schema, user
    text."""
    batch = make_batch(method, judge_model="claude-sonnet-5-5", judge_max_tokens=333, judge_max_input_chars=500)
    long_response = TIGHT + " x" * 400  # truncated the same way on both paths
    await batch.judge.judge(QUESTION, long_response)
    await batch.submit(items((QUESTION, long_response)))
    [normal] = fake_messages_api.message_requests
    [batched] = fake_messages_api.batch_requests
    assert batched.body["model"] == "claude-sonnet-5-5" and batched.body["max_tokens"] == 333
    assert batched.body["system"] == [
        {"type": "text", "text": batch.judge.system_prompt, "cache_control": {"type": "ephemeral"}}
    ]
    assert "output_config" in batched.body
    assert without_section_code(batched.body) == without_section_code(normal.body)
    assert batched.section("assistant_response") == normal.section("assistant_response")


async def test_a_batched_follow_up_carries_its_context_as_the_one_call_path_does(
    fake_messages_api: FakeMessagesAPI, make_batch: MakeBatch
) -> None:
    """A batch item's earlier turns and system instructions go out in their sections, as in a single call."""
    batch = make_batch("rubric")
    context = (Turn("user", "Which order shipped first?"), Turn("assistant", "Order A17, then order B2."))
    system = "You answer questions about orders."
    await batch.judge.judge(QUESTION, TIGHT, context=context, system=system)
    await batch.submit([BatchItem("i0", QUESTION, TIGHT, context, system)])
    [normal] = fake_messages_api.message_requests
    [batched] = fake_messages_api.batch_requests
    assert without_section_code(batched.body) == without_section_code(normal.body)
    assert batched.section("system_instructions") == system
    conversation = batched.section("conversation_before")
    assert conversation is not None and all(t.text in conversation for t in context)


@pytest.mark.parametrize("method", ["rubric", "statements"])
def test_info_is_the_wrapped_judges(make_batch: MakeBatch, method: str) -> None:
    """The batch judge is the same judge on another transport: identical info and judge id."""
    batch = make_batch(method)
    assert batch.info == batch.judge.info and batch.info.judge_id.startswith(f"{method}-")


@pytest.mark.parametrize(
    ("fault", "transient", "rate_limited_"),
    [
        (overloaded(), True, False),
        (server_error(), True, False),
        (rate_limited(), True, True),
        (Fault(504, "timeout_error", "timed out"), True, False),
        (bad_request("prompt is too long"), False, False),
        (Fault(403, "permission_error", "no access"), False, False),
    ],
    ids=["overloaded", "api_error", "rate_limited", "timeout", "invalid_request", "permission"],
)
async def test_errored_entries_are_failures_with_the_api_error_type(
    fake_messages_api: FakeMessagesAPI, make_batch: MakeBatch, fault: Fault, transient: bool, rate_limited_: bool
) -> None:
    """An errored entry is an `unavailable` JudgeFailure for the provider's own errors (transient) and an `api_error`
    otherwise, its detail led by the API's error type; unbilled."""
    fake_messages_api.script_batch(fault)
    got = failure((await judged(fake_messages_api, make_batch(), items((QUESTION, TIGHT))))["i0"])
    reason = "unavailable" if transient else "api_error"
    assert (got.reason, got.transient, got.rate_limited) == (reason, transient, rate_limited_)
    assert got.detail == f"{fault.error_type}: {fault.message}"
    assert got.usage.tokens == 0 and got.usage.cost_usd == 0.0


async def test_expired_batch_entries_are_transient_failures(
    fake_messages_api: FakeMessagesAPI, make_batch: MakeBatch
) -> None:
    """Entries of an expired batch are transient `expired` failures, while processed entries keep their judgement."""
    batch = make_batch()
    fake_messages_api.script_batch(Reply({"reasoning": "On topic.", "score": 3}))
    batch_id = await batch.submit(items((QUESTION, TIGHT), (QUESTION, PADDED)))
    fake_messages_api.expire_batch(batch_id)
    assert (await batch.status(batch_id)).expired == 1
    got = await batch.results(batch_id)
    assert judgement(got["i0"]).raw_score == 3
    late = failure(got["i1"])
    assert (late.reason, late.transient, late.usage.cost_usd) == ("expired", True, 0.0)


async def test_cancel_gives_transient_canceled_failures(
    fake_messages_api: FakeMessagesAPI, make_batch: MakeBatch
) -> None:
    """After `cancel`, the batch ends and its unprocessed entries are transient `canceled` failures."""
    batch = make_batch()
    batch_id = await batch.submit(items((QUESTION, TIGHT), (QUESTION, PADDED)))
    await batch.cancel(batch_id)
    assert [r.status for r in fake_messages_api.batch_calls("cancel")] == [200]
    status = await batch.status(batch_id)
    assert status.ended and status.canceled == 2
    got = await batch.results(batch_id)
    assert {k: (failure(v).reason, failure(v).transient) for k, v in got.items()} == {
        "i0": ("canceled", True),
        "i1": ("canceled", True),
    }


async def test_scripted_expired_and_canceled_entries(fake_messages_api: FakeMessagesAPI, make_batch: MakeBatch) -> None:
    """An entry scripted as expired or canceled inside an otherwise processed batch is that failure."""
    fake_messages_api.script_batch(expired(), canceled())
    got = await judged(fake_messages_api, make_batch(), items((QUESTION, TIGHT), (QUESTION, TIGHT), (QUESTION, TIGHT)))
    assert [failure(got["i0"]).reason, failure(got["i1"]).reason] == ["expired", "canceled"]
    assert judgement(got["i2"]).score == 1.0


@pytest.mark.parametrize(
    ("method", "bad"),
    [
        ("rubric", malformed()),
        ("rubric", out_of_range_score()),
        ("rubric", Reply("")),
        ("statements", mismatched_verdicts()),
        ("rubric", Reply('{"reasoning": "On top', stop_reason="max_tokens")),
        ("rubric", Reply({"reasoning": "x", "score": 4}, stop_reason="refusal")),
    ],
    ids=["malformed", "out-of-range", "empty", "mismatched-verdicts", "max-tokens", "refusal"],
)
async def test_invalid_replies_are_invalid_reply_failures_that_were_paid_for(
    fake_messages_api: FakeMessagesAPI, make_batch: MakeBatch, method: str, bad: Reply
) -> None:
    """A succeeded entry whose reply is invalid, cut off or refused is a non-transient invalid_reply failure, billed at
    the batch price."""
    fake_messages_api.script_batch(Reply(bad.text, stop_reason=bad.stop_reason, usage=USAGE))
    got = failure((await judged(fake_messages_api, make_batch(method), items((QUESTION, TIGHT))))["i0"])
    assert (got.reason, got.transient) == ("invalid_reply", False)
    assert got.usage.tokens == sum(USAGE.values())
    assert got.usage.cost_usd == pytest.approx(
        DEFAULT_PRICES["claude-haiku-5-5"].cost(1000, 100, 5000, 2000) * BATCH_DISCOUNT
    )


async def test_results_are_priced_at_the_batch_discount(
    fake_messages_api: FakeMessagesAPI, make_batch: MakeBatch
) -> None:
    """A succeeded entry's cost is its tokens at the list price times BATCH_DISCOUNT (half), cache tokens included."""
    fake_messages_api.script_batch(Reply({"reasoning": "On topic.", "score": 4}, usage=USAGE))
    j = judgement(
        (await judged(fake_messages_api, make_batch(judge_model="claude-sonnet-5-5"), items((QUESTION, TIGHT))))["i0"]
    )
    u = j.usage
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens) == (1000, 100, 5000, 2000)
    price = DEFAULT_PRICES["claude-sonnet-5-5"]
    assert BATCH_DISCOUNT == 0.5
    assert u.cost_usd == pytest.approx(price.cost(1000, 100, 5000, 2000) / 2)
    assert u.cost_usd == pytest.approx(price.batch_cost(1000, 100, 5000, 2000))


async def test_cost_is_none_for_a_model_without_a_price(
    fake_messages_api: FakeMessagesAPI, make_batch: MakeBatch
) -> None:
    """Without a price a result's cost is None (its tokens still counted), and so is an errored entry's."""
    fake_messages_api.script_batch(Reply(), overloaded())
    got = await judged(
        fake_messages_api,
        make_batch(judge_model="claude-unpriced-test-model"),
        items((QUESTION, TIGHT), (QUESTION, TIGHT)),
    )
    ok = judgement(got["i0"])
    assert ok.usage.cost_usd is None and ok.usage.input_tokens > 0
    assert failure(got["i1"]).usage.cost_usd is None


async def test_batched_requests_read_the_prompt_cache(
    fake_messages_api: FakeMessagesAPI, make_batch: MakeBatch
) -> None:
    """The first request of a batch writes the system prompt to the cache and the next ones read it."""
    got = await judged(fake_messages_api, make_batch(), items((QUESTION, TIGHT), (QUESTION, PADDED)))
    first, second = judgement(got["i0"]).usage, judgement(got["i1"]).usage
    assert (
        first.cache_write_tokens > 0
        and second.cache_read_tokens == first.cache_write_tokens
        and second.cache_write_tokens == 0
    )


@pytest.mark.parametrize("response", ["", "   ", "\n\t"])
async def test_blank_responses_need_no_request(
    fake_messages_api: FakeMessagesAPI, make_batch: MakeBatch, response: str
) -> None:
    """A blank response gets the empty-response verdict from without_call, and cannot be submitted."""
    batch = make_batch()
    verdict = batch.without_call(QUESTION, response)
    assert verdict is not None and (verdict.score, verdict.reasoning) == (0.0, EMPTY_REASONING)
    assert batch.without_call(QUESTION, TIGHT) is None
    with pytest.raises(ValueError, match="needs no request"):
        await batch.submit(items((QUESTION, TIGHT), (QUESTION, response)))
    assert fake_messages_api.requests == []


@pytest.mark.parametrize("endpoint", ["create", "retrieve"])
async def test_a_529_on_create_or_retrieve_is_retried(
    fake_messages_api: FakeMessagesAPI, make_batch: MakeBatch, endpoint: str
) -> None:
    """A 529 and a dropped connection on create or retrieve are retried with backoff, then the call succeeds."""
    batch = make_batch()
    fake_messages_api.fail_batch_call(endpoint, overloaded(), Drop())  # type: ignore[arg-type]
    batch_id = await batch.submit(items((QUESTION, TIGHT)))
    assert (await batch.status(batch_id)).processing == 1
    assert [r.status for r in fake_messages_api.batch_calls(endpoint)][:3] == [529, 0, 200]  # type: ignore[arg-type]
    assert len(fake_messages_api.batch_requests) == 1  # the failed creates made no batch
    assert (batch.stats["retry.overloaded"], batch.stats["retry.connection"]) == (1, 1)


async def test_a_failed_results_download_is_retried(fake_messages_api: FakeMessagesAPI, make_batch: MakeBatch) -> None:
    """A 500 on the results download is retried and the results then arrive."""
    batch = make_batch()
    fake_messages_api.fail_batch_call("results", server_error())
    got = await judged(fake_messages_api, batch, items((QUESTION, TIGHT)))
    assert judgement(got["i0"]).score == 1.0
    assert [r.status for r in fake_messages_api.batch_calls("results")] == [500, 200]


async def test_persistent_overload_gives_up_with_judge_unavailable(
    fake_messages_api: FakeMessagesAPI, make_batch: MakeBatch
) -> None:
    """A create that keeps getting 529 raises JudgeUnavailable (kind overloaded) after exactly retries + 1 calls."""
    fake_messages_api.fail_batch_call("create", *[overloaded()] * 5)
    with pytest.raises(JudgeUnavailable) as exc:
        await make_batch(judge_max_retries=2).submit(items((QUESTION, TIGHT)))
    assert exc.value.kind == "overloaded" and "after 3 attempts" in str(exc.value)
    assert len(fake_messages_api.batch_calls("create")) == 3


async def test_an_unknown_batch_is_an_api_error_without_retry(
    fake_messages_api: FakeMessagesAPI, make_batch: MakeBatch
) -> None:
    """A 404 for an unknown batch raises JudgeApiError at once."""
    with pytest.raises(JudgeApiError, match="not_found_error"):
        await make_batch().status("msgbatch_unknown")
    assert len(fake_messages_api.batch_calls("retrieve")) == 1


async def test_results_before_the_end_are_unavailable(
    fake_messages_api: FakeMessagesAPI, make_batch: MakeBatch
) -> None:
    """Reading the results of a batch still in progress raises JudgeUnavailable (kind in_progress), not retried."""
    batch = make_batch()
    batch_id = await batch.submit(items((QUESTION, TIGHT)))
    with pytest.raises(JudgeUnavailable) as exc:
        await batch.results(batch_id)
    assert exc.value.kind == "in_progress"
    assert len(fake_messages_api.batch_calls("retrieve")) == 1 and fake_messages_api.batch_calls("results") == []


def test_custom_ids_are_valid_and_deterministic() -> None:
    """custom_id_for is stable, matches the API's pattern for any event id, and differs by judge and by event."""
    a = custom_id_for("rubric-0123456789ab", "event/1 with spaces & ünïcode" * 10)
    assert a == custom_id_for("rubric-0123456789ab", "event/1 with spaces & ünïcode" * 10)
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", a)
    assert custom_id_for("rubric-0123456789ab", "e1") != custom_id_for("rubric-0123456789ab", "e2")
    assert custom_id_for("rubric-0123456789ab", "e1") != custom_id_for("statements-0123456789ab", "e1")
    # The separator keeps (judge, event) pairs apart that would concatenate alike.
    assert custom_id_for("ab", "c") != custom_id_for("a", "bc")


async def test_custom_ids_from_custom_id_for_are_accepted_by_the_api(
    fake_messages_api: FakeMessagesAPI, make_batch: MakeBatch
) -> None:
    """Batches keyed by custom_id_for are accepted, and each outcome comes back under its event's id."""
    batch = make_batch()
    ids = {custom_id_for(batch.info.judge_id, f"evt-{n}"): n for n in range(3)}
    got = await judged(fake_messages_api, batch, [BatchItem(c, QUESTION, TIGHT) for c in ids])
    assert set(got) == set(ids)


@pytest.mark.parametrize(
    ("bad", "complaint"),
    [
        (items((QUESTION, TIGHT)) * 2, "appears twice"),
        ([BatchItem("not valid!", QUESTION, TIGHT)], "invalid custom_id"),
        ([BatchItem("x" * 65, QUESTION, TIGHT)], "invalid custom_id"),
        ([], "at least one item"),
    ],
    ids=["duplicate", "bad-characters", "too-long", "empty"],
)
async def test_submit_refuses_what_the_api_would_reject(
    fake_messages_api: FakeMessagesAPI, make_batch: MakeBatch, bad: list[BatchItem], complaint: str
) -> None:
    """Duplicate or invalid custom ids and an empty batch raise ValueError before any request is sent."""
    with pytest.raises(ValueError, match=complaint):
        await make_batch().submit(bad)
    assert fake_messages_api.requests == []
