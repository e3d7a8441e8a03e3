"""The pipeline: Kafka → decode → sample → judge → ClickHouse, with at-least-once offsets.

An offset is committed only after every record at or below it is finished: written to ClickHouse, published
to the dead-letter topic, or deliberately not sampled (`OffsetTracker` keeps the contiguous low-water mark).
A record the shadow judge samples too is finished when both its rows are written (`RowsOwed`), error rows
included; the primary row does not wait for the shadow's.
`Pipeline` only coordinates; `monitor.runtime.service.build_pipeline` builds its collaborators from settings.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord
from pydantic import ValidationError

from consumers.clients import KafkaSettings, start_client
from consumers.deadletter import DeadLetterPublisher
from consumers.decode import DecodedEvent, decode_fields
from consumers.offsets import OffsetTracker, Ticket
from consumers.sampling import SampleDecision, Sampler, ShadowSampler
from consumers.source import KafkaSource
from monitor.judges.base import JudgeFailure, Judgement
from monitor.judging.cost_control import CostControl
from monitor.judging.flow import FlowSettings
from monitor.judging.guarded_judge import GuardedJudge, ShadowGuardedJudge
from monitor.judging.shadow import RowsOwed
from monitor.judging.traffic_counts import MinuteSegment, minute_number
from monitor.judging.verdict_reuse import VerdictReuse, cache_key
from monitor.privacy.events import JudgedEvent, redact_event
from monitor.protocols import Redactor
from monitor.runtime.backpressure import Backpressure
from monitor.runtime.dead_letters import dead_letter
from monitor.runtime.health import Health, HealthGauges
from monitor.runtime.metrics import Metrics
from monitor.runtime.partition_tasks import Deadline, PartitionTasks
from monitor.runtime.rows import TextPolicy, build_row
from monitor.runtime.sink import ClickHouseSink
from monitor.store.async_store import AsyncStore
from schemas.errors import DecodeError, SinkClosed
from schemas.events import ConversationEvent, KafkaPosition

log = structlog.get_logger("monitor.runtime.pipeline")

_POLL_MS = 100
_FACTOR_EVERY_S = 1.0
_PROBE_TIMEOUT_S = 5.0
_CLOSE_TIMEOUT_S = 10.0
_CLOSE_RESERVE_S = 2.0  # of the shutdown grace, kept for the commit and closing the Kafka clients
_CLOSE_FLOOR_S = 0.5  # each client gets at least this to leave its group cleanly


@dataclass(frozen=True, slots=True)
class Shadow:
    """The shadow judge behind the primary's limits, and which of the primary's judged events it judges too."""

    guard: ShadowGuardedJudge
    sampler: ShadowSampler


@dataclass(frozen=True, slots=True)
class Collaborators:
    """Everything a pipeline coordinates, built from settings by `build_pipeline`."""

    kafka: KafkaSettings
    flow: FlowSettings
    text_policy: TextPolicy
    redactor: Redactor | None  # None: MONITOR_REDACT=false, the judge and the store see the text as received
    store: AsyncStore
    consumer: AIOKafkaConsumer
    producer: AIOKafkaProducer
    guard: GuardedJudge
    sampler: Sampler
    cost: CostControl
    reuse: VerdictReuse
    sink: ClickHouseSink[Ticket]
    tracker: OffsetTracker
    metrics: Metrics
    health: Health
    dlq: DeadLetterPublisher
    shadow: Shadow | None = None  # None: MONITOR_SHADOW_JUDGE unset
    owed: RowsOwed = field(default_factory=RowsOwed)  # the sink's acknowledgement settles rows through the same one


class Pipeline:
    """`run(stop)` consumes until `stop` is set, then finishes every partition and closes its clients.

    The caller owns the store (opened and schema-created here, closed by the caller): chDB allows one engine
    path per process, so the store outlives a pipeline."""

    def __init__(self, parts: Collaborators) -> None:
        self.kafka, self.flow, self.text_policy, self.redactor = parts.kafka, parts.flow, parts.text_policy, parts.redactor
        self.store, self.producer, self.metrics = parts.store, parts.producer, parts.metrics
        self.guard, self.sampler, self.cost, self.reuse = parts.guard, parts.sampler, parts.cost, parts.reuse
        self.sink, self.tracker = parts.sink, parts.tracker
        self.tasks = PartitionTasks()
        self.backpressure = Backpressure(high=parts.flow.max_in_flight, low=parts.flow.resume_at)
        self.dlq, self.health = parts.dlq, parts.health
        self.shadow, self.owed = parts.shadow, parts.owed
        self._gauges = HealthGauges(parts.metrics.registry)
        self._lag = 0
        self.source = KafkaSource(parts.consumer, parts.kafka.topics, on_assigned=self._on_assigned, on_revoked=self._on_revoked)
        self._background: list[asyncio.Task[None]] = []
        self._dead_letters: set[asyncio.Task[Any]] = set()
        self._closing: set[TopicPartition] = set()  # being finished: no new judge call starts for them

    # ---- lifecycle ---------------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until `stop` is set; then drain within the grace period, flush, commit and close."""
        await self.store.open()
        self.health.store_answered = True
        try:
            await start_client(self.producer, self.kafka)
            await start_client(self.source, self.kafka)
        except BaseException:
            await self._close_kafka_clients()  # a failed start leaves no client open ("Unclosed ..." warnings)
            raise
        info = self.guard.judge.info
        shadow = self.shadow.guard.judge.info if self.shadow else None
        log.info(
            "pipeline_started",
            topics=list(self.kafka.topics),
            group=self.kafka.group_id,
            judge=info.method,
            judge_id=info.judge_id,
            heuristic_judge=info.heuristic,
            shadow_judge=shadow.method if shadow else None,
            shadow_judge_id=shadow.judge_id if shadow else None,
            shadow_sample_rate=self.shadow.sampler.rate if self.shadow else None,
        )
        self._background.append(asyncio.create_task(self.sink.run(), name="sink-flusher"))
        self._background.append(asyncio.create_task(self.cost.traffic_loop(), name="traffic-counts"))
        if self.cost.budget.enabled:
            self._background.append(asyncio.create_task(self.cost.sync_loop(), name="budget-sync"))
        try:
            await self._consume(stop)
        finally:
            await self._shutdown()

    async def _consume(self, stop: asyncio.Event) -> None:
        last_commit = last_lag = last_factor = last_progress = time.monotonic()
        while not stop.is_set():
            batch = await self.source.getmany(timeout_ms=_POLL_MS, max_records=self.kafka.max_poll_records)
            for tp, records in batch.items():
                self.handle_batch(tp, records)
            self._apply_backpressure()
            now = time.monotonic()
            if now - last_commit >= self.flow.commit_interval_s:
                await self.commit()
                last_commit = now
            if now - last_factor >= _FACTOR_EVERY_S:
                self.cost.refresh()
                last_factor = now
            if now - last_lag >= self.flow.lag_check_s:
                await self._probe_kafka()
                await self._probe_store()
                self.health.info["judge_circuit"] = self.guard.breaker.state.value
                self._lag = await self._update_lag()
                self.cost.on_lag(self._lag, throttled=self.guard.throttled_since_last_asked())
                self._gauges.update(self.health)
                last_lag = now
            if now - last_progress >= self.flow.progress_log_s:
                self._log_progress()
                last_progress = now

    async def _shutdown(self) -> None:
        grace = self.flow.shutdown_grace_s
        whole = Deadline(grace)
        log.info("draining", in_flight=self.tracker.in_flight(), grace_s=grace)
        # The drain and flush stop early enough for the commit and the clients' close to fit in the grace period too.
        work = Deadline(max(grace - min(_CLOSE_RESERVE_S, grace / 4), 0.0))
        left = await self.finish(self.source.assignment() | self.tasks.partitions(), work, phase="shutdown")
        self.sink.close()
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        log.info(
            "stopped",
            unfinished_events=left,
            note="unfinished events (not judged, or their rows not written) are not committed: the next start re-reads them" if left else "",
        )
        await self._close_kafka_clients(max(whole.remaining(), _CLOSE_FLOOR_S))
        await self.guard.judge.aclose()
        if self.shadow is not None:
            await self.shadow.guard.judge.aclose()

    async def _close_kafka_clients(self, within_s: float = 2 * _CLOSE_TIMEOUT_S) -> None:
        # Bounded: with the brokers gone, leaving the group or flushing the producer would otherwise wait out
        # aiokafka's own request timeouts (or retry forever), and the process would not exit.
        deadline = Deadline(within_s)
        for name, stop in (("consumer", self.source.stop), ("producer", self.producer.stop)):
            try:
                await asyncio.wait_for(stop(), timeout=min(_CLOSE_TIMEOUT_S, max(deadline.remaining(), _CLOSE_FLOOR_S)))
            except (TimeoutError, KafkaError) as e:
                log.warning("kafka_client_close_incomplete", client=name, error=type(e).__name__)
            except asyncio.CancelledError:
                # aiokafka's fetcher re-raises the cancellation of its own fetch tasks from stop() while the
                # brokers are away; only a cancellation of this task itself may end the shutdown here.
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise
                log.warning("kafka_client_close_incomplete", client=name, error="its fetch tasks were cancelled")

    async def finish(self, partitions: Iterable[TopicPartition], deadline: Deadline, *, phase: str) -> int:
        """Finish the work of `partitions` (revoked, or all of them on shutdown) within one deadline; returns
        the events left unfinished (uncommitted, so redelivered). In this order:
          1. drain: start no new judge call for them; cancel the events still waiting for one (a slot, the rate
             limit, the circuit) and let the calls already sent and the dead letters finish until the deadline;
          2. flush: write every buffered row (acknowledging their tickets), for what is left of the deadline;
          3. commit: write the per-segment traffic counts, then commit the low-water mark of each partition;
          4. forget: drop their offsets, tasks and lag gauges (a later owner starts afresh)."""
        tps = set(partitions)
        self._closing |= tps
        await self.tasks.drain(tps, deadline, stop_now=self._not_yet_judging)
        try:
            await asyncio.wait_for(self.sink.flush_all(), timeout=deadline.remaining())
        except (TimeoutError, SinkClosed):
            # Not counted here: their events are the unfinished ones, counted once when the phase ends.
            log.warning("flush_incomplete", phase=phase, reason=self.health.write_problem or "the deadline passed while writing")
        await self.commit(tps)
        left = sum(self.tracker.in_flight(tp) for tp in tps)
        self.tracker.revoke(tps)
        self.owed.forget(tps)
        self.tasks.forget(tps)
        self._closing -= tps
        for tp in tps:
            try:
                self.metrics.lag.remove(tp.topic, str(tp.partition))
            except KeyError:
                pass
        return left

    def _not_yet_judging(self, task: asyncio.Task[Any]) -> bool:
        # Work that has not reached the judge is cheaper to redeliver than to wait for (the shadow's calls are
        # tracked in the same shared limits, so `is_calling` covers both judges).
        return task not in self._dead_letters and not self.guard.is_calling(task)

    # ---- per record --------------------------------------------------------------------------------------

    def handle(self, tp: TopicPartition, record: ConsumerRecord[Any, Any]) -> None:
        """Track one record and start what it needs: a dead letter, nothing (not sampled), or a verdict."""
        self.handle_batch(tp, [record])

    def handle_batch(self, tp: TopicPartition, records: list[ConsumerRecord[Any, Any]]) -> None:
        """Handle the records of one partition from one fetch, in order: each gets a dead letter, nothing (not
        sampled), or a verdict; what is the same for every event is counted once per batch."""
        # No await in here, so nothing can observe the batch half done: the consumed and not-sampled metrics, the
        # traffic counts (merged at the end, segments in the order first seen) and the offsets of events not sampled
        # (the tracker moves past them at the end, instead of tracking and finishing each) are counted per batch.
        if not records:
            return
        metrics, sampler, cost, kafka = self.metrics, self.sampler, self.cost, self.kafka
        topic, partition = tp.topic, tp.partition
        metrics.child(metrics.consumed, topic).inc(len(records))
        counts: dict[MinuteSegment, list[int]] = {}
        unsampled: dict[str, int] = {}  # per app; flushed before any other use of the app label (see _count_unsampled)
        per_event_factor = cost.budget.enabled  # with a budget, every decision sees the spend reserved before it
        factor, reason = cost.current()
        for record in records:
            try:
                event = decode_fields(
                    record.value,
                    topic=topic,
                    partition=partition,
                    offset=record.offset,
                    record_timestamp_ms=record.timestamp,
                    max_bytes=kafka.max_event_bytes,
                    max_future_skew_s=kafka.max_future_skew_s,
                )
            except DecodeError as e:
                at = record.timestamp / 1000 if record.timestamp and record.timestamp > 0 else time.time()
                _count(counts, (minute_number(at), "", "", ""), 3)
                ticket = self.tracker.track(tp, record.offset)
                task = self.tasks.spawn(tp, self._dead_letter(record, e, ticket))
                self._dead_letters.add(task)
                task.add_done_callback(self._dead_letters.discard)
                continue
            if per_event_factor:
                factor, reason = cost.current()
            decision = sampler.decide(event, factor=factor, reason=reason, now=time.time())
            _count(counts, (minute_number(event.epoch_s), event.app, event.model, event.prompt_version), 1 if decision.sampled else 2)
            if not decision.sampled:
                unsampled[event.app] = unsampled.get(event.app, 0) + 1
                continue
            self._count_unsampled(unsampled)
            ticket = self.tracker.track(tp, record.offset)
            metrics.child(metrics.sampled, metrics.app_label(event.app), decision.kind.value).inc()
            self._start(event, decision, ticket)
        self._count_unsampled(unsampled)
        self.tracker.advance(tp, records[-1].offset + 1)
        cost.traffic.add_batch(counts)

    def _count_unsampled(self, unsampled: dict[str, int]) -> None:
        """Add the pending not-sampled counts, per app in the order first seen (so the app label's cap admits the
        same apps as counting each event at once would), and empty them."""
        if unsampled:
            metrics = self.metrics
            for app, n in unsampled.items():
                metrics.child(metrics.not_sampled, metrics.app_label(app, n)).inc(n)
            unsampled.clear()

    def _start(self, decoded: DecodedEvent, decision: SampleDecision, ticket: Ticket) -> None:
        """Redact a sampled event and start its row (and its shadow row, if the shadow samples it too)."""
        event = decoded.event(KafkaPosition(topic=ticket.tp.topic, partition=ticket.tp.partition, offset=ticket.offset))
        judged = self._redact(event)
        self._judge(self.guard, judged, decision, ticket)
        shadow = self._shadow_decision(event, decision)  # after the primary's reservation: at the cap the shadow yields
        if shadow is not None and self.shadow is not None:
            self.owed.expect(ticket, 2)  # before any await: neither row can have been acknowledged yet
            self._judge(self.shadow.guard, judged, shadow, ticket)

    def _shadow_decision(self, event: ConversationEvent, decision: SampleDecision) -> SampleDecision | None:
        """The shadow row's decision, or None: no shadow, not in its sub-sample, or the budget is used up (the
        primary's call took the last of it: the shadow never runs the spend past a cap)."""
        if self.shadow is None:
            return None
        shadow = self.shadow.sampler.decide(event, decision)
        if shadow is not None and self.cost.budget.enabled and self.cost.budget.factor() == 0.0:
            log.debug("shadow_skipped", event_id=event.event_id, partition=event.source.partition, offset=event.source.offset, reason="budget")
            return None
        return shadow

    def _redact(self, event: ConversationEvent) -> JudgedEvent:
        """The event as the judge and the store may see it: personal data replaced (only sampled events: the rest
        is never sent or stored, so it costs no redaction)."""
        if self.redactor is None:
            return JudgedEvent.unredacted(event)
        judged = redact_event(event, self.redactor)
        for kind, n in judged.redactions.items():
            self.metrics.redactions.labels(kind).inc(n)
        return judged

    def _judge(self, guard: GuardedJudge, event: JudgedEvent, decision: SampleDecision, ticket: Ticket) -> None:
        """Start one row of an event with `guard`'s judge (the primary's or the shadow's: the cache keys them apart)."""
        key = cache_key(guard.judge.info.judge_id, event.judged.question, event.judged.response)
        hit = self.reuse.cached(key)
        if hit is not None:  # costs nothing: no budget, no judge call
            self.metrics.cache_hits.inc()
            self._write_row(guard, event, decision, ticket, hit, 0.0, cached=True)
            return
        leader = self.reuse.leader(key)
        if leader is not None:  # the same pair is being judged right now (an upstream retry, a FAQ burst)
            self.tasks.spawn(ticket.tp, self._follow(guard, key, leader, event, decision, ticket))
            return
        self._lead(guard, key, event, decision, ticket)

    def _lead(self, guard: GuardedJudge, key: bytes, event: JudgedEvent, decision: SampleDecision, ticket: Ticket) -> asyncio.Task[Any]:
        # The call is reserved at decision time: a burst cannot decide past the budget before calls start.
        self.cost.reserve_call()
        task = self.tasks.spawn(ticket.tp, self._judge_and_write(guard, event, decision, ticket))
        self.reuse.lead(key, task)
        return task

    async def _follow(
        self,
        guard: GuardedJudge,
        key: bytes,
        leader: asyncio.Future[Judgement | None],
        event: JudgedEvent,
        decision: SampleDecision,
        ticket: Ticket,
    ) -> None:
        """Reuse the verdict of an identical pair being judged; judge it ourselves if none comes."""
        judgement = await self.reuse.follow(key, leader)
        if judgement is not None:
            self.metrics.cache_hits.inc()
            self._write_row(guard, event, decision, ticket, judgement, 0.0, cached=True)
        elif self._wanted(ticket):
            self._lead(guard, key, event, decision, ticket)

    async def _judge_and_write(
        self, guard: GuardedJudge, event: JudgedEvent, decision: SampleDecision, ticket: Ticket
    ) -> Judgement | JudgeFailure | None:
        """Judge one event and add its row; returns the verdict (None if abandoned on revocation)."""
        outcome = await guard.judge_event(event.judged, still_wanted=lambda: self._wanted(ticket))
        if outcome is None:
            return None
        self._write_row(guard, event, decision, ticket, outcome.verdict, outcome.elapsed_s)
        return outcome.verdict

    def _wanted(self, ticket: Ticket) -> bool:
        return self.tracker.is_current(ticket) and ticket.tp not in self._closing

    def _write_row(
        self,
        guard: GuardedJudge,
        event: JudgedEvent,
        decision: SampleDecision,
        ticket: Ticket,
        verdict: Judgement | JudgeFailure,
        elapsed: float,
        cached: bool = False,
    ) -> None:
        info = guard.judge.info
        shadow = guard is not self.guard
        latency_ms, now = int(elapsed * 1000), datetime.now(UTC)
        try:
            row = build_row(event, info, decision, verdict, latency_ms=latency_ms, scored_at=now, text_policy=self.text_policy, cached=cached)
        except ValueError as e:  # a judgement that does not fit the row contract is an error, not a lost event
            problem = _row_problem(e)
            log.error("invalid_judgement", event_id=event.judged.event_id, error=problem[:200])
            failure = JudgeFailure("internal", f"invalid judgement: {problem}")
            row = build_row(event, info, decision, failure, latency_ms=latency_ms, scored_at=now, text_policy=self.text_policy)
        metrics = self.metrics
        metrics.child(metrics.shadow_rows if shadow else metrics.judged, metrics.app_label(event.judged.app), info.method, row.status).inc()
        if row.status == "error":
            log.warning(
                "shadow_judge_failed" if shadow else "judge_failed",
                event_id=event.judged.event_id,
                partition=ticket.tp.partition,
                offset=ticket.offset,
                error=row.error[:200],
            )
        self.sink.add(row, ticket)

    async def _dead_letter(self, record: ConsumerRecord[Any, Any], err: DecodeError, ticket: Ticket) -> None:
        await dead_letter(self.dlq, record, err, self.metrics, self.health)
        self.tracker.done(ticket)

    # ---- flow, offsets -----------------------------------------------------------------------------------

    def _apply_backpressure(self) -> None:
        in_flight = self.tracker.in_flight()
        self.metrics.in_flight.set(in_flight)
        self.metrics.breaker_open.set(1 if self.guard.breaker.is_open else 0)
        change = self.backpressure.update(in_flight, self.guard.breaker.is_open)
        if change.flush_now:
            self.sink.request_flush()
        if change.pause is True:
            self.source.pause()
            self.metrics.paused.set(1)
            log.warning("consumption_paused", reasons=sorted(change.reasons), in_flight=in_flight, cap=self.backpressure.gate.high)
        elif change.pause is False:
            self.source.resume()
            self.metrics.paused.set(0)
            log.info("consumption_resumed", in_flight=in_flight)

    async def commit(self, tps: set[TopicPartition] | None = None) -> dict[TopicPartition, int]:
        """Commit the low-water mark of owned partitions (or of `tps`); returns what the broker accepted.

        The traffic counts are written first, and nothing is committed while they cannot be: a committed event is
        never re-read, so its count must be durable before, or the coverage (judged / consumed) would pass 100 %.
        Uncommitted events are counted again when they are re-read, which only ever lowers it."""
        offsets = self.tracker.committable(tps if tps is not None else self.source.assignment())
        if not offsets:
            return {}
        if not await self.cost.flush_traffic():
            return {}
        committed = await self.source.commit(offsets)
        if committed:
            self.tracker.mark_committed(committed)
            self.metrics.commits.inc()
            log.debug("committed", offsets={f"{tp.topic}/{tp.partition}": off for tp, off in committed.items()})
        else:
            self.metrics.commit_failures.inc()
        return committed

    async def _probe_kafka(self) -> None:
        """Ask the brokers for metadata: the readiness of the Kafka side, logged when it changes."""
        try:
            await asyncio.wait_for(self.source.consumer.topics(), timeout=_PROBE_TIMEOUT_S)
        except (TimeoutError, KafkaError) as e:
            problem = (str(e) or type(e).__name__)[:200]  # aiokafka puts the class name in the message already
            if self.health.mark("kafka", False, problem):
                log.error(
                    "kafka_unreachable",
                    bootstrap=self.kafka.bootstrap_servers,
                    error=problem,
                    in_flight=self.tracker.in_flight(),
                    note="unfinished events are kept and retried; progress lines report while this lasts",
                )
            return
        if self.health.mark("kafka", True):
            log.info("kafka_reachable", bootstrap=self.kafka.bootstrap_servers)

    async def _probe_store(self) -> None:
        """A trivial query: readiness turns false when the store stops answering, even while nothing is written."""
        try:
            await asyncio.wait_for(self.store.query("SELECT 1"), timeout=_PROBE_TIMEOUT_S)
        except Exception as e:  # StoreError, a timeout, or the driver's own connection errors
            if self.health.mark("store", False, (str(e) or type(e).__name__)[:200]):
                log.error("store_unreachable", error=type(e).__name__, detail=str(e)[:200])
            return
        if self.health.mark("store", True):
            log.info("store_reachable")

    def _log_progress(self) -> None:
        total = self.metrics.total
        log.info(
            "progress",
            consumed=int(total("relevancy_monitor_events_consumed")),
            judged=int(total("relevancy_monitor_events_judged")),
            **({"shadow_judged": int(total("relevancy_monitor_shadow_rows"))} if self.shadow else {}),
            written=int(total("relevancy_monitor_rows_written")),
            dead_lettered=int(total("relevancy_monitor_events_dead_lettered")),
            in_flight=self.tracker.in_flight(),
            lag=self._lag,
            sampling_factor=round(self.cost.factor, 3),
            circuit=self.guard.breaker.state.value,
            ready=self.health.ready,
            down=sorted(c for c, up in self.health.up.items() if not up),
        )

    async def _update_lag(self) -> int:
        """Refresh the per-partition lag gauges; returns the total lag of owned partitions (the last known lag
        while the brokers do not answer)."""
        try:
            lags = await asyncio.wait_for(self.source.lag(), timeout=_PROBE_TIMEOUT_S)
        except (TimeoutError, KafkaError) as e:
            log.debug("lag_unavailable", error=type(e).__name__)
            return self._lag
        for tp, lag in lags.items():
            self.metrics.lag.labels(tp.topic, str(tp.partition)).set(lag)
        return sum(lags.values())

    # ---- rebalance ---------------------------------------------------------------------------------------

    async def _on_assigned(self, assigned: set[TopicPartition]) -> None:
        self.tracker.assign(assigned)
        self.health.joined = True
        log.info("partitions_assigned", partitions=sorted(f"{tp.topic}/{tp.partition}" for tp in assigned))

    async def _on_revoked(self, revoked: set[TopicPartition]) -> None:
        """Finish the revoked partitions within half the session timeout (the rebalance waits for us)."""
        await self.finish(revoked, Deadline(self.kafka.session_timeout_ms / 1000 / 2), phase="revoke")
        log.info("partitions_revoked", partitions=sorted(f"{tp.topic}/{tp.partition}" for tp in revoked))


def _count(counts: dict[MinuteSegment, list[int]], segment: MinuteSegment, field: int) -> None:
    """Count one event of `segment` as consumed and under `field` (1 sampled, 2 not sampled, 3 dead-lettered)."""
    found = counts.get(segment)
    if found is None:
        found = counts[segment] = [0, 0, 0, 0]
    found[0] += 1
    found[field] += 1


def _row_problem(err: ValueError) -> str:
    """Why a row was refused, by field and reason only: pydantic's own message quotes the values (judged text)."""
    if isinstance(err, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'row'}: {e['msg']}" for e in err.errors(include_input=False, include_url=False)[:3])
    return str(err)[:200]  # our own checks (model_post_init) name no values
