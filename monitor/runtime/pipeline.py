"""The pipeline: Kafka → decode → sample → judge → ClickHouse, with at-least-once offsets.

An offset is committed only after every record at or below it is finished: written to ClickHouse, published
to the dead-letter topic, or deliberately not sampled (`OffsetTracker` keeps the contiguous low-water mark).
A record the shadow judge samples too is finished when both its rows are written (`RowsOwed`), error rows
included; the primary row does not wait for the shadow's.

`Pipeline` only coordinates: run, consume, handle a batch, commit, finish partitions. A sampled event's rows are the
`Scorer`'s; the probes, lag and progress lines are `Probes`' task; `monitor.runtime.service.build_pipeline` builds
the collaborators from settings."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING, Any

import structlog
from aiokafka import TopicPartition
from aiokafka.structs import ConsumerRecord

from consumers.client_start import start_client
from consumers.decode import DecodedEvent
from consumers.group_share import share_of
from consumers.offsets import Ticket
from consumers.sampling import SampleDecision
from consumers.source import KafkaSource
from monitor.runtime.backpressure import Backpressure
from monitor.runtime.batch_counts import BatchCounts
from monitor.runtime.cancel_tasks import END_AFTER_CANCEL_S, cancel_tasks
from monitor.runtime.collaborators import Collaborators
from monitor.runtime.dead_letters import dead_letter, event_record
from monitor.runtime.feedback_flow import FeedbackFlow
from monitor.runtime.kafka_close import CLOSE_FLOOR_S, close_clients
from monitor.runtime.partition_tasks import Deadline, PartitionTasks
from monitor.runtime.pausing import Pausing
from monitor.runtime.probes import Probes
from monitor.runtime.record_events import RecordDecoder
from monitor.runtime.scorer import Scorer
from monitor.runtime.stop_race import StopRace
from monitor.runtime.traffic_flush import TrafficFlush
from schemas.errors import DecodeError, RedactionFailed, SinkClosed
from schemas.events import KafkaPosition
from schemas.feedback import FeedbackEvent

if TYPE_CHECKING:
    from monitor.runtime.span_join import SpanJoin

log = structlog.get_logger("monitor.runtime.pipeline")

_POLL_MS = 100
_FACTOR_EVERY_S = 1.0
_CLOSE_RESERVE_S = 2.0  # of the shutdown grace, kept for the commit and closing the Kafka clients


class Pipeline:
    """`run(stop)` consumes until `stop` is set, then finishes every partition and closes its clients.

    The caller owns the store (opened and schema-created here, closed by the caller): chDB allows one engine
    path per process, so the store outlives a pipeline."""

    def __init__(self, parts: Collaborators) -> None:
        self.kafka, self.flow, self.store, self.producer = parts.kafka, parts.flow, parts.store, parts.producer
        self.guard, self.sampler, self.cost, self.metrics = parts.guard, parts.sampler, parts.cost, parts.metrics
        self.sink, self.tracker, self.dlq, self.health = parts.sink, parts.tracker, parts.dlq, parts.health
        self.shadow, self.owed, self.publisher = parts.shadow, parts.owed, parts.publisher
        self.tasks = PartitionTasks()
        self.traffic_flush = TrafficFlush(parts.cost, parts.metrics, parts.health)
        feedback = parts.feedback
        topics = tuple(dict.fromkeys((*parts.kafka.topics, *(feedback.settings.topics if feedback else ()))))
        self.source = KafkaSource(parts.consumer, topics, on_assigned=self._on_assigned, on_revoked=self._on_revoked)
        backpressure = Backpressure(high=parts.flow.max_in_flight, low=parts.flow.resume_at)
        self.pausing = Pausing(backpressure, self.source, parts.sink, parts.metrics)
        self.scorer = Scorer(
            guard=parts.guard, shadow=parts.shadow, redactor=parts.redactor, window=parts.window, reuse=parts.reuse,
            cost=parts.cost, sink=parts.sink, tasks=self.tasks, owed=parts.owed, metrics=parts.metrics,
            text_policy=parts.text_policy, wanted=self._wanted,
        )  # fmt: skip
        self.probes = Probes(
            source=self.source, bootstrap=parts.kafka.bootstrap_servers, store=parts.store, guard=parts.guard,
            cost=parts.cost, tracker=parts.tracker, metrics=parts.metrics, health=parts.health, flow=parts.flow,
            with_shadow=parts.shadow is not None,
        )  # fmt: skip
        self._background: list[asyncio.Task[None]] = []
        self._dead_letters: set[asyncio.Task[Any]] = set()
        self._closing: set[TopicPartition] = set()  # being finished: no new judge call starts for them
        self.join: SpanJoin | None = None
        if parts.kafka.joins_logs():
            # Here, not on import: the join holds OTLP spans and log records, and loads the OpenTelemetry reader.
            from monitor.runtime.span_join import SpanJoin

            self.join = SpanJoin.of(parts.kafka, parts.tracker, parts.metrics, parts.cost.traffic)
        self.decoder = RecordDecoder(
            parts.kafka, parts.metrics, parts.cost.traffic, self.join,
            feedback_topics=feedback.settings.topics if feedback else (),
            feedback=feedback.settings.options() if feedback else None,
        )  # fmt: skip
        self.feedback_parts = feedback
        self.feedback = (
            None
            if feedback is None
            else FeedbackFlow(
                feedback,
                redactor=parts.redactor,
                text_policy=parts.text_policy,
                tracker=parts.tracker,
                tasks=self.tasks,
                metrics=parts.metrics,
                judge=self._judge_answer,
            )
        )

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until `stop` is set; then drain within the grace period, flush, commit and close."""
        await self.store.open()
        self.health.store_answered = True
        reader = self.feedback_parts.reader if self.feedback_parts else None
        try:
            await start_client(self.producer, self.kafka)
            await start_client(self.source, self.kafka)
            if reader is not None:
                await reader.start()
        except BaseException:
            await close_clients(
                self.source, self.producer
            )  # a failed start leaves no client open ("Unclosed ..." warnings)
            if reader is not None:
                await reader.close()
            raise
        info, shadow = self.guard.judge.info, self.shadow
        log.info(
            "pipeline_started",
            topics=list(self.kafka.topics),
            group=self.kafka.group_id,
            judge=info.method,
            judge_id=info.judge_id,
            heuristic_judge=info.heuristic,
            shadow_judge=shadow.guard.judge.info.method if shadow else None,
            shadow_judge_id=shadow.guard.judge.info.judge_id if shadow else None,
            shadow_sample_rate=shadow.sampler.rate if shadow else None,
        )
        self._spawn(self.sink.run(), "sink-flusher")
        if self.feedback_parts is not None:
            self._spawn(self.feedback_parts.sink.run(), "feedback-flusher")
        self._spawn(self.traffic_flush.run(self.cost.settings.traffic_flush_s), "traffic-counts")
        self._spawn(self.probes.run(), "probes")
        if self.cost.budget.enabled:
            self._spawn(self.cost.sync_loop(), "budget-sync")
        if self.publisher is not None:
            self._spawn(self.publisher.run(), "evaluations")
        race = StopRace(stop)
        try:
            await self._consume(race)
        finally:
            await self._shutdown(race)

    def _spawn(self, work: Any, name: str) -> None:
        self._background.append(asyncio.create_task(work, name=name))

    async def _consume(self, race: StopRace) -> None:
        last_commit = last_factor = time.monotonic()
        while not race.is_set():
            fetch = self.source.getmany(timeout_ms=_POLL_MS, max_records=self.kafka.max_poll_records)
            batch = await race.step(fetch, cancel=True) or {}
            for tp, records in batch.items():
                self.handle_batch(tp, records)
            if self.join is not None:
                self.join.due()
                self._start_joined()
            self.pausing.update(self.tracker.in_flight(), self.guard.breaker.is_open)
            now = time.monotonic()
            if now - last_commit >= self.flow.commit_interval_s:
                await race.step(self.commit(), cancel=False)
                last_commit = now
            if now - last_factor >= _FACTOR_EVERY_S:
                self.cost.refresh()
                last_factor = now

    async def _shutdown(self, race: StopRace) -> None:
        grace = self.flow.shutdown_grace_s
        whole = Deadline(grace)
        log.info("draining", in_flight=self.tracker.in_flight(), grace_s=grace)
        # The drain and flush stop early enough for the commit and the clients' close to fit in the grace period too.
        work = Deadline(max(grace - min(_CLOSE_RESERVE_S, grace / 4), 0.0))
        # No rebalance may start or go on while this drains (a callback under way gets what is left of the work's
        # deadline); then the step the stop overtook (a commit) may end.
        await self.source.stop_rebalancing(work.remaining())
        await race.settle(work.remaining())
        left = await self.finish(self.source.assignment() | self.tasks.partitions(), work, phase="shutdown")
        self.sink.close()
        if self.feedback_parts is not None:
            self.feedback_parts.sink.close()
        # Not awaited forever: a background task can lose its cancel (see monitor.runtime.cancel_tasks).
        running = await cancel_tasks(self._background, END_AFTER_CANCEL_S)
        await asyncio.gather(*(task for task in self._background if task not in running), return_exceptions=True)
        if self.publisher is not None:  # the evaluations of the last rows, within what is left of the grace
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.publisher.drain(), timeout=max(whole.remaining() - CLOSE_FLOOR_S, 0.1))
            await self.publisher.aclose()
        note = "unfinished events (not judged, or their rows not written) are not committed: the next start re-reads"
        log.info("stopped", unfinished_events=left, note=note if left else "")
        await close_clients(self.source, self.producer, max(whole.remaining(), CLOSE_FLOOR_S))
        if self.feedback_parts is not None:
            await self.feedback_parts.reader.close()
        await self.guard.judge.aclose()
        if self.shadow is not None:
            await self.shadow.guard.judge.aclose()

    async def finish(self, partitions: Iterable[TopicPartition], deadline: Deadline, *, phase: str) -> int:
        """Finish the work of `partitions` (revoked, or all of them on shutdown) within one deadline; returns
        the events left unfinished (uncommitted, so redelivered). In this order:
          1. drain: start no new judge call for them; cancel the events still waiting for one (a slot, the rate
             limit, the circuit) and let the calls already sent and the dead letters finish until the deadline;
          2. flush: write every buffered row (acknowledging their tickets), for what is left of the deadline;
          3. commit: write the per-segment traffic counts, then commit the low-water mark of each partition (within
             what is left of the deadline);
          4. forget: drop their offsets, tasks and lag gauges (a later owner starts afresh)."""
        tps = set(partitions)
        self._closing |= tps
        await self.tasks.drain(tps, deadline, stop_now=self._not_yet_judging)
        try:
            await asyncio.wait_for(self._flush_all(), timeout=deadline.remaining())
        except (TimeoutError, SinkClosed):
            # Not counted here: their events are the unfinished ones, counted once when the phase ends.
            reason = self.health.write_problem or "the deadline passed while writing"
            log.warning("flush_incomplete", phase=phase, reason=reason)
        try:
            # Bounded: with the coordinator gone, aiokafka's commit waits out its own retries (the process would not
            # stop); uncommitted offsets only mean their events are read again.
            await asyncio.wait_for(self.commit(tps), timeout=max(deadline.remaining(), CLOSE_FLOOR_S))
        except TimeoutError:
            log.warning("commit_incomplete", phase=phase, note="the offsets stay uncommitted: their events are re-read")
        left = sum(self.tracker.in_flight(tp) for tp in tps)
        if self.join is not None:
            self.join.forget(tps)
        self.tracker.revoke(tps)
        self.owed.forget(tps)
        self.tasks.forget(tps)
        self._closing -= tps
        self.probes.forget(tps)
        return left

    async def _flush_all(self) -> None:
        await self.sink.flush_all()
        if self.feedback_parts is not None:
            await self.feedback_parts.sink.flush_all()

    def _not_yet_judging(self, task: asyncio.Task[Any]) -> bool:
        # Work that has not reached the judge is cheaper to redeliver than to wait for (the shadow's calls are
        # tracked in the same shared limits, so `is_calling` covers both judges).
        return task not in self._dead_letters and not self.guard.is_calling(task)

    def _wanted(self, ticket: Ticket) -> bool:
        return self.tracker.is_current(ticket) and ticket.tp not in self._closing

    def handle_batch(self, tp: TopicPartition, records: list[ConsumerRecord[Any, Any]]) -> None:
        """Handle the records of one partition from one fetch, in order: each gets a dead letter, or each of its
        events (one, or an OTLP record's many) nothing (not sampled) or a verdict; what is the same for every event
        is counted once per batch."""
        # No await in here, so nothing can observe the batch half done; the offsets of events not sampled are
        # passed at the end (the tracker moves past them instead of tracking and finishing each).
        if not records:
            return
        counts = BatchCounts(self.metrics, tp.topic, len(records))
        per_event_factor = self.cost.budget.enabled  # with a budget, every decision sees the spend reserved before it
        factor, reason = self.cost.current()
        for record in records:
            try:
                items = self.decoder.items(tp, record)
            except DecodeError as e:
                counts.dead_lettered(
                    record.timestamp / 1000 if record.timestamp and record.timestamp > 0 else time.time()
                )
                self._dead_letter(record, e, self.tracker.track(tp, record.offset))
                continue
            if items.feedback:
                self._start_feedback(tp, record, items.feedback)
            for part, event in enumerate(items.events):
                if per_event_factor:
                    factor, reason = self.cost.current()
                decision = self.sampler.decide(event, factor=factor, reason=reason, now=time.time())
                counts.decided(event, decision.sampled)
                if decision.sampled:
                    self._start(event, decision, self.tracker.track(tp, record.offset, part), record)
        counts.close(self.cost.traffic)
        self.tracker.advance(tp, records[-1].offset + 1)
        if self.join is not None:
            self._start_joined()

    def _start_feedback(
        self, tp: TopicPartition, record: ConsumerRecord[Any, Any], feedback: list[FeedbackEvent]
    ) -> None:
        """Start each feedback event of a record (tickets numbered -1, -2, ...: apart from its conversation events)."""
        assert self.feedback is not None  # the decoder reads feedback only on the feedback topics
        position = KafkaPosition(topic=tp.topic, partition=tp.partition, offset=record.offset)
        for i, item in enumerate(feedback):
            ticket = self.tracker.track(tp, record.offset, -(i + 1))
            self.feedback.start(item, ticket, position, partial(self._dead_letter, record, ticket=ticket))

    def _judge_answer(
        self, event: DecodedEvent, decision: SampleDecision, ticket: Ticket, position: KafkaPosition
    ) -> None:
        """Judge an answer read back from Kafka for a user's feedback; one the redactor fails on is counted and
        finished (its feedback row is still written): there is no record of its own to dead-letter."""
        try:
            self.scorer.start(event, decision, ticket, position)
        except RedactionFailed:
            self.metrics.feedback_judging.labels("failed").inc()
            self.tracker.done(ticket)

    def _start_joined(self) -> None:
        """Sample the events the join made; their tickets (and their riders) were tracked when held."""
        assert self.join is not None
        ready, self.join.ready = self.join.ready, []
        by_topic: dict[str, BatchCounts] = {}
        for event, ticket in ready:
            topic = ticket.tp.topic
            counts = by_topic.get(topic)
            if counts is None:  # zero records: their records were counted as consumed when fetched
                counts = by_topic[topic] = BatchCounts(self.metrics, topic, 0)
            factor, reason = self.cost.current()
            decision = self.sampler.decide(event, factor=factor, reason=reason, now=time.time())
            counts.decided(event, decision.sampled)
            if decision.sampled:
                self._start(event, decision, ticket)
            else:
                self.tracker.done(ticket)
        for counts in by_topic.values():
            counts.close(self.cost.traffic)

    def _start(
        self,
        event: DecodedEvent,
        decision: SampleDecision,
        ticket: Ticket,
        record: ConsumerRecord[Any, Any] | None = None,
    ) -> None:
        """Start a sampled event's rows; one the redactor fails on is dead-lettered instead (its record, or for a
        joined call, which has no one record, the event itself), so its offset completes and consumption goes on."""
        self.metrics.child(self.metrics.sampled, self.metrics.app_label(event.app), decision.kind.value).inc()
        try:
            self.scorer.start(event, decision, ticket)
        except RedactionFailed as e:
            self._dead_letter(record if record is not None else event_record(event, ticket), e, ticket)

    def _dead_letter(self, record: ConsumerRecord[Any, Any], err: DecodeError, ticket: Ticket) -> None:
        async def publish() -> None:
            await dead_letter(self.dlq, record, err, self.metrics, self.health)
            self.tracker.done(ticket)

        task = self.tasks.spawn(ticket.tp, publish())
        self._dead_letters.add(task)
        task.add_done_callback(self._dead_letters.discard)

    async def commit(self, tps: set[TopicPartition] | None = None) -> dict[TopicPartition, int]:
        """Commit the low-water mark of owned partitions (or of `tps`); returns what the broker accepted.

        The traffic counts are written first, and nothing is committed while they cannot be: a committed event is
        never re-read, so its count must be durable before, or the coverage (judged / consumed) would pass 100 %.
        Uncommitted events are counted again when they are re-read, which only ever lowers it."""
        offsets = self.tracker.committable(tps if tps is not None else self.source.assignment())
        if not offsets or not await self.traffic_flush.flush():
            return {}
        committed = await self.source.commit(offsets)
        if committed:
            self.tracker.mark_committed(committed)
            self.metrics.commits.inc()
            log.debug("committed", offsets={f"{tp.topic}/{tp.partition}": off for tp, off in committed.items()})
        else:
            self.metrics.commit_failures.inc()
        return committed

    async def _on_assigned(self, assigned: set[TopicPartition]) -> None:
        self.tracker.assign(assigned)
        self.health.joined = True
        log.info("partitions_assigned", partitions=sorted(f"{tp.topic}/{tp.partition}" for tp in assigned))
        self._take_share(assigned)

    def _take_share(self, assigned: set[TopicPartition]) -> None:
        """This replica's part of the group's judge quota and per-segment minimum, from the new assignment."""
        consumer = self.source.consumer
        partitions = {t: len(consumer.partitions_for_topic(t) or ()) for t in self.source.topics}
        share = share_of(assigned, partitions)
        self.guard.limits.rate.set_share(share)
        self.sampler.set_share(share)
        if self.feedback_parts is not None:
            self.feedback_parts.budget.set_share(share.fraction)
        self.metrics.group_share.set(share.fraction)
        log.info("group_share", requests_per_minute=self.guard.limits.rate.requests_per_minute, **share.log_fields())

    async def _on_revoked(self, revoked: set[TopicPartition]) -> None:
        """Finish the revoked partitions within half the session timeout (the rebalance waits for us)."""
        await self.finish(revoked, Deadline(self.kafka.session_timeout_ms / 1000 / 2), phase="revoke")
        log.info("partitions_revoked", partitions=sorted(f"{tp.topic}/{tp.partition}" for tp in revoked))
