"""The demo: a local broker, generated traffic and the monitor on embedded ClickHouse, run for a while; then
what landed in ClickHouse, for the `demo` command to print."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from monitor.config import Settings, load_settings
from monitor.devtools.localbroker import LocalBroker
from monitor.devtools.traffic import generate_events, produce
from monitor.runtime.logs import configure_logging
from monitor.runtime.metrics import Metrics
from monitor.runtime.service import run_service
from monitor.runtime.store import ClickHouseStore, QueryResult

SUMMARY_SQL = """
SELECT app, prompt_version, count() AS judged, round(avg(score), 3) AS mean_score,
       round(countIf(score < 0.5) / count(), 3) AS low_share
FROM {table} FINAL
WHERE status = 'ok'
GROUP BY app, prompt_version ORDER BY app, prompt_version
"""
REDACTED_SQL = """
SELECT kind, sum(items) AS items, count() AS rows
FROM {table} FINAL ARRAY JOIN mapKeys(redactions) AS kind, mapValues(redactions) AS items
GROUP BY kind ORDER BY items DESC, kind
"""
REDACTED_EXAMPLES_SQL = """
SELECT substring(question, greatest(1, position(question, '[') - 25), 60) AS question,
       substring(response, greatest(1, position(response, '[') - 25), 60) AS response
FROM {table} FINAL WHERE notEmpty(redactions) ORDER BY event_time DESC LIMIT 3
"""
WORST_SQL = """
SELECT app, prompt_version, round(score, 2) AS score, substring(question, 1, 50) AS question, substring(response, 1, 70) AS response
FROM {table} FINAL WHERE status = 'ok' ORDER BY score ASC, event_time DESC LIMIT 5
"""


@dataclass(frozen=True, slots=True)
class DemoReport:
    """What one demo run produced: the counters and the summary queries' results (title, result)."""

    data_dir: Path
    consumed: int
    scored: int
    dead_lettered: int
    tables: list[tuple[str, QueryResult]]


def _counter(metrics: Metrics, name: str) -> int:
    return int(sum(s.value for m in metrics.registry.collect() if m.name == name for s in m.samples if s.name.endswith("_total")))


def run_demo(seconds: float, rate: float, data_dir: Path, console: Console) -> DemoReport:
    """Run the whole path locally for `seconds` (progress on `console`), then read what landed in ClickHouse."""
    data_dir = data_dir.absolute()
    shutil.rmtree(data_dir, ignore_errors=True)  # the demo's own folder: start clean each time
    configure_logging("console", "warning")
    with LocalBroker() as broker:
        settings = load_settings(
            kafka_bootstrap_servers=broker.bootstrap,
            kafka_topics=["conversations"],
            kafka_group_id="relevancy-monitor-demo",
            clickhouse_url=f"chdb://{data_dir}",
            judge="lexical",
            metrics_port=0,
            log_format="console",
            log_level="warning",
        )
        console.print(
            f"[bold]relevancy-monitor demo[/]: broker {broker.bootstrap} (tansu), ClickHouse chdb://{data_dir}, "
            f"judge [yellow]lexical (word-overlap heuristic, not an LLM)[/], {rate:g} events/s for {seconds:g}s"
        )
        metrics = Metrics()
        asyncio.run(_demo(settings, metrics, seconds, rate, console))
        store = ClickHouseStore(settings.clickhouse_url, settings.clickhouse_database, settings.clickhouse_table)
        try:
            tables = [
                (title, store.query(sql.replace("{table}", store.qualified_table)))
                for title, sql in (
                    ("Mean relevancy per app and prompt version", SUMMARY_SQL),
                    ("Five lowest-scored answers", WORST_SQL),
                    ("Personal data replaced before the judge and the store saw the text (placeholders like [EMAIL])", REDACTED_SQL),
                    ("Three of those rows, as stored (MONITOR_STORE_TEXT=redacted)", REDACTED_EXAMPLES_SQL),
                )
            ]
        finally:
            store.close()
    return DemoReport(
        data_dir,
        _counter(metrics, "relevancy_monitor_events_consumed"),
        _counter(metrics, "relevancy_monitor_events_judged"),
        _counter(metrics, "relevancy_monitor_events_dead_lettered"),
        tables,
    )


async def _demo(settings: Settings, metrics: Metrics, seconds: float, rate: float, console: Console) -> None:
    stop = asyncio.Event()
    total = max(1, int(seconds * rate))
    producer = asyncio.create_task(
        produce(settings.kafka_bootstrap_servers, "conversations", generate_events(total, seed=int(time.time()), pii_share=0.1), rate=rate)
    )
    service = asyncio.create_task(run_service(settings, stop=stop, metrics=metrics))
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeRemainingColumn(), console=console, transient=True) as progress:
        task = progress.add_task("starting", total=seconds)
        started = time.monotonic()
        while (elapsed := time.monotonic() - started) < seconds and not service.done():
            consumed = _counter(metrics, "relevancy_monitor_events_consumed")
            judged = _counter(metrics, "relevancy_monitor_events_judged")
            progress.update(task, completed=elapsed, description=f"consumed {consumed:>6}  scored {judged:>6}")
            await asyncio.sleep(0.25)
    stop.set()
    producer.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await producer
    await service
