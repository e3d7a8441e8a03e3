"""The pipeline: Kafka → decode → sample → judge → ClickHouse, with at-least-once offsets.

An offset is committed only after every record at or below it is finished: written to ClickHouse, published
to the dead-letter topic, or deliberately not sampled (`OffsetTracker` keeps the contiguous low-water mark).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog
from aiokafka import TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord

from consumers.deadletter import DeadLetterPublisher
from consumers.decode import DecodeError, decode_event
from consumers.offsets import OffsetTracker, Ticket
from consumers.sampling import SampleDecision
from consumers.source import KafkaSource, PauseGate
from monitor.config import Settings
from monitor.cache import VerdictCache, cache_key
from monitor.cost_control import CostControl
from monitor.flow import AdaptiveLimiter, CircuitBreaker, RateLimiter
from monitor.policy import build_sampler
from monitor.judges.base import Judgement, JudgeError, JudgeUnavailable
from monitor.kafka import make_consumer, make_producer
from monitor.metrics import Metrics
from monitor.rows import build_row
from monitor.sink import ClickHouseSink, SinkClosed
from monitor.store import AsyncStore
from monitor.typing import Judge
from schemas.events import ConversationEvent, KafkaPosition
from schemas.scored import ScoredRow

log = structlog.get_logger("monitor.pipeline")

_POLL_MS = 100
_FACTOR_EVERY_S = 1.0


@dataclass(frozen=True, slots=True)
class JudgeCall:
    """The outcome of one judge call: a `Judgement` or the error text for the row."""

    outcome: Judgement | str
    elapsed_s: float
    transient: bool  # worth retrying later (timeout, judge unavailable)
    rate_limited: bool  # the provider throttled us: not the event's fault


class Pipeline:
    """Wires the stages. `run(stop)` consumes until `stop` is set, then drains, flushes, commits and returns.

    The caller owns the store (opened and schema-created here, closed by the caller): chDB allows one engine
    path per process, so the store outlives a pipeline."""

    def __init__(self, settings: Settings, judge: Judge, store: AsyncStore, metrics: Metrics | None = None) -> None:
        self.settings = settings
        self.judge = judge
        self.store = store
        self.metrics = metrics or Metrics()
        self.metrics.watch_judge(judge)
        self.tracker = OffsetTracker()
        self.sampler = build_sampler(settings)
        self.cost = CostControl(settings, store, self.metrics)
        self.cache = VerdictCache(settings.cache_max_entries, settings.cache_ttl_s)
        self._judging: dict[bytes, asyncio.Future[Judgement | None]] = {}
        self._rate_limited_seen = 0
        assert settings.resume_in_flight is not None
        self.gate = PauseGate(high=settings.max_in_flight, low=settings.resume_in_flight)
        self.sink: ClickHouseSink[Ticket] = ClickHouseSink(
            store, self._acknowledge, self.metrics, max_rows=settings.batch_max_rows, max_seconds=settings.batch_max_seconds
        )
        self.limiter = AdaptiveLimiter(settings.judge_concurrency, floor=settings.judge_concurrency_floor)
        self.rate = RateLimiter(settings.judge_requests_per_minute, settings.judge_tokens_per_minute)
        self.breaker = CircuitBreaker(settings.breaker_threshold, settings.breaker_cooldown_s, settings.breaker_max_cooldown_s)
        self._paused_for: set[str] = set()
        self._tasks: dict[TopicPartition, set[asyncio.Task[Any]]] = {}
        self._producer = make_producer(settings)
        self.dlq = DeadLetterPublisher(self._producer, settings.dlq_topic)
        self.source = KafkaSource(make_consumer(settings), settings.kafka_topics, on_assigned=self._on_assigned, on_revoked=self._on_revoked)
        self._background: list[asyncio.Task[None]] = []

    # ---- lifecycle ---------------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until `stop` is set; then drain within the grace period, flush, commit and close."""
        await self.store.open()
        await self._producer.start()
        try:
            await self.source.start()
        except BaseException:
            await self._producer.stop()
            raise
        log.info("pipeline_started", topics=self.settings.kafka_topics, group=self.settings.kafka_group_id,
                 judge=self.judge.info.method, judge_id=self.judge.info.judge_id, heuristic_judge=self.judge.info.heuristic)
        self._background.append(asyncio.create_task(self.sink.run(), name="sink-flusher"))
        self._background.append(asyncio.create_task(self.cost.traffic_loop(), name="traffic-counts"))
        if self.cost.budget.enabled:
            self._background.append(asyncio.create_task(self.cost.sync_loop(), name="budget-sync"))
        try:
            await self._consume(stop)
        finally:
            await self._shutdown()

    async def _consume(self, stop: asyncio.Event) -> None:
        last_commit = last_lag = last_factor = time.monotonic()
        while not stop.is_set():
            batch = await self.source.getmany(timeout_ms=_POLL_MS, max_records=self.settings.kafka_max_poll_records)
            for tp, records in batch.items():
                for record in records:
                    self._handle(tp, record)
            self._apply_backpressure()
            now = time.monotonic()
            if now - last_commit >= self.settings.commit_interval_s:
                await self.commit()
                last_commit = now
            if now - last_factor >= _FACTOR_EVERY_S:
                self.cost.refresh()
                last_factor = now
            if now - last_lag >= self.settings.lag_check_s:
                lag = await self._update_lag()
                limited = _rate_limited_count(self.judge)
                self.cost.on_lag(lag, throttled=limited > self._rate_limited_seen)
                self._rate_limited_seen = limited
                last_lag = now

    async def _shutdown(self) -> None:
        grace = self.settings.shutdown_grace_s
        deadline = time.monotonic() + grace
        in_flight = self.tracker.in_flight()
        log.info("draining", in_flight=in_flight, grace_s=grace)
        await self._drain(self._all_tasks(), deadline)
        try:
            await asyncio.wait_for(self.sink.flush_all(), timeout=max(0.0, deadline - time.monotonic()))
        except (TimeoutError, SinkClosed):
            log.warning("shutdown_flush_incomplete", rows_not_written=len(self.sink))
        self.sink.close()
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.cost.flush_traffic()
        await self.commit()
        left = self.tracker.in_flight()
        log.info("stopped", unfinished_events=left, note="unfinished events are not committed and will be redelivered" if left else "")
        await self.source.stop()
        await self._producer.stop()
        await self.judge.aclose()

    # ---- per record --------------------------------------------------------------------------------------

    def _handle(self, tp: TopicPartition, record: ConsumerRecord[Any, Any]) -> None:
        ticket = self.tracker.track(tp, record.offset)
        self.metrics.consumed.labels(record.topic).inc()
        try:
            event = decode_event(
                record.value,
                position=KafkaPosition(topic=record.topic, partition=record.partition, offset=record.offset),
                record_timestamp_ms=record.timestamp,
                max_bytes=self.settings.max_event_bytes,
            )
        except DecodeError as e:
            at = record.timestamp / 1000 if record.timestamp and record.timestamp > 0 else time.time()
            self.cost.traffic.add(at, "", "", "", "consumed")
            self.cost.traffic.add(at, "", "", "", "dead_lettered")
            self._spawn(tp, self._dead_letter(record, e, ticket))
            return
        factor, reason = self.cost.current()
        decision = self.sampler.decide(event, factor=factor, reason=reason, now=time.time())
        at = event.event_time.timestamp()
        traffic = self.cost.traffic
        traffic.add(at, event.app, event.model, event.prompt_version, "consumed")
        if not decision.sampled:
            traffic.add(at, event.app, event.model, event.prompt_version, "not_sampled")
            self.metrics.not_sampled.labels(event.app).inc()
            self.tracker.done(ticket)
            return
        traffic.add(at, event.app, event.model, event.prompt_version, "sampled")
        self.metrics.sampled.labels(event.app, decision.rule.split(":", 1)[0].split("*", 1)[0]).inc()
        key = cache_key(self.judge.info.judge_id, event.question, event.response)
        hit = self.cache.get(key)
        if hit is not None:  # costs nothing: no budget, no judge call
            self.metrics.cache_hits.inc()
            self._add_row(event, decision, ticket, hit, 0.0, cached=True)
            return
        leader = self._judging.get(key)
        if leader is not None:  # the same pair is being judged right now (an upstream retry, a FAQ burst)
            self._spawn(tp, self._follow(leader, event, decision, ticket, key))
            return
        self._start_leader(event, decision, ticket, key)

    def _start_leader(self, event: ConversationEvent, decision: SampleDecision, ticket: Ticket, key: bytes) -> asyncio.Task[Any]:
        """Judge a pair while identical pairs wait for its verdict (single flight). The call is reserved and the
        pair registered synchronously, at decision time: a burst cannot decide past the budget before calls
        start, and identical pairs in the same fetch find the leader."""
        self.cost.reserve_call()
        verdict: asyncio.Future[Judgement | None] = asyncio.get_running_loop().create_future()
        if self.cache.max_entries > 0:  # a disabled cache means no reuse at all
            self._judging[key] = verdict
        task = self._spawn(ticket.tp, self._judge_event(event, decision, ticket, key))
        # A done-callback, not a `finally`: it also runs for a task cancelled before it started (revocation).
        task.add_done_callback(functools.partial(self._publish_verdict, key, verdict))
        return task

    def _publish_verdict(self, key: bytes, verdict: asyncio.Future[Judgement | None], task: asyncio.Task[Any]) -> None:
        if self._judging.get(key) is verdict:
            del self._judging[key]
        outcome = None if task.cancelled() or task.exception() is not None else task.result()
        # None (failed, or abandoned on revocation or shutdown): each follower judges for itself
        verdict.set_result(outcome if isinstance(outcome, Judgement) else None)

    async def _follow(self, leader: asyncio.Future[Judgement | None], event: ConversationEvent, decision: SampleDecision,
                      ticket: Ticket, key: bytes) -> None:
        """Reuse the verdict of an identical pair being judged; judge it ourselves if that fails."""
        judgement = await asyncio.shield(leader)
        if judgement is not None:
            self.metrics.cache_hits.inc()
            self._add_row(event, decision, ticket, judgement, 0.0, cached=True)
            return
        leader = self._judging.get(key)
        if leader is not None:
            await self._follow(leader, event, decision, ticket, key)
        elif self.tracker.is_current(ticket):
            self._start_leader(event, decision, ticket, key)

    async def _judge_event(self, event: ConversationEvent, decision: SampleDecision, ticket: Ticket, key: bytes) -> Judgement | str | None:
        """Judge one event and add its row; returns the outcome (None if abandoned on revocation)."""
        info = self.judge.info
        attempts = 0
        while True:
            probe = await self.breaker.wait()
            if not self.tracker.is_current(ticket):  # revoked while waiting: the new owner judges it
                if probe:
                    self.breaker.on_abandoned()
                return None
            try:
                call = await self._call_judge(event)
            except asyncio.CancelledError:
                if probe:  # a cancelled probe must hand the probe on, or the circuit never closes
                    self.breaker.on_abandoned()
                raise
            outcome, elapsed = call.outcome, call.elapsed_s
            if call.transient:
                self.breaker.on_failure()
                # Rate limiting is never the event's fault: it waits (AIMD and the breaker slow everyone down).
                if not call.rate_limited:
                    attempts += 1
                # While the judge looks down (circuit open) the event waits instead of becoming an error row.
                if self.breaker.is_open or attempts < self.settings.judge_event_attempts:
                    self.metrics.judge_deferred.labels(info.method).inc()
                    log.info("judge_deferred", event_id=event.event_id, partition=ticket.tp.partition, offset=ticket.offset,
                             attempts=attempts, circuit_open=self.breaker.is_open)
                    continue
            else:
                self.breaker.on_success()
            break
        if isinstance(outcome, str):
            self.metrics.judge_errors.labels(info.method, outcome.split(":", 1)[0]).inc()
        else:
            self.cache.put(key, outcome)
        self.metrics.judge_latency.labels(info.method).observe(elapsed)
        self._add_row(event, decision, ticket, outcome, elapsed)
        return outcome

    def _add_row(self, event: ConversationEvent, decision: SampleDecision, ticket: Ticket, outcome: Judgement | str, elapsed: float,
                 cached: bool = False) -> None:
        info = self.judge.info
        try:
            row = build_row(event, info, decision, outcome, latency_ms=int(elapsed * 1000), scored_at=datetime.now(UTC),
                            store_text=self.settings.store_text, cached=cached)
        except ValueError as e:  # a judgement that does not fit the row contract is an error, not a lost event
            log.error("invalid_judgement", event_id=event.event_id, error=str(e)[:200])
            row = build_row(event, info, decision, f"internal: invalid judgement: {e}"[:1000], latency_ms=int(elapsed * 1000),
                            scored_at=datetime.now(UTC), store_text=self.settings.store_text)
        self.metrics.judged.labels(event.app, info.method, row.status).inc()
        if row.status == "error":
            log.warning("judge_failed", event_id=event.event_id, partition=ticket.tp.partition, offset=ticket.offset, error=row.error[:200])
        self.sink.add(row, ticket)

    async def _call_judge(self, event: ConversationEvent) -> JudgeCall:
        """One judge call under the rate limit and the adaptive concurrency limit."""
        await self.rate.acquire(estimate_tokens(event))
        async with self.limiter:
            self.metrics.judge_concurrency.set(self.limiter.current)
            limited_before = _rate_limited_count(self.judge)
            started = time.monotonic()
            transient = rate_limited = False
            outcome: Judgement | str
            try:
                outcome = await asyncio.wait_for(self.judge.judge(event.question, event.response), timeout=self.settings.judge_timeout_s)
            except TimeoutError:
                outcome, transient = f"timeout: no verdict within {self.settings.judge_timeout_s}s", True
            except JudgeUnavailable as e:
                outcome, transient, rate_limited = f"{e.reason}: {e}"[:1000], True, e.kind == "rate_limited"
            except JudgeError as e:
                outcome = f"{e.reason}: {e}"[:1000]
            except Exception as e:  # a bug in a judge: an error row, never a made-up score
                outcome = f"internal: {type(e).__name__}: {e}"[:1000]
                log.exception("judge_crashed", event_id=event.event_id)
            elapsed = time.monotonic() - started
            if isinstance(outcome, Judgement):
                self.cost.spent(outcome.usage)
            if _rate_limited_count(self.judge) > limited_before:
                self.limiter.on_rate_limited()
                self.metrics.judge_rate_limited.labels(self.judge.info.method).inc()
            elif not transient:
                self.limiter.on_success()
        return JudgeCall(outcome, elapsed, transient, rate_limited)

    async def _dead_letter(self, record: ConsumerRecord[Any, Any], err: DecodeError, ticket: Ticket) -> None:
        delay = 0.2
        while True:
            try:
                await self.dlq.publish(record, err.reason, err.detail)
                break
            except Exception as e:  # KafkaError or a client-side refusal
                # Not acknowledged, so not committed: retry (the partition's commits wait for this record).
                self.metrics.dlq_publish_failures.inc()
                log.error("dlq_publish_failed", partition=record.partition, offset=record.offset, error=type(e).__name__, detail=str(e)[:200])
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
        self.metrics.dead_lettered.labels(err.reason).inc()
        log.info("dead_lettered", topic=record.topic, partition=record.partition, offset=record.offset, reason=err.reason, detail=err.detail[:200])
        self.tracker.done(ticket)

    def _acknowledge(self, tickets: list[Ticket], rows: list[ScoredRow]) -> None:
        for ticket in tickets:
            self.tracker.done(ticket)
        self.cost.written(rows)

    # ---- tasks, flow, offsets ----------------------------------------------------------------------------

    def _spawn(self, tp: TopicPartition, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro)
        bucket = self._tasks.setdefault(tp, set())
        bucket.add(task)
        task.add_done_callback(bucket.discard)
        task.add_done_callback(_log_task_failure)
        return task

    def _all_tasks(self) -> set[asyncio.Task[Any]]:
        return set().union(*self._tasks.values()) if self._tasks else set()

    @staticmethod
    async def _drain(tasks: set[asyncio.Task[Any]], deadline: float) -> None:
        """Let tasks finish until the deadline, then cancel the rest (their offsets stay uncommitted)."""
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=max(0.0, deadline - time.monotonic()))
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
            log.warning("abandoned_in_flight", events=len(pending))

    def _apply_backpressure(self) -> None:
        """Pause while too much is in flight or the judge's circuit is open; resume when neither holds."""
        in_flight = self.tracker.in_flight()
        self.metrics.in_flight.set(in_flight)
        self.metrics.breaker_open.set(1 if self.breaker.is_open else 0)
        change = self.gate.update(in_flight)
        reasons = set(self._paused_for)
        if change is True:
            reasons.add("in_flight_cap")
            self.sink.request_flush()  # nothing more arrives until rows are acknowledged: do not wait for a bound
        elif change is False:
            reasons.discard("in_flight_cap")
        if self.breaker.is_open:
            reasons.add("judge_circuit_open")
        else:
            reasons.discard("judge_circuit_open")
        if reasons and not self._paused_for:
            self.source.pause()
            self.metrics.paused.set(1)
            log.warning("consumption_paused", reasons=sorted(reasons), in_flight=in_flight, cap=self.gate.high)
        elif self._paused_for and not reasons:
            self.source.resume()
            self.metrics.paused.set(0)
            log.info("consumption_resumed", in_flight=in_flight)
        self._paused_for = reasons

    async def commit(self, tps: set[TopicPartition] | None = None) -> dict[TopicPartition, int]:
        """Commit the low-water mark of owned partitions (or of `tps`); returns what the broker accepted."""
        offsets = self.tracker.committable(tps if tps is not None else self.source.assignment())
        if not offsets:
            return {}
        committed = await self.source.commit(offsets)
        if committed:
            self.tracker.mark_committed(committed)
            self.metrics.commits.inc()
            log.debug("committed", offsets={f"{tp.topic}/{tp.partition}": off for tp, off in committed.items()})
        else:
            self.metrics.commit_failures.inc()
        return committed

    async def _update_lag(self) -> int:
        """Refresh the per-partition lag gauges; returns the total lag of owned partitions."""
        try:
            lags = await self.source.lag()
        except KafkaError as e:
            log.debug("lag_unavailable", error=type(e).__name__)
            return 0
        for tp, lag in lags.items():
            self.metrics.lag.labels(tp.topic, str(tp.partition)).set(lag)
        return sum(lags.values())

    # ---- rebalance ---------------------------------------------------------------------------------------

    async def _on_assigned(self, assigned: set[TopicPartition]) -> None:
        self.tracker.assign(assigned)
        log.info("partitions_assigned", partitions=sorted(f"{tp.topic}/{tp.partition}" for tp in assigned))

    async def _on_revoked(self, revoked: set[TopicPartition]) -> None:
        """Finish what can finish for the revoked partitions, flush, commit, forget: all inside one deadline."""
        deadline = time.monotonic() + self.settings.kafka_session_timeout_ms / 1000 / 2
        tasks = set().union(*(self._tasks.get(tp, set()) for tp in revoked)) if revoked else set()
        await self._drain(tasks, deadline)
        try:
            await asyncio.wait_for(self.sink.flush_all(), timeout=max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            log.warning("revoke_flush_incomplete", rows_not_written=len(self.sink))
        await self.commit(revoked)
        self.tracker.revoke(revoked)
        for tp in revoked:
            self._tasks.pop(tp, None)
            try:
                self.metrics.lag.remove(tp.topic, str(tp.partition))
            except KeyError:
                pass
        log.info("partitions_revoked", partitions=sorted(f"{tp.topic}/{tp.partition}" for tp in revoked))


def estimate_tokens(event: ConversationEvent) -> float:
    """A rough input-token estimate for the client-side limit (about 4 characters a token, plus the prompt)."""
    return (len(event.question) + len(event.response)) / 4 + 600


def _rate_limited_count(judge: Judge) -> int:
    # LLM judges count the 429s they met, including those retried inside one call; the heuristic has none.
    stats = getattr(judge, "stats", None)
    return int(stats.get("error.rate_limited", 0)) if isinstance(stats, dict) else 0


def _log_task_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("task_failed", error=repr(task.exception()))
