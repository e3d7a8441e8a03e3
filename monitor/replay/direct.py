"""Scoring a replay's events one call each, as the service does: `GuardedJudge` (adaptive concurrency, the client-side
rate limit, the circuit breaker) and the batching, idempotent `ClickHouseSink`, under the replay's spending cap.

At most `max_in_flight` events are held at once, so memory stays flat whatever the range's size. `stop()` starts no
new call; `drain()` waits for the calls already out (each bounded by MONITOR_JUDGE_TIMEOUT_S), then the sink is
flushed by the caller."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime

import structlog

from consumers.sampling import SampleDecision
from monitor.judges.base import JudgeFailure
from monitor.judging.guarded_judge import GuardedJudge
from monitor.privacy.events import JudgedEvent
from monitor.replay.estimate import CostModel
from monitor.replay.spend_cap import SpendCap
from monitor.runtime.rows import TextPolicy, build_row
from monitor.runtime.sink import ClickHouseSink

log = structlog.get_logger("monitor.replay.direct")


class DirectScorer:
    """Judges events one call each and adds their rows to the sink, marked with `run_id`."""

    def __init__(
        self,
        guard: GuardedJudge,
        sink: ClickHouseSink[None],
        cost: CostModel,
        cap: SpendCap,
        *,
        run_id: str,
        text_policy: TextPolicy,
        max_in_flight: int,
        on_row_cost: Callable[[float | None], None],
    ) -> None:
        self.guard = guard
        self.sink = sink
        self.cost = cost
        self.cap = cap
        self.run_id = run_id
        self.text_policy = text_policy
        self._slots = asyncio.Semaphore(max_in_flight)
        self._tasks: set[asyncio.Task[None]] = set()
        self._on_row_cost = on_row_cost
        self.stopped = False

    @property
    def in_flight(self) -> int:
        """Events being judged now."""
        return len(self._tasks)

    async def score(self, event: JudgedEvent, decision: SampleDecision) -> bool:
        """Start judging one event once a slot is free; False (nothing started) when stopped or the cap is reached."""
        await self._slots.acquire()
        if self.stopped:
            self._slots.release()
            return False
        estimate = self.cost.judged_usd(event.judged) or 0.0
        reserved = self.cap.try_reserve(estimate)
        if reserved is None:
            self._slots.release()
            self.stopped = True
            log.info("replay_cap_reached", spent_usd=round(self.cap.spent, 6), max_usd=self.cap.max_usd)
            return False
        task = asyncio.create_task(self._judge(event, decision, reserved), name=f"replay-{event.judged.event_id[:32]}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _judge(self, event: JudgedEvent, decision: SampleDecision, reserved: float) -> None:
        try:
            outcome = await self.guard.judge_event(event.judged, still_wanted=lambda: True)
            assert outcome is not None  # still_wanted is always true: only a verdict or a failure ends the call
            cost = outcome.verdict.usage.cost_usd
            self.cap.settle(reserved, cost or 0.0)
            self._on_row_cost(cost)
            verdict = outcome.verdict
            row = build_row(
                event,
                self.guard.judge.info,
                decision,
                verdict,
                latency_ms=int(outcome.elapsed_s * 1000),
                scored_at=datetime.now(UTC),
                text_policy=self.text_policy,
                replay_run=self.run_id,
            )
            if isinstance(verdict, JudgeFailure):
                log.warning(
                    "replay_judge_failed",
                    event_id=event.judged.event_id,
                    partition=event.judged.source.partition,
                    offset=event.judged.source.offset,
                    error=row.error[:200],
                )
            self.sink.add(row, None)
        except asyncio.CancelledError:
            self.cap.release(reserved)
            raise
        finally:
            self._slots.release()

    def stop(self) -> None:
        """Start no new call (an interrupt, or the cap)."""
        self.stopped = True

    async def finish(self) -> None:
        """The range is read: nothing is held back here (each event's call started when it was scored)."""

    async def drain(self, timeout_s: float) -> int:
        """Wait for the calls already out, up to `timeout_s`; cancels the rest and returns how many were cancelled."""
        if not self._tasks:
            return 0
        _, pending = await asyncio.wait(set(self._tasks), timeout=timeout_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        return len(pending)
