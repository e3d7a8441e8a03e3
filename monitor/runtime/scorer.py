"""From a sampled event to its rows: redact it, reuse a verdict or judge it (one call for identical pairs in flight),
and add the row to the sink, the shadow judge's row too when the shadow samples it.

Every row starts as one `Job` (the guard of the judge that makes it, the event as judged, its sampling decision and
its offset's ticket), which travels unchanged through reuse, the call and the write."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog
from pydantic import ValidationError

from consumers.decode import DecodedEvent
from consumers.offsets import Ticket
from consumers.sampling import DecisionKind, SampleDecision, ShadowSampler
from monitor.judges.base import FailureReason, JudgeFailure, Judgement
from monitor.judges.context_window import ContextWindow, windowed
from monitor.judging.cost_control import CostControl
from monitor.judging.guarded_judge import GuardedJudge, ShadowGuardedJudge
from monitor.judging.shadow import RowsOwed
from monitor.judging.verdict_reuse import VerdictReuse, cache_key
from monitor.privacy.events import JudgedEvent, redact_event
from monitor.privacy.spans import Redactor
from monitor.runtime.metrics import Metrics
from monitor.runtime.partition_tasks import PartitionTasks
from monitor.runtime.rows import TextPolicy, build_row
from monitor.runtime.sink import ClickHouseSink
from schemas.errors import RedactionFailed
from schemas.events import ConversationEvent, KafkaPosition

log = structlog.get_logger("monitor.runtime.scorer")


@dataclass(frozen=True, slots=True)
class Shadow:
    """The shadow judge behind the primary's limits, and which of the primary's judged events it judges too."""

    guard: ShadowGuardedJudge
    sampler: ShadowSampler


@dataclass(frozen=True, slots=True)
class Job:
    """One row to make: the judge's guard, the event as judged, its sampling decision and its offset's ticket."""

    guard: GuardedJudge
    event: JudgedEvent
    decision: SampleDecision
    ticket: Ticket
    key: bytes  # the verdict cache's key: the judge and the judged pair

    @classmethod
    def of(cls, guard: GuardedJudge, event: JudgedEvent, decision: SampleDecision, ticket: Ticket) -> Job:
        """The job of `guard`'s row for `event` (the primary's and the shadow's keys differ by judge)."""
        judged = event.judged
        key = cache_key(
            guard.judge.info.judge_id, judged.question, judged.response, context=judged.context, system=judged.system
        )
        return cls(guard, event, decision, ticket, key)


