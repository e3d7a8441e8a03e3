"""End-to-end latency at a steady moderate rate: from producing an event to its row being readable in the store.

A producer in a process of its own sends synthetic events (each response unique) to a local tansu broker at RATE
events/s for SECONDS, stamping each event's `timestamp` with the wall-clock time just before `send` (its produce
time, carried in the row as `event_time`). The monitor runs in this process with the lexical judge and the default
settings (or `--batch-seconds`), writing to embedded ClickHouse through a store that notes, for every row, when its
insert returned.

Which "row time": `scored_at` is when the row was built in memory, before it waits for its batch (up to
`batch_max_seconds`, checked every quarter of it) and for the insert, so it understates what a reader sees. chDB's
inserts are synchronous: a row is readable once its insert has returned, and the store checks that once per run
(a count of the first batch's event ids right after the insert). That return time is taken as the row's visible
time: exact per row, with no polling interval or extra queries competing with the inserts. Events produced in the
first WARMUP_S seconds (connections and first fetches) are left out.

Baseline, in the same run: a bare aiokafka group consumer with the monitor's consumer settings, polling as the pipeline
polls, at the same rate (produce→fetched: the Kafka hop, which no monitor setting removes). Reported: p50, p99 and max
of produce→visible, split into produce→scored (fetch, decode, redaction, judging) and
scored→visible (the batch wait and the insert), with batch_max_rows, batch_max_seconds, the batches written and
their mean size, for the default batch settings and, unless `--only-default`, batch_max_seconds 0.25. Prints a
table and writes JSON (`--json PATH`). Run: `python -m bench.latency [--rate 200] [--seconds 60] [--tiny]`."""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from bench.memory_backlog import unique_events
from bench.output import emit
from consumers.client_start import start_client
from consumers.clients import make_consumer, make_producer
from consumers.settings import KafkaSettings
from monitor.config import load_settings
from monitor.devtools.localbroker import LocalBroker
from monitor.judges.lexical import LexicalJudge
from monitor.runtime.logs import configure_logging
from monitor.runtime.metrics import Metrics
from monitor.runtime.service import build_pipeline
from monitor.store.async_store import AsyncStore
from monitor.store.connection import ClickHouseStore
from schemas.scored import ScoredRow
from tests.harness import create_topic

DEFAULT_JSON = Path(".relevancy-monitor/bench/latency.json")
WARMUP_S = 2.0
DRAIN_S = 5.0


@dataclass
class VisibleAt:
    """Per event id, when its row's insert returned (wall clock), and the batches written."""

    at: dict[str, float] = field(default_factory=dict)
    rows: dict[str, ScoredRow] = field(default_factory=dict)
    batches: list[tuple[int, float]] = field(default_factory=list)  # (rows, seconds the insert took)
    checked_visible: bool | None = None


class TimingStore(AsyncStore):
    """The embedded store, noting when each row's insert returned (when the row became readable)."""

    def __init__(self, store: ClickHouseStore, seen: VisibleAt) -> None:
        super().__init__(store)
        self.seen = seen

    async def insert_rows(self, rows: Sequence[ScoredRow], dedup_token: str) -> None:
        """Insert, then stamp the rows; the first time, check that they are readable at once."""
        started = time.perf_counter()
        await super().insert_rows(rows, dedup_token)
        now = time.time()
        self.seen.batches.append((len(rows), time.perf_counter() - started))
        for row in rows:
            self.seen.at.setdefault(row.event_id, now)
            self.seen.rows.setdefault(row.event_id, row)
        if self.seen.checked_visible is None and rows:
            table = self.store.qualified_table
            ids = [r.event_id for r in rows]
            found = await self.query(
                f"SELECT count() FROM {table} WHERE event_id IN {{ids:Array(String)}}", {"ids": ids}
            )
            self.seen.checked_visible = int(found.rows[0][0]) >= len(set(ids))


def _produce(conn: Connection, bootstrap: str, topic: str, rate: float, seconds: float) -> None:
    """The producer's process: `rate` events/s for `seconds`, each stamped with its produce time; sends the count."""

    async def run() -> int:
        kafka = KafkaSettings(kafka_bootstrap_servers=bootstrap)
        producer = make_producer(kafka, linger_ms=5)  # as the traffic generator sends
        await start_client(producer, kafka)
        n = int(rate * seconds)
        started = time.monotonic()
        try:
            for i, value in enumerate(unique_events(n, seed=17)):
                ahead = started + i / rate - time.monotonic()
                if ahead > 0:
                    await asyncio.sleep(ahead)
                event = json.loads(value)
                event["timestamp"] = datetime.now(UTC).isoformat().replace("+00:00", "Z")
                await producer.send(topic, json.dumps(event).encode())
            await producer.flush()
        finally:
            await producer.stop()
        return n

    conn.send(asyncio.run(run()))


def _quantiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0, "n": 0}
    qs = statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else [values[0]] * 99
    return {"p50_ms": qs[49] * 1000, "p99_ms": qs[98] * 1000, "max_ms": max(values) * 1000, "n": len(values)}


