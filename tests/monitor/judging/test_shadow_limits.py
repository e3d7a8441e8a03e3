"""The shadow judge shares the primary's limits from below: the same concurrency slots, rate tokens and circuit,
served only while no primary call waits, and never steering them. Plus its settings and the rows a record owes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from aiokafka import TopicPartition

from consumers.offsets import Ticket
from monitor.config import load_settings
from monitor.judges.base import JudgeInfo, Judgement
from monitor.judging.flow import AdaptiveLimiter, BreakerState, CircuitBreaker, PriorityLock, RateLimiter
from monitor.judging.guarded_judge import GuardedJudge, JudgeLimits, JudgeOutcome, ShadowGuardedJudge
from monitor.judging.settings import FlowSettings
from monitor.judging.shadow import RowsOwed
from monitor.runtime.metrics import Metrics
from schemas.errors import ConfigError, JudgeUnavailable
from schemas.events import ConversationEvent, KafkaPosition
from schemas.usage import Usage


class GateJudge:
    """A judge double that logs each call's question in a shared list and, when gated, waits for the gate."""

    def __init__(self, name: str, calls: list[str], gate: asyncio.Event | None = None, fail: bool = False) -> None:
        """A judge named `name` (its judge_id) appending to `calls`."""
        self.info = JudgeInfo(method=name, model="none", judge_id=f"{name}-1")
        self.stats: dict[str, int] = {}
        self.rate_limited = 0
        self.calls = calls
        self.gate = gate
        self.fail = fail
        self.active = 0

    async def judge(self, question: str, response: str, **_context: object) -> Judgement:
        """Record the call, wait at the gate if any, then score 1 (or fail transiently)."""
        self.calls.append(question)
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise JudgeUnavailable("shadow model overloaded", kind="overloaded")
        return Judgement(score=1.0, raw_score=1.0, reasoning="ok")

    async def aclose(self) -> None:
        """Nothing to close."""


def event(name: str) -> ConversationEvent:
    """An event whose question is `name` (what the judge doubles log)."""
    return ConversationEvent(
        event_id=name,
        conversation_id=f"c-{name}",
        event_time=datetime.now(UTC),
        app="a",
        model="m",
        prompt_version="v1",
        metadata={},
        question=name,
        response="r",
        shape="flat",
        source=KafkaPosition(topic="t", partition=0, offset=0),
    )


def guards(
    primary_judge: GateJudge, shadow_judge: GateJudge, flow: FlowSettings, limits: JudgeLimits | None = None
) -> tuple[GuardedJudge, ShadowGuardedJudge]:
    """A primary guard and a shadow guard sharing its limits."""
    spent: list[Usage] = []
    primary = GuardedJudge(primary_judge, flow, Metrics(), on_spent=spent.append, limits=limits)
    return primary, ShadowGuardedJudge(shadow_judge, primary, Metrics(), on_spent=spent.append)


