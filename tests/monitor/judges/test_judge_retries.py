"""Timeouts, transient errors and backoff of the LLM judges, with faults served by the fake Messages API."""

from __future__ import annotations

import asyncio
import itertools
import socket
import time
from dataclasses import dataclass, field

import pytest

from monitor.backoff import Backoff, retry_after_seconds
from monitor.judges.rubric import RubricJudge
from schemas.errors import JudgeApiError, JudgeError, JudgeReplyInvalid, JudgeUnavailable
from tests.fake_messages_api import (
    Drop,
    FakeMessagesAPI,
    Fault,
    Reply,
    bad_request,
    overloaded,
    rate_limited,
    server_error,
    slow,
)
from tests.monitor.judges.conftest import QUESTION, TIGHT, MakeJudge, judge_settings


def gaps(api: FakeMessagesAPI) -> list[float]:
    """Seconds between consecutive Messages requests the fake received."""
    at = [r.at for r in api.message_requests]
    return [b - a for a, b in itertools.pairwise(at)]


async def test_429_waits_at_least_retry_after_then_succeeds(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge
) -> None:
    """A 429 waits at least its retry-after before the retry that succeeds, counted as rate_limited."""
    fake_messages_api.script(rate_limited(retry_after=1))
    judge = make_judge("rubric")
    j = await judge.judge(QUESTION, TIGHT)
    assert j.score == 1.0
    assert fake_messages_api.statuses() == [429, 200]
    assert gaps(fake_messages_api)[0] >= 1.0
    assert judge.stats["retry.rate_limited"] == 1 and judge.stats["attempts"] == 2


async def test_retry_after_is_capped(fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge) -> None:
    """A long retry-after is capped at the backoff's retry_after_cap_s, so the retry comes within a second or two."""
    fake_messages_api.script(rate_limited(retry_after=30))
    started = time.monotonic()
    backoff = Backoff(base_s=0.01, max_s=0.05, retry_after_cap_s=0.2)
    await make_judge("rubric", judge_kwargs={"backoff": backoff}).judge(QUESTION, TIGHT)
    assert 0.2 <= gaps(fake_messages_api)[0] and time.monotonic() - started < 3


@pytest.mark.parametrize(
    "fault",
    [
        overloaded(),
        server_error(),
        Fault(502, "api_error"),
        Fault(503, "api_error"),
        Fault(408, "timeout_error"),
        Fault(409, "conflict_error"),
        rate_limited(retry_after=None),
    ],
    ids=["529", "500", "502", "503", "408", "409", "429-no-retry-after"],
)
async def test_transient_statuses_are_retried_then_ok(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge, fault: Fault
) -> None:
    """Each transient status (529, 5xx, 408, 409, 429 without retry-after) is retried until a 200."""
    fake_messages_api.script(fault, fault)
    j = await make_judge("rubric", judge_max_retries=3).judge(QUESTION, TIGHT)
    assert j.score == 1.0
    assert fake_messages_api.statuses() == [fault.status, fault.status, 200]


async def test_three_529s_then_ok_within_three_retries(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge
) -> None:
    """Three 529s then a 200 succeed within three retries, with errors and retries counted."""
    fake_messages_api.fail_next(3, overloaded())
    judge = make_judge("statements", judge_max_retries=3)
    j = await judge.judge(QUESTION, TIGHT)
    assert j.score == 1.0
    assert fake_messages_api.statuses() == [529, 529, 529, 200]
    assert judge.stats["error.overloaded"] == 3 and judge.stats["retry.overloaded"] == 3 and judge.stats["retries"] == 3


@pytest.mark.parametrize("retries", [0, 3])
async def test_persistent_529_gives_up_with_unavailable(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge, retries: int
) -> None:
    """A persistent 529 raises JudgeUnavailable naming it after exactly retries + 1 requests."""
    fake_messages_api.always(overloaded())
    judge = make_judge("rubric", judge_max_retries=retries)
    with pytest.raises(JudgeUnavailable) as exc:
        await judge.judge(QUESTION, TIGHT)
    assert exc.value.reason == "unavailable"
    assert "overloaded" in str(exc.value) and "529" in str(exc.value)
    assert len(fake_messages_api.message_requests) == retries + 1
    assert judge.stats["gave_up.overloaded"] == 1