async def _produced(bootstrap: str, topic: str, rate: float, seconds: float) -> int:
    """Run the producer's process to the end; how many events it sent."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_produce, args=(child, bootstrap, topic, rate, seconds), name="producer")
    proc.start()
    child.close()
    produced: int = await asyncio.to_thread(parent.recv)  # in a thread: the consumer keeps running meanwhile
    proc.join(timeout=10)
    return produced


async def run_bare(bootstrap: str, rate: float, seconds: float) -> dict[str, Any]:
    """The floor: a bare aiokafka group consumer (the monitor's consumer settings) noting when each record arrives."""
    topic = f"bare-{uuid.uuid4().hex[:6]}"
    await create_topic(bootstrap, topic, 3)
    kafka = KafkaSettings(
        kafka_bootstrap_servers=bootstrap, kafka_topics=(topic,), kafka_group_id=f"bare-{uuid.uuid4().hex[:6]}"
    )
    consumer = make_consumer(kafka)
    consumer.subscribe([topic])
    await start_client(consumer, kafka)
    arrived: list[tuple[float, bytes]] = []
    done = asyncio.Event()

    async def consume() -> None:
        while not done.is_set():
            batch = await consumer.getmany(timeout_ms=100, max_records=kafka.max_poll_records)  # as the pipeline polls
            now = time.time()
            arrived.extend((now, r.value) for records in batch.values() for r in records if r.value is not None)

    task = asyncio.create_task(consume())
    try:
        # Polling: nothing signals an assignment or an arrival count this loop could wait on.
        while not consumer.assignment():  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        produced = await _produced(bootstrap, topic, rate, seconds)
        deadline = time.monotonic() + DRAIN_S
        while len(arrived) < produced and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.1)
    finally:
        done.set()
        await task
        await consumer.stop()
    sent = [
        (at, datetime.fromisoformat(json.loads(v)["timestamp"].replace("Z", "+00:00")).timestamp()) for at, v in arrived
    ]
    first = min((t for _, t in sent), default=0.0)
    return {
        "produced": produced,
        "received": len(arrived),
        "produce_to_fetched": _quantiles([at - t for at, t in sent if t >= first + WARMUP_S]),
    }


async def run_once(
    bootstrap: str, chdb: str, rate: float, seconds: float, batch_max_seconds: float | None, database: str
) -> dict[str, Any]:
    """One monitor run over a fresh topic at `rate` events/s; the latency figures."""
    topic = f"lat-{uuid.uuid4().hex[:6]}"
    await create_topic(bootstrap, topic, 3)
    await create_topic(bootstrap, f"{topic}.dlq", 1)
    overrides: dict[str, Any] = {} if batch_max_seconds is None else {"batch_max_seconds": batch_max_seconds}
    settings = load_settings(
        kafka_bootstrap_servers=bootstrap,
        kafka_topics=[topic],
        kafka_group_id=f"lat-{uuid.uuid4().hex[:6]}",
        dlq_topic=f"{topic}.dlq",
        clickhouse_url=chdb,
        judge="lexical",
        metrics_port=0,
        **overrides,
    )
    seen = VisibleAt()
    store = TimingStore(ClickHouseStore(chdb, database, "relevancy_scores"), seen)
    pipeline = build_pipeline(settings, LexicalJudge(), store, Metrics())
    stop = asyncio.Event()
    task = asyncio.create_task(pipeline.run(stop))
    try:
        while not (pipeline.health.joined and pipeline.source.assignment()):  # produce only once the group is joined
            await asyncio.sleep(0.05)
            if task.done():
                await task
        produced = await _produced(bootstrap, topic, rate, seconds)
        deadline = time.monotonic() + DRAIN_S
        while len(seen.at) < produced and time.monotonic() < deadline:  # noqa: ASYNC110 (rows arrive with no signal to wait on)
            await asyncio.sleep(0.1)
    finally:
        stop.set()
        await task
        await store.close()
    first = min((r.event_time.timestamp() for r in seen.rows.values()), default=0.0)
    kept = [r for r in seen.rows.values() if r.event_time.timestamp() >= first + WARMUP_S]
    total = [seen.at[r.event_id] - r.event_time.timestamp() for r in kept]
    to_scored = [r.scored_at.timestamp() - r.event_time.timestamp() for r in kept]
    to_visible = [seen.at[r.event_id] - r.scored_at.timestamp() for r in kept]
    flow = settings.flow
    return {
        "batch_max_rows": flow.batch_max_rows,
        "batch_max_seconds": flow.batch_max_seconds,
        "produced": produced,
        "rows_seen": len(seen.at),
        "rows_measured": len(kept),
        "batches": len(seen.batches),
        "mean_batch_rows": statistics.mean(n for n, _ in seen.batches) if seen.batches else 0.0,
        "insert": _quantiles([s for _, s in seen.batches]),
        "visible_when_insert_returns": seen.checked_visible,
        "produce_to_visible": _quantiles(total),
        "produce_to_scored": _quantiles(to_scored),
        "scored_to_visible": _quantiles(to_visible),
    }