class Scorer:
    """Starts the rows of sampled events on their partition's tasks; `wanted(ticket)` says if one is still owned."""

    def __init__(
        self,
        *,
        guard: GuardedJudge,
        shadow: Shadow | None,
        redactor: Redactor | None,
        window: ContextWindow,
        reuse: VerdictReuse,
        cost: CostControl,
        sink: ClickHouseSink[Ticket],
        tasks: PartitionTasks,
        owed: RowsOwed,
        metrics: Metrics,
        text_policy: TextPolicy,
        wanted: Callable[[Ticket], bool],
    ) -> None:
        self.guard, self.shadow, self.redactor, self.reuse, self.cost = guard, shadow, redactor, reuse, cost
        self.window = window
        self.sink, self.tasks, self.owed, self.metrics, self.text_policy = sink, tasks, owed, metrics, text_policy
        self._wanted = wanted

    def start(
        self, decoded: DecodedEvent, decision: SampleDecision, ticket: Ticket, position: KafkaPosition | None = None
    ) -> None:
        """Cut its context to the judge's window, redact a sampled event and start its row (and its shadow row, if
        the shadow samples it too). Raises `RedactionFailed` (counted and logged, nothing started) if the redactor
        raises: the caller dead-letters it. `position` is the event's record when that is not the ticket's (an
        answer read back from Kafka for a user's feedback: its ticket is the feedback record's)."""
        if position is None:
            position = KafkaPosition(topic=ticket.tp.topic, partition=ticket.tp.partition, offset=ticket.offset)
        # Once, here: the redactor, both judges, the reuse key, the cost and the row all see this bounded context.
        event = windowed(decoded.event(position), self.window)
        try:
            judged = self.redact(event)
        except Exception as e:  # a recognizer's bug must not stop the service (and re-read this record at each start)
            raise self._redaction_failed(event, e) from None
        self.judge(Job.of(self.guard, judged, decision, ticket))
        shadow = self._shadow_decision(event, decision)  # after the primary's reservation: at the cap it yields
        if shadow is not None and self.shadow is not None:
            self.owed.expect(ticket, 2)  # before any await: neither row can have been acknowledged yet
            self.judge(Job.of(self.shadow.guard, judged, shadow, ticket))

    def _shadow_decision(self, event: ConversationEvent, decision: SampleDecision) -> SampleDecision | None:
        """The shadow row's decision, or None: no shadow, not in its sub-sample, or the budget is used up (the
        primary's call took the last of it: the shadow never runs the spend past a cap)."""
        if self.shadow is None or decision.kind is DecisionKind.FEEDBACK:  # the shadow samples the unbiased stream
            return None
        shadow = self.shadow.sampler.decide(event, decision)
        if shadow is not None and self.cost.budget.enabled and self.cost.budget.factor() == 0.0:
            source = event.source
            log.debug("shadow_skipped", event_id=event.event_id, partition=source.partition, offset=source.offset)
            return None
        return shadow

    def redact(self, event: ConversationEvent) -> JudgedEvent:
        """The event as the judge and the store may see it: personal data replaced (only sampled events: the rest
        is never sent or stored, so it costs no redaction)."""
        if self.redactor is None:
            return JudgedEvent.unredacted(event)
        judged = redact_event(event, self.redactor)
        for kind, n in judged.redactions.items():
            self.metrics.redactions.labels(kind).inc(n)
        return judged

    def _redaction_failed(self, event: ConversationEvent, error: Exception) -> RedactionFailed:
        failed = RedactionFailed(event.event_id, error)
        self.metrics.redaction_failures.inc()
        source = event.source
        # Neither the message nor the traceback: either could quote the text the redactor was given.
        log.error(
            "redaction_failed",
            event_id=event.event_id,
            partition=source.partition,
            offset=source.offset,
            error=failed.error_type,
            detail=failed.detail,
            note="the event is dead-lettered, not judged or stored",
        )
        return failed

    def judge(self, job: Job) -> None:
        """Start one row: from the cache, from an identical call in flight, or from a call of its own."""
        hit = self.reuse.cached(job.key)
        if hit is not None:  # costs nothing: no budget, no judge call
            self.metrics.cache_hits.inc()
            self.write(job, hit, 0.0, cached=True)
            return
        leader = self.reuse.leader(job.key)
        if leader is not None:  # the same pair is being judged right now (an upstream retry, a FAQ burst)
            self.tasks.spawn(job.ticket.tp, self.follow(job, leader))
            return
        self.lead(job)

    def lead(self, job: Job) -> asyncio.Task[Any]:
        """Judge `job` with a call of its own, which identical pairs arriving meanwhile follow."""
        # The call is reserved at decision time: a burst cannot decide past the budget before calls start.
        self.cost.reserve_call()
        task = self.tasks.spawn(job.ticket.tp, self._judge_and_write(job))
        self.reuse.lead(job.key, task)
        return task

    async def follow(self, job: Job, leader: asyncio.Future[Judgement | None]) -> None:
        """Reuse the verdict of an identical pair being judged; judge it ourselves if none comes."""
        judgement = await self.reuse.follow(job.key, leader)
        if judgement is not None:
            self.metrics.cache_hits.inc()
            self.write(job, judgement, 0.0, cached=True)
        elif self._wanted(job.ticket):
            self.lead(job)

    async def _judge_and_write(self, job: Job) -> Judgement | JudgeFailure | None:
        """Judge one event and add its row; returns the verdict (None if abandoned on revocation)."""
        outcome = await job.guard.judge_event(job.event.judged, still_wanted=lambda: self._wanted(job.ticket))
        if outcome is None:
            return None
        self.write(job, outcome.verdict, outcome.elapsed_s)
        return outcome.verdict

    def write(self, job: Job, verdict: Judgement | JudgeFailure, elapsed: float, cached: bool = False) -> None:
        """Build the job's row (an error row if the verdict does not fit the row contract) and add it to the sink."""
        info, event, shadow = job.guard.judge.info, job.event, job.guard is not self.guard
        latency_ms, now, policy = int(elapsed * 1000), datetime.now(UTC), self.text_policy
        try:
            row = build_row(
                event,
                info,
                job.decision,
                verdict,
                latency_ms=latency_ms,
                scored_at=now,
                text_policy=policy,
                cached=cached,
            )
        except ValueError as e:  # a judgement that does not fit the row contract is an error, not a lost event
            problem = row_problem(e)
            log.error("invalid_judgement", event_id=event.judged.event_id, error=problem[:200])
            failure = JudgeFailure(FailureReason.INTERNAL, f"invalid judgement: {problem}")
            row = build_row(
                event, info, job.decision, failure, latency_ms=latency_ms, scored_at=now, text_policy=policy
            )
        metrics = self.metrics
        counter = metrics.shadow_rows if shadow else metrics.judged
        metrics.child(counter, metrics.app_label(event.judged.app), info.method, row.status).inc()
        if row.status == "error":
            log.warning(
                "shadow_judge_failed" if shadow else "judge_failed",
                event_id=event.judged.event_id,
                partition=job.ticket.tp.partition,
                offset=job.ticket.offset,
                error=row.error[:200],
            )
        self.sink.add(row, job.ticket)


def row_problem(err: ValueError) -> str:
    """Why a row was refused, by field and reason only: pydantic's own message quotes the values (judged text)."""
    if isinstance(err, ValidationError):
        errors = err.errors(include_input=False, include_url=False)[:3]
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'row'}: {e['msg']}" for e in errors)
    return str(err)[:200]  # our own checks (model_post_init) name no values