@dataclass(frozen=True, slots=True)
class RecordedBackoff(Backoff):
    """A `Backoff` that keeps each wait it hands out, so the test reads the waits chosen, not a loaded clock."""

    waits: list[float] = field(default_factory=list)

    def delay(self, retry: int, retry_after_s: float | None = None) -> float:
        """See `Backoff.delay`; the wait is also recorded."""
        wait = Backoff.delay(self, retry, retry_after_s)
        self.waits.append(wait)
        return wait


async def test_backoff_grows_exponentially_and_is_capped(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge
) -> None:
    """Waits between retries double from the backoff's base_s up to its max_s, with equal jitter, and are slept."""
    fake_messages_api.always(overloaded())
    backoff = RecordedBackoff(base_s=0.08, max_s=0.32)
    judge = make_judge("rubric", judge_max_retries=4, judge_kwargs={"backoff": backoff})
    with pytest.raises(JudgeUnavailable):
        await judge.judge(QUESTION, TIGHT)
    assert len(backoff.waits) == 4
    # Equal jitter: each wait is between half and all of min(cap, base * 2^n).
    for n, wait in enumerate(backoff.waits):
        step = min(0.32, 0.08 * 2**n)
        assert step / 2 <= wait <= step, (n, wait)
    # Each wait was slept before the next request (a loaded machine can only make the gaps longer).
    assert all(gap >= wait for gap, wait in zip(gaps(fake_messages_api), backoff.waits, strict=True))


async def test_outage_for_a_while_is_ridden_out(fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge) -> None:
    """An outage shorter than the retry budget is ridden out: 529s, then a 200."""
    fake_messages_api.fail_from_next_request_for(0.4)
    judge = make_judge("rubric", judge_max_retries=6, judge_kwargs={"backoff": Backoff(base_s=0.1, max_s=0.2)})
    j = await judge.judge(QUESTION, TIGHT)
    assert j.score == 1.0
    statuses = fake_messages_api.statuses()
    assert statuses[-1] == 200 and set(statuses[:-1]) == {529} and len(statuses) >= 3


async def test_slow_response_times_out_and_is_retried(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge
) -> None:
    """A reply slower than the request timeout is abandoned, counted as a timeout and retried."""
    fake_messages_api.script(slow(3.0))
    judge = make_judge("rubric", judge_request_timeout_s=0.3)
    started = time.monotonic()
    j = await judge.judge(QUESTION, TIGHT)
    assert j.score == 1.0
    assert time.monotonic() - started < 2.0
    assert len(fake_messages_api.message_requests) == 2
    assert judge.stats["error.timeout"] == 1 and judge.stats["retry.timeout"] == 1


async def test_persistently_slow_api_gives_up_with_unavailable(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge
) -> None:
    """An API that always answers past the timeout raises JudgeUnavailable (timeout) without waiting it out."""
    fake_messages_api.always(slow(3.0))
    judge = make_judge("rubric", judge_request_timeout_s=0.3, judge_max_retries=1)
    started = time.monotonic()
    with pytest.raises(JudgeUnavailable, match="timeout"):
        await judge.judge(QUESTION, TIGHT)
    assert time.monotonic() - started < 2.0
    assert len(fake_messages_api.message_requests) == 2


async def test_dropped_connection_is_retried(fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge) -> None:
    """A dropped connection is counted as a connection error and retried."""
    fake_messages_api.script(Drop())
    judge = make_judge("rubric")
    assert (await judge.judge(QUESTION, TIGHT)).score == 1.0
    assert judge.stats["error.connection"] == 1
    assert len(fake_messages_api.message_requests) == 2