async def measure(
    rate: float, seconds: float, batch_settings: Sequence[float | None], url: str | None = None, database: str = "lat"
) -> dict[str, Any]:
    """A run per batch setting (None: the default), each over its own topic and database (`url`: an embedded store this
    process has open already, as chDB allows one directory per process; None: a temporary one)."""
    with LocalBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        chdb = url or f"chdb://{tmp}"
        bare = await run_bare(broker.bootstrap, rate, seconds)
        runs = [
            await run_once(broker.bootstrap, chdb, rate, seconds, b, f"{database}_{i}")
            for i, b in enumerate(batch_settings)
        ]
    floor = bare["produce_to_fetched"]
    for run in runs:  # the Kafka hop is what no monitor setting can remove: the monitor's stages as multiples of it
        q = run["produce_to_scored"]
        run["scored_vs_kafka_hop"] = {
            "p50": q["p50_ms"] / floor["p50_ms"] if floor["p50_ms"] else None,
            "p99": q["p99_ms"] / floor["p99_ms"] if floor["p99_ms"] else None,
        }
    return {
        "rate_per_s": rate,
        "seconds": seconds,
        "warmup_s": WARMUP_S,
        "judge": "lexical",
        "bare_consumer": bare,
        "runs": runs,
    }


def report_lines(r: dict[str, Any]) -> list[str]:
    """The figures as a table for people."""
    lines = [
        f"{r['rate_per_s']:g} events/s for {r['seconds']:g} s (first {r['warmup_s']:g} s left out), {r['judge']} "
        "judge, default settings"
        " but the batch bound; a row's time is when its insert returned (readable from then on)",
        "",
        f"{'batch rows / seconds':<22}{'stage':<20}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}",
    ]
    floor = r["bare_consumer"]["produce_to_fetched"]
    lines.append(
        f"{'(bare aiokafka)':<22}{'produce → fetched':<20}{floor['p50_ms']:>9.0f}{floor['p99_ms']:>9.0f}"
        f"{floor['max_ms']:>9.0f}"
    )
    for run in r["runs"]:
        label = f"{run['batch_max_rows']} / {run['batch_max_seconds']:g}"
        for stage, key in (
            ("produce → visible", "produce_to_visible"),
            ("  produce → scored", "produce_to_scored"),
            ("  scored → visible", "scored_to_visible"),
        ):
            q = run[key]
            lines.append(f"{label:<22}{stage:<20}{q['p50_ms']:>9.0f}{q['p99_ms']:>9.0f}{q['max_ms']:>9.0f}")
            label = ""
        lines.append(
            f"{'':<22}rows {run['rows_measured']:,} measured of {run['produced']:,} produced ({run['rows_seen']:,} "
            "written);"
            f" {run['batches']} batches of {run['mean_batch_rows']:.0f} rows on average,"
            f" insert p50 {run['insert']['p50_ms']:.0f} ms, p99 {run['insert']['p99_ms']:.0f} ms;"
            f" readable when the insert returned: {run['visible_when_insert_returns']}"
        )
        hop = run["scored_vs_kafka_hop"]
        if hop["p50"] is not None and hop["p99"] is not None:
            lines.append(
                f"{'':<22}produce → scored ÷ the bare consumer's produce → fetched: p50 {hop['p50']:.2f}, p99 "
                f"{hop['p99']:.2f}"
            )
    return lines


def main(
    rate: float = 200.0,
    seconds: float = 60.0,
    json_path: Path | None = DEFAULT_JSON,
    batch_settings: Sequence[float | None] = (None, 0.25),
    url: str | None = None,
    database: str = "lat",
) -> dict[str, Any]:
    """Run the benchmark; print the table and write the JSON."""
    result = asyncio.run(measure(rate, seconds, batch_settings, url, database))
    emit(report_lines(result), result, json_path)
    return result


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="Produce-to-row latency at a steady rate, lexical judge.")
    p.add_argument("--rate", type=float, default=200.0, help="events per second (default 200)")
    p.add_argument("--seconds", type=float, default=60.0, help="how long to produce (default 60)")
    p.add_argument(
        "--batch-seconds",
        type=float,
        action="append",
        help="batch_max_seconds to run with (repeatable; default: the default and 0.25)",
    )
    p.add_argument("--tiny", action="store_true", help="100 events/s for 6 s, default batch settings only (CI)")
    p.add_argument(
        "--json", type=Path, default=DEFAULT_JSON, help=f"where to write the figures (default {DEFAULT_JSON})"
    )
    a = p.parse_args()
    configure_logging("json", "warning")  # as the service configures it, quieter: the table is the output here
    if a.tiny:
        main(100.0, 6.0, a.json, (None,))
    else:
        main(a.rate, a.seconds, a.json, a.batch_seconds or (None, 0.25))
