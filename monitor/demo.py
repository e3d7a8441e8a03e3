"""`relevancy-monitor demo`: a local broker, generated traffic and the monitor on embedded ClickHouse."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from monitor.cli import print_result, produce
from monitor.config import load_settings
from monitor.localbroker import LocalBroker
from monitor.logs import configure_logging
from monitor.metrics import Metrics
from monitor.service import run_service
from monitor.store import ClickHouseStore
from monitor.traffic import generate_events

SUMMARY_SQL = """
SELECT app, prompt_version, count() AS judged, round(avg(score), 3) AS mean_score,
       round(countIf(score < 0.5) / count(), 3) AS low_share
FROM {table} FINAL
WHERE status = 'ok'
GROUP BY app, prompt_version ORDER BY app, prompt_version
"""
WORST_SQL = """
SELECT app, prompt_version, round(score, 2) AS score, substring(question, 1, 50) AS question, substring(response, 1, 70) AS response
FROM {table} FINAL WHERE status = 'ok' ORDER BY score ASC, event_time DESC LIMIT 5
"""


def _counter(metrics: Metrics, name: str) -> int:
    return int(sum(s.value for m in metrics.registry.collect() if m.name == name for s in m.samples if s.name.endswith("_total")))


def run_demo(seconds: float, rate: float, data_dir: Path) -> int:
    """Run the whole path locally for `seconds`, then print what landed in ClickHouse."""
    console = Console(stderr=True)
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
        console.print(f"[bold]relevancy-monitor demo[/]: broker {broker.bootstrap} (tansu), ClickHouse chdb://{data_dir}, "
                      f"judge [yellow]lexical (word-overlap heuristic, not an LLM)[/], {rate:g} events/s for {seconds:g}s")
        metrics = Metrics()
        asyncio.run(_demo(settings, metrics, seconds, rate, console))
        store = ClickHouseStore(settings.clickhouse_url, settings.clickhouse_database, settings.clickhouse_table)
        try:
            for title, sql in (("Mean relevancy per app and prompt version", SUMMARY_SQL), ("Five lowest-scored answers", WORST_SQL)):
                result = store.query(sql.replace("{table}", store.qualified_table))
                console.print(f"\n[bold]{title}[/]")
                print_result(result.columns, result.rows, "table")
        finally:
            store.close()
    console.print(
        f"\nconsumed {_counter(metrics, 'relevancy_monitor_events_consumed')}, "
        f"scored {_counter(metrics, 'relevancy_monitor_events_judged')}, "
        f"dead-lettered {_counter(metrics, 'relevancy_monitor_events_dead_lettered')} (malformed on purpose).\n"
        f"Query the rows yourself:\n  relevancy-monitor sql --clickhouse-url chdb://{data_dir} "
        "\"SELECT judge, count(), avg(score) FROM {table} FINAL GROUP BY judge\""
    )
    return 0


async def _demo(settings, metrics: Metrics, seconds: float, rate: float, console: Console) -> None:  # type: ignore[no-untyped-def]
    stop = asyncio.Event()
    total = max(1, int(seconds * rate))
    producer = asyncio.create_task(produce(settings.kafka_bootstrap_servers, "conversations", generate_events(total, seed=int(time.time())), rate=rate))
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
