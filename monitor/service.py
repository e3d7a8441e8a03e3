"""Running the monitor as a service: judge, store, metrics, topics, signals, pipeline."""

from __future__ import annotations

import asyncio
import signal

import structlog

from monitor.config import Settings
from monitor.judges.factory import build_judge
from monitor.kafka import ensure_topics
from monitor.metrics import Metrics
from monitor.pipeline import Pipeline
from monitor.store import AsyncStore, ClickHouseStore

log = structlog.get_logger("monitor.service")


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
    judge = build_judge(settings)
    log.info("starting", settings=settings.redacted())
    if judge.info.heuristic:
        log.warning("heuristic_judge", judge=judge.info.method, note="word-overlap heuristic, not an LLM judge: for demos and dry runs")
    metrics = metrics or Metrics()
    if settings.metrics_port:
        metrics.serve(settings.metrics_port)
    created = await ensure_topics(settings, {settings.dlq_topic: 1})
    if created:
        log.info("created_topics", topics=created)
    store = AsyncStore(ClickHouseStore(settings.clickhouse_url, settings.clickhouse_database, settings.clickhouse_table))
    try:
        await Pipeline(settings, judge, store, metrics).run(stop)
    finally:
        await store.close()