async def test_unreachable_api_gives_up_with_unavailable(fake_messages_api: FakeMessagesAPI) -> None:
    """An address nobody listens on fails every attempt and raises JudgeUnavailable (connection)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket is closed
    settings = judge_settings(
        fake_messages_api, "rubric", anthropic_base_url=f"http://127.0.0.1:{port}", judge_max_retries=2
    )
    judge = RubricJudge(settings.judge, backoff=Backoff(base_s=0.01))
    try:
        with pytest.raises(JudgeUnavailable, match="connection"):
            await judge.judge(QUESTION, TIGHT)
        assert judge.stats["attempts"] == 3 and judge.stats["error.connection"] == 3
    finally:
        await judge.aclose()


@pytest.mark.parametrize(
    "fault",
    [
        bad_request("prompt too long"),
        Fault(401, "authentication_error", "invalid x-api-key"),
        Fault(403, "permission_error"),
        Fault(404, "not_found_error", "model not found"),
        Fault(413, "request_too_large"),
        Fault(422, "invalid_request_error"),
    ],
    ids=["400", "401", "403", "404", "413", "422"],
)
async def test_other_4xx_are_not_retried(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge, fault: Fault
) -> None:
    """A 400, 401, 403, 404, 413 or 422 is not retried and raises JudgeApiError naming the status."""
    fake_messages_api.always(fault)
    judge = make_judge("rubric", judge_max_retries=3)
    with pytest.raises(JudgeApiError) as exc:
        await judge.judge(QUESTION, TIGHT)
    assert exc.value.reason == "api_error"
    assert str(fault.status) in str(exc.value)
    assert len(fake_messages_api.message_requests) == 1
    assert judge.stats["gave_up.api_error"] == 1


async def test_invalid_and_transient_failures_share_one_budget(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge
) -> None:
    """Invalid replies and transient errors draw on one retry budget: four attempts with three retries."""
    fake_messages_api.script(overloaded(), Reply("nope"), overloaded(), Reply("nope"))
    with pytest.raises(JudgeReplyInvalid):
        await make_judge("rubric", judge_max_retries=3).judge(QUESTION, TIGHT)
    assert fake_messages_api.statuses() == [529, 200, 529, 200]


async def test_usage_counts_only_attempts_that_produced_a_reply(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge
) -> None:
    """Usage sums the tokens of attempts that produced a reply, not of the one that failed with 529."""
    usage = {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
    fake_messages_api.script(
        overloaded(), Reply("bad", usage=usage), Reply({"reasoning": "Ok.", "score": 4}, usage=usage)
    )
    judge = make_judge("rubric")
    j = await judge.judge(QUESTION, TIGHT)
    assert (j.usage.input_tokens, j.usage.output_tokens) == (20, 10)
    assert judge.stats["tokens.input"] == 20


async def test_rate_limit_mode_throttles_concurrent_judges_which_still_all_succeed(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge
) -> None:
    """Under a 3-per-second limit, six concurrent calls all succeed after retrying their 429s."""
    fake_messages_api.rate_limit(per_second=3, retry_after=0.5)
    judge = make_judge("rubric", judge_max_retries=6)
    results = await asyncio.gather(*(judge.judge(QUESTION, TIGHT) for _ in range(6)))
    assert [r.score for r in results] == [1.0] * 6
    statuses = fake_messages_api.statuses()
    assert statuses.count(200) == 6 and statuses.count(429) >= 3
    assert judge.stats["retry.rate_limited"] == statuses.count(429)


def test_retry_after_header_forms() -> None:
    """retry-after is read as seconds or an HTTP date, retry-after-ms wins; absent or unparseable is None."""
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after": "0.5"}) == 0.5
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_seconds({}) is None
    assert retry_after_seconds({"retry-after": "soon"}) is None
    in_3s = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 3))
    assert 1.0 <= (retry_after_seconds({"retry-after": in_3s}) or 0) <= 3.5


def test_error_reasons_are_stable_codes() -> None:
    """The judge errors carry stable reason codes and share the JudgeError base."""
    assert (JudgeApiError.reason, JudgeUnavailable.reason, JudgeReplyInvalid.reason) == (
        "api_error",
        "unavailable",
        "invalid_reply",
    )
    assert issubclass(JudgeApiError, JudgeError)
