"""Guarded judging against the real client and the fake Messages API: AIMD backs off once per burst of 429s and
climbs back when the provider recovers."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

from monitor.judges.base import Judgement
from monitor.judges.rubric import RubricJudge
from monitor.judging.flow import AdaptiveLimiter
from monitor.judging.guarded_judge import GuardedJudge
from monitor.judging.settings import FlowSettings
from monitor.runtime.metrics import Metrics
from schemas.events import ConversationEvent, KafkaPosition
from schemas.usage import Usage
from tests.fake_messages_api import FakeMessagesAPI, rate_limited
from tests.monitor.judges.conftest import FAST, QUESTION, TIGHT, judge_settings


def _event(n: int) -> ConversationEvent:
    return ConversationEvent(
        event_id=f"e{n}",
        conversation_id=f"c{n}",
        event_time=datetime.now(UTC),
        app="a",
        model="m",
        prompt_version="v1",
        metadata={},
        question=f"{QUESTION} ({n})",
        response=TIGHT,
        shape="flat",
        source=KafkaPosition(topic="t", partition=0, offset=n),
    )


def test_a_burst_of_rate_limits_in_one_window_halves_the_limit_once() -> None:
    """Sixteen 429s reported within one round-trip window lower the limit once (16 → 8), not sixteen times."""
    t = [0.0]
    lim = AdaptiveLimiter(ceiling=16, floor=1, clock=lambda: t[0])
    lim.record_latency(1.0)
    lowered = [lim.on_rate_limited() for _ in range(16)]
    assert lowered.count(True) == 1 and lim.current == 8
    t[0] += 1.01  # the next window: a new burst lowers it again
    assert lim.on_rate_limited() and lim.current == 4


async def test_concurrency_halves_once_under_a_429_burst_and_recovers(fake_messages_api: FakeMessagesAPI) -> None:
    """With 16 calls in flight all meeting a 429, the limit falls to 8 (not the floor), then climbs back to 16."""
    settings = judge_settings(fake_messages_api, "rubric", judge_max_retries=2)
    judge = RubricJudge(settings.judge, backoff=FAST)
    spent: list[Usage] = []
    guard = GuardedJudge(
        judge, FlowSettings(judge_concurrency=16, breaker_threshold=1000), Metrics(), on_spent=spent.append
    )
    fake_messages_api.fail_next(16, rate_limited(retry_after=0.05))
    lowest = 16
    try:
        first = [guard.judge_event(_event(n), still_wanted=lambda: True) for n in range(16)]
        outcomes = await asyncio.gather(*first)
        lowest = min(lowest, guard.limiter.current)
        assert all(o is not None and isinstance(o.verdict, Judgement) for o in outcomes)
        assert judge.rate_limited == 16 and guard.limiter.decreases == 1 and lowest == 8
        started, n = time.monotonic(), 16
        while guard.limiter.current < 16:  # the provider is healthy again: additive increase
            await asyncio.gather(*(guard.judge_event(_event(n + i), still_wanted=lambda: True) for i in range(16)))
            n += 16
            assert time.monotonic() - started < 20, f"limit still {guard.limiter.current} after {n} calls"
        recovered_s = time.monotonic() - started
        print(f"recovered to 16 after {n - 16} successful calls in {recovered_s:.2f}s")
        assert n - 16 <= 200
    finally:
        await judge.aclose()