async def until(predicate: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    """Yield to the loop until `predicate` holds (fails after `timeout_s`, never asserting on a duration)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"never happened: {what}"
        await asyncio.sleep(0.01)


async def judge(guard: GuardedJudge, name: str) -> JudgeOutcome | None:
    """Judge the event `name` through `guard`, always wanted."""
    return await guard.judge_event(event(name), still_wanted=lambda: True)


async def test_the_shadow_takes_the_primary_slots_only_when_no_primary_call_waits() -> None:
    """With one shared slot, a waiting primary call goes before a shadow call that queued earlier; never two at once."""
    calls: list[str] = []
    gate = asyncio.Event()
    primary, shadow = guards(
        GateJudge("primary", calls, gate), GateJudge("shadow", calls, gate), FlowSettings(judge_concurrency=1)
    )
    first = asyncio.create_task(judge(primary, "p1"))
    await until(lambda: calls == ["p1"], "the first primary call holds the only slot")
    queued = [asyncio.create_task(judge(shadow, "s1")), asyncio.create_task(judge(primary, "p2"))]
    await until(lambda: len(primary.limiter._waiters) == 1 and len(primary.limiter._low_waiters) == 1, "both queued")
    assert calls == ["p1"] and primary.limiter.active == 1  # the shadow did not get a slot of its own
    gate.set()
    await asyncio.gather(first, *queued)
    assert calls == ["p1", "p2", "s1"]
    assert shadow.limiter is primary.limiter and primary.limiter.active == 0


async def test_the_shadow_takes_its_rate_tokens_from_the_primary_bucket_after_waiting_primaries() -> None:
    """One shared token bucket: the shadow's request waits for a token behind every primary request queued."""
    calls: list[str] = []
    started = time.monotonic()
    rate = RateLimiter(
        requests_per_minute=60, tokens_per_minute=None, clock=lambda: (time.monotonic() - started) * 20
    )  # a token per 50 ms
    flow = FlowSettings(judge_concurrency=8)
    limits = JudgeLimits(AdaptiveLimiter(8), rate, CircuitBreaker())
    primary, shadow = guards(GateJudge("primary", calls), GateJudge("shadow", calls), flow, limits)
    await judge(primary, "p1")  # the bucket's only token
    # Created together, they first run in this order: p2 holds the bucket waiting for a refill, s1 and p3 queue.
    tasks = [
        asyncio.create_task(judge(primary, "p2")),
        asyncio.create_task(judge(shadow, "s1")),
        asyncio.create_task(judge(primary, "p3")),
    ]
    await asyncio.gather(*tasks)
    assert calls == ["p1", "p2", "p3", "s1"]
    assert shadow.rate is primary.rate


async def test_the_shadow_waits_for_a_closed_circuit_and_never_takes_the_probe() -> None:
    """While the primary's circuit is open the shadow calls nothing, and it leaves the half-open probe to the
    primary."""
    calls: list[str] = []
    now = [0.0]
    limits = JudgeLimits(
        AdaptiveLimiter(4), RateLimiter(None, None), CircuitBreaker(threshold=1, cooldown_s=1.0, clock=lambda: now[0])
    )
    primary, shadow = guards(GateJudge("primary", calls), GateJudge("shadow", calls), FlowSettings(), limits)
    primary.breaker.on_failure()  # the primary's judge has been failing: open
    now[0] = 5.0  # past the cooldown: the next caller that asks may probe
    waiting = asyncio.create_task(judge(shadow, "s1"))
    await asyncio.sleep(0.2)  # several rounds of its wait
    assert calls == [] and primary.breaker.state is BreakerState.OPEN  # no call, and no probe taken
    await judge(primary, "probe")  # the primary probes, succeeds: closed
    await waiting
    assert calls == ["probe", "s1"] and not primary.breaker.is_open


async def test_shadow_failures_end_in_error_after_the_attempts_and_steer_no_limit() -> None:
    """A shadow judge that keeps failing transiently gets an error after `judge_event_attempts` calls; the shared
    circuit stays closed and the adaptive limit unmoved, so the primary judges on as before."""
    calls: list[str] = []
    flow = FlowSettings(judge_concurrency=4, judge_event_attempts=3, breaker_threshold=2)
    primary, shadow = guards(GateJudge("primary", calls), GateJudge("shadow", calls, fail=True), flow)
    for n in range(4):
        outcome = await shadow.judge_event(event(f"s{n}"), still_wanted=lambda: True)
        assert (
            outcome is not None
            and not isinstance(outcome.verdict, Judgement)
            and outcome.verdict.reason == "unavailable"
        )
    assert calls == [f"s{n}" for n in range(4) for _ in range(3)]
    assert (
        primary.breaker.state is BreakerState.CLOSED and primary.breaker.failures == 0 and primary.limiter.limit == 4.0
    )
    ok = await judge(primary, "p1")
    assert ok is not None and calls[-1] == "p1"


async def test_an_unwanted_shadow_event_is_not_judged() -> None:
    """A shadow event whose partition was revoked before its call returns None without calling."""
    calls: list[str] = []
    _, shadow = guards(GateJudge("primary", calls), GateJudge("shadow", calls), FlowSettings())
    assert await shadow.judge_event(event("s1"), still_wanted=lambda: False) is None and calls == []


async def test_the_priority_lock_serves_normal_waiters_first_and_survives_cancellation() -> None:
    """Normal waiters are handed the lock before low ones, and a cancelled waiter (even one just handed it) passes it
    on."""
    lock = PriorityLock()
    order: list[str] = []

    async def take(name: str, low: bool) -> None:
        await lock.acquire(low)
        order.append(name)
        lock.release()

    await lock.acquire()
    tasks = {
        n: asyncio.create_task(take(n, low))
        for n, low in (("low1", True), ("high1", False), ("low2", True), ("high2", False))
    }
    await asyncio.sleep(0)
    tasks["high2"].cancel()
    lock.release()
    await asyncio.gather(*tasks.values(), return_exceptions=True)
    assert order == ["high1", "low1", "low2"] and not lock.locked
    await lock.acquire()
    handed = asyncio.create_task(take("handed", False))
    await asyncio.sleep(0)
    lock.release()  # handed the lock...
    handed.cancel()  # ...and cancelled before it ran
    await asyncio.gather(handed, return_exceptions=True)
    assert not lock.locked


def test_rows_owed_settle_a_shadowed_record_on_its_second_row() -> None:
    """A record owing two rows is done on the second acknowledgement, in either order; one owing one row at once."""
    tp = TopicPartition("t", 0)
    owed = RowsOwed()
    one, two = Ticket(tp, 1, 1), Ticket(tp, 2, 1)
    owed.expect(one, 1)
    owed.expect(two, 2)
    assert owed.settle(one) and len(owed) == 1
    assert not owed.settle(two) and owed.settle(two) and len(owed) == 0
    owed.expect(Ticket(tp, 3, 1), 2)
    owed.expect(Ticket(TopicPartition("t", 1), 3, 1), 2)
    owed.forget([tp])  # revoked: its records are forgotten, the other partition's kept
    assert len(owed) == 1


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"judge": "lexical", "shadow_judge": "lexical"},
            "invalid setting MONITOR_SHADOW_JUDGE: is the primary judge itself (MONITOR_JUDGE=lexical)",
        ),
        (
            {"judge": "statements", "shadow_judge": "statements"},
            "is the primary judge itself (MONITOR_JUDGE=statements with model claude-haiku-5-5)",
        ),
        (
            {"judge": "rubric", "shadow_judge": "rubric", "shadow_judge_model": "claude-haiku-5-5"},
            "invalid setting MONITOR_SHADOW_JUDGE: is the primary judge itself",
        ),
        (
            {"shadow_judge_model": "claude-sonnet-5-5"},
            "invalid setting MONITOR_SHADOW_JUDGE: unset, but MONITOR_SHADOW_JUDGE_MODEL is set",
        ),
    ],
)
def test_a_shadow_that_is_the_primary_judge_is_refused_in_one_line(overrides: dict[str, str], message: str) -> None:
    """A shadow with the primary's method and model (its rows would replace the primary's) or a model without a shadow
    is one line."""
    with pytest.raises(ConfigError) as info:
        load_settings(**overrides)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_the_shadow_client_is_the_primary_client_with_its_own_method_and_model() -> None:
    """The shadow judge gets the primary's client settings, its own method, and the primary's model unless it names
    one."""
    s = load_settings(
        judge="rubric",
        judge_model="claude-haiku-5-5",
        shadow_judge="statements",
        judge_max_tokens=333,
        anthropic_api_key="k",
    )
    client = s.shadow_judge
    assert client is not None and (
        client.method,
        client.model,
        client.max_tokens,
        client.api_key and client.api_key.get_secret_value(),
    ) == (
        "statements",
        "claude-haiku-5-5",
        333,
        "k",
    )
    other = load_settings(
        judge="statements", shadow_judge="statements", shadow_judge_model="claude-sonnet-5-5"
    ).shadow_judge
    assert other is not None and other.model == "claude-sonnet-5-5"
    off = load_settings()
    assert off.shadow_judge is None and off.shadow.method is None and off.shadow.sample_rate == 0.05
