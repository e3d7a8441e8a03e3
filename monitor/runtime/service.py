"""Running the monitor as a service: build every collaborator from settings, then run the pipeline until a
signal arrives."""

from __future__ import annotations

import asyncio
import gc
import signal
from typing import TYPE_CHECKING

import structlog
from aiokafka import AIOKafkaProducer

from consumers.clients import make_consumer, make_producer
from consumers.deadletter import DeadLetterPublisher
from consumers.offsets import OffsetTracker, Ticket
from consumers.sampling import Sampler, ShadowSampler
from consumers.topics import ensure_dlq_topic
from monitor.config import Settings
from monitor.feedback.answer_reader import AnswerReader
from monitor.feedback.answers import AnswerIndex
from monitor.feedback.judge_budget import HourlyBudget
from monitor.feedback.sink import FeedbackSink
from monitor.judges.base import Judge
from monitor.judges.factory import build_judge
from monitor.judging.cost_control import CostControl
from monitor.judging.guarded_judge import GuardedJudge, ShadowGuardedJudge
from monitor.judging.shadow import RowsOwed
from monitor.judging.verdict_reuse import VerdictCache, VerdictReuse
from monitor.privacy.redactor import build_redactor
from monitor.publish.destinations import destination_for
from monitor.publish.settings import PublishSettings
from monitor.runtime.acknowledge import Acknowledge
from monitor.runtime.collaborators import Collaborators
from monitor.runtime.feedback_flow import FeedbackParts
from monitor.runtime.health import Health, HealthServer
from monitor.runtime.heap_trim import pin_malloc_thresholds, trim_heap_every
from monitor.runtime.metrics import Metrics
from monitor.runtime.pipeline import Pipeline
from monitor.runtime.record_events import RecordDecoder
from monitor.runtime.scorer import Shadow
from monitor.runtime.sink import ClickHouseSink
from monitor.store.async_store import AsyncStore
from schemas.errors import ConfigError, SamplingConfigError
from schemas.usage import Usage

if TYPE_CHECKING:
    from monitor.publish.publisher import EvaluationPublisher

log = structlog.get_logger("monitor.runtime.service")


def build_sampler(settings: Settings) -> Sampler:
    """The sampler from the sampling slice; a bad rules file is a one-line error naming the setting."""
    try:
        return Sampler.from_settings(settings.sampling)
    except SamplingConfigError as e:
        raise SamplingConfigError(f"invalid setting MONITOR_SAMPLING_FILE: {e}") from None


def build_shadow_judge(settings: Settings) -> Judge | None:
    """The shadow judge of MONITOR_SHADOW_JUDGE, or None when it is unset; raises `ConfigError` (one line)."""
    client = settings.shadow_judge
    if client is None:
        return None
    try:
        return build_judge(client)
    except ConfigError as e:
        raise ConfigError(f"MONITOR_SHADOW_JUDGE={client.method}: {e}") from None


def build_shadow(
    settings: Settings, shadow_judge: Judge | None, primary: GuardedJudge, cost: CostControl, metrics: Metrics
) -> Shadow | None:
    """The shadow judge behind the primary's limits and budget, or None; refuses a shadow that is the primary
    judge itself (its rows would replace the primary's: the table is keyed by judge_id)."""
    if shadow_judge is None:
        return None
    if shadow_judge.info.judge_id == primary.judge.info.judge_id:
        raise ConfigError(
            f"invalid setting MONITOR_SHADOW_JUDGE: is the primary judge itself (judge_id "
            f"{primary.judge.info.judge_id})"
        )
    metrics.watch_judge(shadow_judge, shadow=True)
    method = shadow_judge.info.method

    def spent(usage: Usage) -> None:
        cost.spent(usage)  # the same budget as the primary's calls
        metrics.shadow_cost.labels(method).inc(usage.cost_usd or 0.0)

    guard = ShadowGuardedJudge(shadow_judge, primary, metrics, on_spent=spent)
    return Shadow(guard, ShadowSampler(settings.shadow.sample_rate, settings.sampling.key))


def build_pipeline(
    settings: Settings,
    judge: Judge,
    store: AsyncStore,
    metrics: Metrics,
    health: Health | None = None,
    sampler: Sampler | None = None,
    shadow_judge: Judge | None = None,
) -> Pipeline:
    """A pipeline with every collaborator built from its slice of `settings`; the shadow judge is `shadow_judge`,
    or the one MONITOR_SHADOW_JUDGE names."""
    metrics.watch_judge(judge)
    health = health or Health()
    producer = make_producer(settings.kafka)
    tracker = OffsetTracker()
    owed = RowsOwed()
    cost = CostControl(settings.budget, store, metrics)

    publisher = build_publisher(settings.publish, producer, metrics)
    acknowledge = Acknowledge(tracker, owed, cost, publisher)
    flow = settings.flow
    guard = GuardedJudge(judge, flow, metrics, on_spent=cost.spent)
    shadow = build_shadow(settings, shadow_judge or build_shadow_judge(settings), guard, cost, metrics)
    return Pipeline(
        Collaborators(
            kafka=settings.kafka,
            flow=flow,
            text_policy=settings.store.store_text,
            redactor=build_redactor(settings.redaction),
            window=settings.judge.context_window(),
            store=store,
            consumer=make_consumer(settings.kafka),
            producer=producer,
            guard=guard,
            sampler=sampler or build_sampler(settings),
            cost=cost,
            reuse=VerdictReuse(VerdictCache(settings.budget.cache_max_entries, settings.budget.cache_ttl_s)),
            sink=ClickHouseSink(
                store, acknowledge, metrics, health, max_rows=flow.batch_max_rows, max_seconds=flow.batch_max_seconds
            ),
            tracker=tracker,
            metrics=metrics,
            health=health,
            dlq=DeadLetterPublisher(producer, settings.kafka.dlq_topic),
            shadow=shadow,
            publisher=publisher,
            owed=owed,
            feedback=build_feedback(settings, store, tracker, metrics, cost),
        )
    )


