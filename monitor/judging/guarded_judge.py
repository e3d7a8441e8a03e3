"""Guarded judging: one judge behind a circuit breaker, adaptive concurrency (AIMD), a client-side rate limit and
a timeout, with deferral of transient failures. Whatever happens, the caller gets a typed `JudgeOutcome`.

The limits (`JudgeLimits`) belong to the pipeline, not to a judge: the shadow judge (`ShadowGuardedJudge`) passes
the very same ones as the primary, below it. It obeys them (a slot, a rate token, a closed circuit) in the low lane,
so it never queues ahead of a primary call, and it never steers them: its outcomes do not open or close the circuit,
move the adaptive limit or count as the provider's 429s for freshness, so a failing shadow cannot slow the primary
down beyond the slots and tokens its own calls take."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from monitor.judges.base import FailureReason, Judge, JudgeFailure, Judgement
from monitor.judges.prompts import context_chars
from monitor.judging.flow import AdaptiveLimiter, CircuitBreaker, RateLimiter
from monitor.judging.metrics import JudgingMetrics
from monitor.judging.settings import FlowSettings
from schemas.errors import JudgeError
from schemas.events import Turn
from schemas.usage import Usage

log = structlog.get_logger("monitor.judging.guarded_judge")


class Position(Protocol):
    """Where a judged pair came from, for the logs."""

    @property
    def partition(self) -> int:
        """The Kafka partition (0 for a pair from a file)."""
        ...

    @property
    def offset(self) -> int:
        """The offset in the partition (a pair's number in a file)."""
        ...


class Judgeable(Protocol):
    """What a guard judges: a decoded event (`schemas.events.ConversationEvent`) or any pair with an id and a place."""

    @property
    def event_id(self) -> str:
        """The event's id, for the logs."""
        ...

    @property
    def question(self) -> str:
        """The user's message."""
        ...

    @property
    def response(self) -> str:
        """The assistant's response."""
        ...

    @property
    def source(self) -> Position:
        """Where it came from, for the logs."""
        ...

    @property
    def context(self) -> Sequence[Turn]:
        """The earlier turns the judge may read, oldest first (empty for a pair alone)."""
        ...

    @property
    def system(self) -> str:
        """The assistant's system instructions ('' when none)."""
        ...


@dataclass(frozen=True, slots=True)
class JudgeOutcome:
    """A verdict or the failure that ends an event's judging, and how long the last call took."""

    verdict: Judgement | JudgeFailure
    elapsed_s: float


def estimate_tokens(event: Judgeable) -> float:
    """A rough input-token estimate for the client-side limit (about 4 characters a token, plus the prompt): the
    pair, and the earlier turns and system instructions with their tags."""
    return (len(event.question) + len(event.response) + context_chars(event.context, event.system)) / 4 + 600


@dataclass(frozen=True, slots=True)
class JudgeLimits:
    """What every judge call of a pipeline passes, whichever judge makes it: the adaptive concurrency limit, the
    client-side rate limit, the circuit breaker, and the set of tasks inside a call (for draining)."""

    limiter: AdaptiveLimiter
    rate: RateLimiter
    breaker: CircuitBreaker
    calling: set[asyncio.Task[Any]] = field(default_factory=set)

    @classmethod
    def from_flow(cls, flow: FlowSettings) -> JudgeLimits:
        """The limits of the flow settings."""
        return cls(
            AdaptiveLimiter(flow.judge_concurrency, floor=flow.judge_concurrency_floor),
            RateLimiter(flow.judge_requests_per_minute, flow.judge_tokens_per_minute),
            CircuitBreaker(flow.breaker_threshold, flow.breaker_cooldown_s, flow.breaker_max_cooldown_s),
        )


class GuardedJudge:
    """Judges events through the guards. A rate-limited call never costs an event an attempt, and while the
    circuit is open an event waits instead of becoming an error row; unless not `patient` (one-shot commands), where
    every failure is an attempt and an open circuit is an error at once."""

    _low = False  # the lane of this judge's calls in the shared limits

    def __init__(
        self,
        judge: Judge,
        flow: FlowSettings,
        metrics: JudgingMetrics,
        on_spent: Callable[[Usage], None],
        *,
        limits: JudgeLimits | None = None,
        patient: bool = True,
    ) -> None:
        self.judge = judge
        # A service waits out an open circuit and 429s (the event is not at fault); a one-shot command (`judge`, the
        # demo's history) must end: there every transient failure is an attempt, and the attempts bound the wait.
        self._patient = patient
        self._flow = flow
        self._metrics = metrics
        self._on_spent = on_spent
        self.limits = limits or JudgeLimits.from_flow(flow)
        self._rate_limited_seen = judge.rate_limited

    @property
    def limiter(self) -> AdaptiveLimiter:
        """The adaptive concurrency limit (shared with a shadow judge)."""
        return self.limits.limiter

    @property
    def rate(self) -> RateLimiter:
        """The client-side rate limit (shared with a shadow judge)."""
        return self.limits.rate

    @property
    def breaker(self) -> CircuitBreaker:
        """The circuit breaker (shared with a shadow judge)."""
        return self.limits.breaker

    def is_calling(self, task: asyncio.Task[Any]) -> bool:
        """Whether `task` is inside a judge call right now (past every wait: the call has been sent), through this
        guard or another sharing its limits."""
        return task in self.limits.calling

    def throttled_since_last_asked(self) -> bool:
        """Whether the provider rate limited us since the previous call of this method (for freshness)."""
        now = self.judge.rate_limited
        throttled, self._rate_limited_seen = now > self._rate_limited_seen, now
        return throttled

    async def judge_event(self, event: Judgeable, still_wanted: Callable[[], bool]) -> JudgeOutcome | None:
        """Judge one event until it has a verdict, a final failure, or is no longer wanted (None: its partition
        was revoked while it waited; the new owner judges it)."""
        method = self.judge.info.method
        attempts = 0
        while True:
            if self.breaker.is_open and not self._patient:
                return self._gave_up(method)
            probe = await self.breaker.wait()
            if not still_wanted():
                if probe:
                    self.breaker.on_abandoned()
                return None
            try:
                outcome = await self._call(event)
            except asyncio.CancelledError:
                if probe:  # a cancelled probe must hand the probe on, or the circuit never closes
                    self.breaker.on_abandoned()
                raise
            failure = outcome.verdict if isinstance(outcome.verdict, JudgeFailure) else None
            if failure is None or not failure.transient:
                self.breaker.on_success()
                break
            self.breaker.on_failure()
            # Rate limiting is never the event's fault: it waits (AIMD and the breaker slow everyone down).
            if not (failure.rate_limited and self._patient):
                attempts += 1
            if not ((self.breaker.is_open and self._patient) or attempts < self._flow.judge_event_attempts):
                break
            self._metrics.judge_deferred.labels(method).inc()
            log.info(
                "judge_deferred",
                event_id=event.event_id,
                partition=event.source.partition,
                offset=event.source.offset,
                attempts=attempts,
                circuit_open=self.breaker.is_open,
            )
        if isinstance(outcome.verdict, JudgeFailure):
            self._metrics.judge_errors.labels(method, outcome.verdict.reason).inc()
        self._metrics.judge_latency.labels(method).observe(outcome.elapsed_s)
        return outcome

    def _gave_up(self, method: str) -> JudgeOutcome:
        """A one-shot caller's event while the circuit is open: an error at once, no call, no wait for a probe."""
        threshold = self.breaker.threshold
        verdict = JudgeFailure(
            FailureReason.CIRCUIT_OPEN, f"not judged: the judge failed {threshold} times in a row", transient=True
        )
        self._metrics.judge_errors.labels(method, verdict.reason).inc()
        return JudgeOutcome(verdict, 0.0)

    async def _call(self, event: Judgeable) -> JudgeOutcome:
        """One judge call under the rate limit and the adaptive concurrency limit."""
        await self.rate.acquire(estimate_tokens(event), low=self._low)
        async with self.limiter.slot(low=self._low):
            self._metrics.judge_concurrency.set(self.limiter.current)
            limited_before = self.judge.rate_limited
            started = time.monotonic()
            task = asyncio.current_task()
            if task is not None:
                self.limits.calling.add(task)
            try:
                verdict = await self._verdict(event)
            finally:
                if task is not None:
                    self.limits.calling.discard(task)
            elapsed = time.monotonic() - started
            self._on_spent(verdict.usage)  # failed calls are paid for too (an invalid reply still costs its tokens)
            self._steer(verdict, elapsed, rate_limited=self.judge.rate_limited > limited_before)
        return JudgeOutcome(verdict, elapsed)

    def _steer(self, verdict: Judgement | JudgeFailure, elapsed: float, *, rate_limited: bool) -> None:
        """Feed the outcome of a call to the adaptive limit (AIMD)."""
        self.limiter.record_latency(elapsed)
        if rate_limited:
            self.limiter.on_rate_limited()
            self._metrics.judge_rate_limited.labels(self.judge.info.method).inc()
        elif not (isinstance(verdict, JudgeFailure) and verdict.transient):
            self.limiter.on_success()

    async def _verdict(self, event: Judgeable) -> Judgement | JudgeFailure:
        timeout = self._flow.judge_timeout_s
        try:
            judging = self.judge.judge(event.question, event.response, context=event.context, system=event.system)
            return await asyncio.wait_for(judging, timeout=timeout)
        except TimeoutError:
            return JudgeFailure(FailureReason.TIMEOUT, f"no verdict within {timeout}s", transient=True)
        except JudgeError as e:
            return JudgeFailure.from_error(e)
        except Exception as e:  # a bug in a judge: an error row, never a made-up score
            log.exception("judge_crashed", event_id=event.event_id)
            return JudgeFailure(FailureReason.INTERNAL, f"{type(e).__name__}: {e}")


class ShadowGuardedJudge(GuardedJudge):
    """A second judge through the primary's limits, in their low lane. It waits while the primary's circuit is open
    but never takes its probe; its outcomes steer nothing (circuit, AIMD, freshness); and every failed call, 429s
    included, costs it an attempt: after `judge_event_attempts` calls it ends in an error row, so a shadow record
    holds its offset for at most that many calls."""

    _low = True

    def __init__(
        self, judge: Judge, primary: GuardedJudge, metrics: JudgingMetrics, on_spent: Callable[[Usage], None]
    ) -> None:
        super().__init__(judge, primary._flow, metrics, on_spent, limits=primary.limits)

    async def judge_event(self, event: Judgeable, still_wanted: Callable[[], bool]) -> JudgeOutcome | None:
        """Judge one event with the shadow judge: a verdict, a failure after the bounded attempts, or None when its
        partition was revoked while it waited."""
        attempts = 0
        while True:
            await self.breaker.wait_closed()
            if not still_wanted():
                return None
            outcome = await self._call(event)
            attempts += 1
            failure = outcome.verdict if isinstance(outcome.verdict, JudgeFailure) else None
            if failure is None or not failure.transient or attempts >= self._flow.judge_event_attempts:
                return outcome
            log.info(
                "shadow_judge_retry",
                event_id=event.event_id,
                partition=event.source.partition,
                offset=event.source.offset,
                attempts=attempts,
            )

    def _steer(self, verdict: Judgement | JudgeFailure, elapsed: float, *, rate_limited: bool) -> None:
        """Nothing: the shadow's latency, successes and 429s are not the primary's (another model, perhaps)."""