def build_feedback(
    settings: Settings, store: AsyncStore, tracker: OffsetTracker, metrics: Metrics, cost: CostControl
) -> FeedbackParts | None:
    """What reading users' feedback needs, or None when MONITOR_FEEDBACK_TOPICS is unset. A feedback row is durable
    when its insert returned: then its record's ticket is done."""
    feedback = settings.feedback
    if not feedback.topics:
        return None

    def durable(tickets: list[Ticket]) -> None:
        for ticket in tickets:
            tracker.done(ticket)

    # The answers' records decode as the pipeline decodes them, without its counting or joining.
    decode = RecordDecoder(settings.kafka, metrics, cost.traffic).events
    return FeedbackParts(
        settings=feedback,
        store=store,
        index=AnswerIndex(store, settings.store.table, feedback.lookback_s),
        reader=AnswerReader(
            settings.kafka,
            settings.kafka.topics,
            decode,
            read_max_records=feedback.read_max_records,
            lookback_s=feedback.lookback_s,
        ),
        sink=FeedbackSink(store, durable, max_seconds=settings.flow.batch_max_seconds),
        budget=HourlyBudget(feedback.judge_budget),
    )


def build_publisher(
    settings: PublishSettings, producer: AIOKafkaProducer, metrics: Metrics
) -> EvaluationPublisher | None:
    """The evaluation publisher on the pipeline's producer, or None when publishing is off."""
    if settings.publish_evaluations == "off":
        return None
    # Here, not on import: evaluations are OTLP log records (protobuf and opentelemetry-proto, ~2 MB resident).
    from monitor.publish.publisher import EvaluationPublisher

    return EvaluationPublisher(
        destination_for(settings, producer),
        settings,
        service="relevancy-monitor",
        on_published=metrics.evaluations_published.inc,
        on_dropped=lambda reason, n: metrics.evaluations_dropped.labels(reason).inc(n),
    )


def freeze_start_up() -> None:
    """Move what start-up built (modules, settings, the judge's SDK types: ~210,000 objects with the statements
    judge) out of the cyclic collector's generations, once its garbage is collected: they live as long as the process,
    and a full collection no longer walks them (135-210 ms on the event loop each time, measured). Resident memory is
    unchanged (measured after start-up); objects freed by reference counting are freed as before."""
    gc.collect()
    gc.freeze()


def install_signal_handlers(stop: asyncio.Event) -> None:
    """SIGTERM and SIGINT set `stop`: the pipeline drains, flushes and commits, then exits 0."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


async def run_service(settings: Settings, stop: asyncio.Event | None = None, metrics: Metrics | None = None) -> None:
    """Start every part from `settings` and run until `stop` is set (or a signal arrives)."""
    if stop is None:  # first thing: a SIGTERM during start-up must still end in a clean exit
        stop = asyncio.Event()
        install_signal_handlers(stop)
    pin_malloc_thresholds()  # before the judge's SDK, the store and the Kafka clients allocate their buffers
    judge = build_judge(settings.judge)
    shadow_judge = build_shadow_judge(settings)  # before Kafka: a missing key is reported even with no broker
    sampler = build_sampler(settings)  # before Kafka: a bad rules file is reported even with no broker
    # After every check of the settings alone, so a bad one is the only line printed; the defaults are documented.
    log.info("starting", settings=settings.redacted(changed_only=True))
    if judge.info.heuristic:
        log.warning(
            "heuristic_judge",
            judge=judge.info.method,
            note="word-overlap heuristic, not an LLM judge: for demos and dry runs",
        )
    metrics = metrics or Metrics(max_apps=settings.process.metrics_max_apps, apps=tuple(settings.process.metrics_apps))
    health = Health(unready_after_s=settings.process.store_unready_after_s)
    heartbeat = asyncio.create_task(
        health.heartbeat(), name="liveness-heartbeat"
    )  # from the start: start-up is not a hang
    # glibc keeps what bursts free (21-26 MB under bench/memory_backlog.py's 1M backlog): handed back as it appears.
    trimmer = asyncio.create_task(trim_heap_every(), name="heap-trim")
    try:
        if settings.process.metrics_port:
            HealthServer(metrics.registry, health, settings.process.metrics_port).start()
        store = AsyncStore.from_settings(settings.store)
        try:
            # The schema first: a store that is behind or lacks a table stops the start in one line, before any
            # Kafka client exists, and nothing is written until it is current.
            await store.open()
            created = await ensure_dlq_topic(settings.kafka)
            if created:
                log.info("created_topics", topics=created)
            pipeline = build_pipeline(settings, judge, store, metrics, health, sampler, shadow_judge)
            freeze_start_up()
            try:
                await pipeline.run(stop)
            finally:  # collectable again once the service ends (the demo runs it inside a longer process)
                gc.unfreeze()
        finally:
            await store.close()
    finally:
        heartbeat.cancel()
        trimmer.cancel()
