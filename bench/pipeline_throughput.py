"""Pipeline throughput against a bare aiokafka loop over the same backlog, in the same run.

One topic (3 partitions) on a local tansu broker holds the backlog; every run reads all of it from the start with a
fresh consumer group. The limit is a bare loop: `getmany`, `json.loads` of each value, one commit of explicit offsets
per fetched batch. Against it, in the same rounds (interleaved, the order rotated each round):
  - the monitor sampling nothing (0 %): decode, sample, count, commit;
  - the monitor judging every event (100 %) with the lexical judge and writing to embedded ClickHouse (chDB), with
    redaction on (the default) and off (MONITOR_REDACT=false).
The OpenTelemetry path runs the same events as GenAI spans, 50 LLM calls to a Collector record (each inside an agent
span), in each encoding against its own bare loop (`getmany`, protobuf's `ExportTraceServiceRequest.FromString` or
`json.loads` of the OTLP/JSON, one commit per batch): the monitor at 0 % and 100 % on `MONITOR_INPUT_FORMAT=otlp_proto`,
at 0 % on `otlp_json`; rates count LLM calls, not records. `otlp_read_floor` is the protobuf bare loop that also
reads every attribute's key and value through protobuf's objects (`read_every_attribute`): the least any decoder of
the monitor's exact outcomes reads, with nothing mapped, checked or counted, so its ratio bounds what the monitor's
OTLP protobuf path can reach in Python. `otlp_read_keys` reads less still: only every span's attribute keys, the least
a reader must look at to tell an LLM span from an agent, tool or HTTP span (keys only, no value, no resource).
Rates are steady-state, the same way for every side: records finished (bare: committed; monitor: below the offset
tracker's low-water mark, i.e. written, dead-lettered or not sampled) between 10 % and 90 % of the backlog, over the
time between, so the group join and the warm-up are outside the window for both. Reported: each side's median rate,
the median of the per-round ratios monitor ÷ bare (by wall clock, and by the loop thread's CPU per event), and CPU per
event inside the window (the event loop's thread, and the whole process, chDB's thread included); each bare loop's own
rate and cost per event are also listed on their own (`bare_loops` in the JSON), so that another benchmark's limit can
be compared with them. Prints a table and writes JSON (`--json PATH`).
Run: `python -m bench.pipeline_throughput [N] [--rounds R] [--tiny] [--scenarios ...] [--json PATH]`."""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from aiokafka import AIOKafkaConsumer
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from bench.output import emit
from consumers.clients import FETCH_MAX_WAIT_MS
from monitor.config import load_settings
from monitor.devtools.localbroker import LocalBroker
from monitor.devtools.otlp_traffic import otlp_records
from monitor.devtools.traffic import generate_events, produce
from monitor.judges.lexical import LexicalJudge
from monitor.runtime.logs import configure_logging
from monitor.runtime.metrics import Metrics
from monitor.runtime.service import build_pipeline
from monitor.store.async_store import AsyncStore
from monitor.store.connection import ClickHouseStore
from tests.harness import create_topic

DEFAULT_EVENTS = 100_000
TINY_EVENTS = 600
ROUNDS = 3
DEFAULT_JSON = Path(".relevancy-monitor/bench/pipeline_throughput.json")
WINDOW = (0.10, 0.90)  # the steady-state window, as shares of the backlog finished
_SAMPLE_S = 0.01  # how often the monitor's progress is read (from its own event loop: a few µs each time)
SCENARIOS = (
    "bare", "sample_0", "judged", "judged_no_redaction", "otlp_bare", "otlp_sample_0", "otlp_judged",
    "otlp_json_bare", "otlp_json_sample_0", "otlp_read_floor", "otlp_read_keys",
)  # fmt: skip
LABELS = {
    "bare": "bare loop (getmany + json.loads + commit per batch)",
    "sample_0": "monitor, 0 % sampled (decode, sample, commit)",
    "judged": "monitor, 100 % judged, lexical + chDB, redaction on",
    "judged_no_redaction": "monitor, 100 % judged, redaction off",
    "otlp_bare": "OTLP bare loop (getmany + protobuf parse + commit)",
    "otlp_sample_0": "monitor on OTLP spans, 0 % sampled",
    "otlp_judged": "monitor on OTLP spans, 100 % judged, redaction on",
    "otlp_json_bare": "OTLP/JSON bare loop (getmany + json.loads + commit)",
    "otlp_json_sample_0": "monitor on OTLP/JSON spans, 0 % sampled",
    "otlp_read_floor": "OTLP floor: bare loop reading every attribute",
    "otlp_read_keys": "OTLP floor: bare loop reading every span's keys",
}
BARES = ("bare", "otlp_bare", "otlp_json_bare")
# Each side's own limit: the bare loop of its input format
BARE_OF = {
    s: "otlp_json_bare" if s.startswith("otlp_json") else "otlp_bare" if s.startswith("otlp_") else "bare"
    for s in SCENARIOS
}
ENCODING_OF: dict[str, Literal["otlp_proto", "otlp_json"]] = {"otlp_bare": "otlp_proto", "otlp_json_bare": "otlp_json"}
SPANS_PER_RECORD = 50
MONITOR_SCENARIOS = tuple(s for s in SCENARIOS if s not in BARES)


@dataclass(frozen=True, slots=True)
class Mark:
    """Progress at one moment: records finished, wall clock, the loop thread's and the process's CPU time."""

    done: int
    wall: float
    loop_cpu: float
    cpu: float

    @classmethod
    def now(cls, done: int) -> Mark:
        """A mark of `done` records, taken now (on the event loop's thread)."""
        return cls(done, time.perf_counter(), time.thread_time(), time.process_time())


@dataclass(frozen=True, slots=True)
class Steady:
    """One run's figures inside the steady-state window."""

    events_per_s: float
    loop_cpu_us: float  # the event loop's thread, per event
    cpu_us: float  # the whole process (chDB's thread and aiokafka's included), per event
    window_events: int
    window_s: float


def steady(marks: list[Mark], n: int) -> Steady:
    """The rate and CPU per event between the first marks at or past 10 % and 90 % of `n` records finished."""
    low, high = (next(m for m in marks if m.done >= share * n) for share in WINDOW)
    events, seconds = high.done - low.done, high.wall - low.wall
    if events <= 0 or seconds <= 0:  # a tiny backlog finished within one fetch: no window to measure
        return Steady(0.0, 0.0, 0.0, events, seconds)
    return Steady(
        events / seconds,
        (high.loop_cpu - low.loop_cpu) / events * 1e6,
        (high.cpu - low.cpu) / events * 1e6,
        events,
        seconds,
    )


def read_every_attribute(value: bytes) -> int:
    """Parse a traces record and read every resource, span and span event attribute's key and value through
    protobuf's objects; the number read. An exact decoder reads at least this much: it must see every value to refuse
    a record that nests too deep, and the keys and values that say what each span is. Of the ways measured, protobuf's
    objects were the cheapest in Python (BENCHMARKS.md, issue 46)."""
    request = ExportTraceServiceRequest.FromString(value)
    read = 0
    for rs in request.resource_spans:
        read += _read_pairs(rs.resource.attributes)
        for scope in rs.scope_spans:
            for span in scope.spans:
                read += _read_pairs(span.attributes)
                for event in span.events:
                    read += _read_pairs(event.attributes)
    return read


def read_span_keys(value: bytes) -> int:
    """Parse a traces record and read every span's attribute keys, nothing else; the number read. A classifier of
    spans reads at least this: which keys a span has says whether it is an LLM call."""
    request = ExportTraceServiceRequest.FromString(value)
    read = 0
    for rs in request.resource_spans:
        for scope in rs.scope_spans:
            for span in scope.spans:
                for kv in span.attributes:
                    kv.key  # noqa: B018 - read, as a classifier reads it
                    read += 1
    return read


def _read_pairs(pairs: Any) -> int:
    for kv in pairs:
        kv.key  # noqa: B018 - read, as a decoder reads it
        value = kv.value
        which = value.WhichOneof("value")
        if which:
            getattr(value, which)
    return len(pairs)


async def bare_loop(
    bootstrap: str, topic: str, n: int, parse: Callable[[bytes], object] = json.loads, per_record: int = 1
) -> list[Mark]:
    """The limit: a group consumer that fetches, parses every value (json.loads, or an OTLP record of `per_record`
    events) and commits each batch; progress in events."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"bare-{uuid.uuid4().hex[:6]}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=500,  # the monitor's default (MONITOR_KAFKA_MAX_POLL_RECORDS)
        fetch_max_wait_ms=FETCH_MAX_WAIT_MS,  # the monitor's (aiokafka's 500 ms idles both at a partition's end)
    )
    await consumer.start()
    marks = [Mark.now(0)]
    seen = 0
    try:
        while seen < n:
            batch = await consumer.getmany(timeout_ms=100, max_records=500)
            if not batch:
                continue
            offsets = {}
            for tp, records in batch.items():
                for record in records:
                    parse(record.value)
                seen += len(records) * per_record
                offsets[tp] = records[-1].offset + 1
            await consumer.commit(offsets)
            marks.append(Mark.now(seen))
        return marks
    finally:
        await consumer.stop()


async def monitor_run(
    bootstrap: str,
    topic: str,
    n: int,
    url: str,
    database: str,
    sample_rate: float,
    redact: bool = True,
    per_record: int = 1,
    input_format: str = "events",
) -> list[Mark]:
    """The monitor over the backlog into `database` (its own per run: no run pays for another's merges), until every
    record is finished and committed; progress is the offset tracker's low-water mark."""
    settings = load_settings(
        kafka_bootstrap_servers=bootstrap,
        kafka_topics=[topic],
        kafka_group_id=f"mon-{uuid.uuid4().hex[:6]}",
        dlq_topic=f"{topic}.dlq",
        clickhouse_url=url,
        judge="lexical",
        metrics_port=0,
        judge_concurrency=64,
        sample_rate=sample_rate,
        redact=redact,
        input_format=input_format,
    )
    store = AsyncStore(ClickHouseStore(url, database, "relevancy_scores"))
    pipeline = build_pipeline(settings, LexicalJudge(), store, Metrics())
    stop = asyncio.Event()
    task = asyncio.create_task(pipeline.run(stop))
    marks = [Mark.now(0)]
    try:
        while True:
            await asyncio.sleep(_SAMPLE_S)
            if task.done():
                task.result()  # a pipeline that died says why
                raise RuntimeError("the pipeline stopped before finishing the backlog")
            done = sum(pipeline.tracker.low_water().values()) * per_record  # offsets start at 0 in a fresh topic
            if done > marks[-1].done:
                marks.append(Mark.now(done))
            if done >= n:
                break
        return marks  # the shutdown below commits what is finished (outside the window)
    finally:
        stop.set()
        await task
        await store.close()


async def otlp_backlog(bootstrap: str, topic: str, n: int, encoding: Literal["otlp_proto", "otlp_json"]) -> None:
    """A fresh topic (and its dead-letter topic) holding the bench's `n` events as GenAI spans in `encoding`."""
    await create_topic(bootstrap, topic, 3)
    events = generate_events(n, seed=5, malformed_share=0.0, pii_share=0.1)
    await produce(
        bootstrap, topic, otlp_records(events, encoding=encoding, dialect="gen_ai", per_record=SPANS_PER_RECORD)
    )
    await create_topic(bootstrap, f"{topic}.dlq", 1)


def peak_rss_mb() -> float:
    """The process's peak resident set so far, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def measure(
    n: int, rounds: int, bootstrap: str, url: str, prefix: str, scenarios: tuple[str, ...] = SCENARIOS
) -> dict[str, Any]:
    """Produce the backlog once, then run the bare loop and `scenarios` `rounds` times, interleaved; the figures."""
    wanted_bares = [b for b in BARES if b == "bare" or any(BARE_OF[s] == b for s in scenarios)]
    chosen = (*wanted_bares, *(s for s in scenarios if s not in BARES))
    topic = f"bench-{uuid.uuid4().hex[:6]}"
    await create_topic(bootstrap, topic, 3)
    await produce(bootstrap, topic, generate_events(n, seed=5, malformed_share=0.0, pii_share=0.1))
    await create_topic(bootstrap, f"{topic}.dlq", 1)
    k, spans, json_spans = SPANS_PER_RECORD, f"{topic}-otlp", f"{topic}-otlpjson"
    for bare, name in (("otlp_bare", spans), ("otlp_json_bare", json_spans)):
        if bare in wanted_bares:  # the spans of the same events, in the bare loop's encoding
            await otlp_backlog(bootstrap, name, n, ENCODING_OF[bare])
    runners: dict[str, Callable[[int], Awaitable[list[Mark]]]] = {
        "bare": lambda r: bare_loop(bootstrap, topic, n),
        "sample_0": lambda r: monitor_run(bootstrap, topic, n, url, f"{prefix}_{r}_s0", 0.0),
        "judged": lambda r: monitor_run(bootstrap, topic, n, url, f"{prefix}_{r}_j", 1.0, True),
        "judged_no_redaction": lambda r: monitor_run(bootstrap, topic, n, url, f"{prefix}_{r}_jn", 1.0, False),
        "otlp_bare": lambda r: bare_loop(bootstrap, spans, n, ExportTraceServiceRequest.FromString, k),
        "otlp_sample_0": lambda r: monitor_run(
            bootstrap, spans, n, url, f"{prefix}_{r}_o0", 0.0, per_record=k, input_format="otlp_proto"
        ),
        "otlp_judged": lambda r: monitor_run(
            bootstrap, spans, n, url, f"{prefix}_{r}_oj", 1.0, per_record=k, input_format="otlp_proto"
        ),
        "otlp_json_bare": lambda r: bare_loop(bootstrap, json_spans, n, json.loads, k),
        "otlp_read_floor": lambda r: bare_loop(bootstrap, spans, n, read_every_attribute, k),
        "otlp_read_keys": lambda r: bare_loop(bootstrap, spans, n, read_span_keys, k),
        "otlp_json_sample_0": lambda r: monitor_run(
            bootstrap, json_spans, n, url, f"{prefix}_{r}_oj0", 0.0, per_record=k, input_format="otlp_json"
        ),
    }
    runs: dict[str, list[Steady]] = {s: [] for s in chosen}
    rss_before = peak_rss_mb()
    for r in range(rounds):
        for scenario in chosen[r % len(chosen) :] + chosen[: r % len(chosen)]:
            runs[scenario].append(steady(await runners[scenario](r), n))
    out: dict[str, Any] = {
        "events": n,
        "rounds": rounds,
        "window": list(WINDOW),
        "peak_rss_growth_mb": round(peak_rss_mb() - rss_before, 1),
    }
    for scenario in chosen:
        figures = runs[scenario]
        ratios = [
            f.events_per_s / b.events_per_s if b.events_per_s else 0.0
            for f, b in zip(figures, runs[BARE_OF[scenario]], strict=True)
        ]
        # By CPU: the bare loop's loop-thread CPU per event over the monitor's, round by round (the wall ratio's
        # twin, less moved by other processes taking the cores and by either side waiting on the broker).
        cpu_ratios = [
            b.loop_cpu_us / f.loop_cpu_us if f.loop_cpu_us else 0.0
            for f, b in zip(figures, runs[BARE_OF[scenario]], strict=True)
        ]
        out[scenario] = {
            "events_per_s": statistics.median(f.events_per_s for f in figures),
            "ratio_to_bare": statistics.median(ratios),
            "cpu_ratio_to_bare": statistics.median(cpu_ratios),
            "ratios_per_round": ratios,
            "loop_cpu_us_per_event": statistics.median(f.loop_cpu_us for f in figures),
            "cpu_us_per_event": statistics.median(f.cpu_us for f in figures),
            "runs": [asdict(f) for f in figures],
        }
    out["bare_loops"] = {
        bare: {
            "events_per_s": out[bare]["events_per_s"],
            "us_per_event": 1e6 / out[bare]["events_per_s"] if out[bare]["events_per_s"] else None,
            "loop_cpu_us_per_event": out[bare]["loop_cpu_us_per_event"],
        }
        for bare in wanted_bares
    }
    if "judged" in out and "judged_no_redaction" in out:
        on, off = out["judged"], out["judged_no_redaction"]
        out["redaction_keeps"] = (
            on["events_per_s"] / off["events_per_s"] if on["events_per_s"] and off["events_per_s"] else None
        )
    return out


def report_lines(result: dict[str, Any]) -> list[str]:
    """The table: each scenario's steady-state rate, its ratio to the bare loop of the same rounds, CPU per event."""
    lines = [
        f"events: {result['events']}, rounds: {result['rounds']} (interleaved), steady state between"
        f" {result['window'][0]:.0%} and {result['window'][1]:.0%} of the backlog finished; medians",
        f"{'scenario':<55} {'events/s':>10} {'÷ bare':>8} {'CPU ÷':>6} {'loop µs/ev':>11} {'cpu µs/ev':>10}"
        "  per-round ratios",
        "(an OTLP scenario's bare loop is the one of its encoding; its events are LLM calls)",
    ]
    for scenario in (s for s in SCENARIOS if s in result):
        f = result[scenario]
        if not f["events_per_s"]:
            lines.append(
                f"{LABELS[scenario]:<55} {'-':>10} {'-':>8} {'-':>6} {'-':>11} {'-':>10}  no window: the backlog"
                " finished in one step (too small)"
            )
            continue
        rounds = ", ".join(f"{r:.3f}" for r in f["ratios_per_round"])
        lines.append(
            f"{LABELS[scenario]:<55} {f['events_per_s']:>10.0f} {f['ratio_to_bare']:>8.3f}"
            f" {f['cpu_ratio_to_bare']:>6.3f} {f['loop_cpu_us_per_event']:>11.1f} {f['cpu_us_per_event']:>10.1f}"
            f"  {rounds}"
        )
    lines.append(
        "each bare loop on its own (to compare another benchmark's limit with): wall µs/event = 1e6 ÷ events/s"
    )
    for bare, f in result["bare_loops"].items():
        wall = f"{f['us_per_event']:.2f}" if f["us_per_event"] else "-"
        lines.append(
            f"  {LABELS[bare]}: {f['events_per_s']:.0f} events/s, {wall} µs/event wall,"
            f" {f['loop_cpu_us_per_event']:.2f} µs/event loop CPU"
        )
    if result.get("redaction_keeps") is not None:
        lines.append(f"redaction keeps {result['redaction_keeps']:.3f} of the judged throughput")
    lines.append(f"peak RSS growth {result['peak_rss_growth_mb']} MB")
    return lines


async def main(
    n: int = DEFAULT_EVENTS,
    *,
    rounds: int = ROUNDS,
    json_path: Path | None = DEFAULT_JSON,
    bootstrap: str | None = None,
    url: str | None = None,
    prefix: str = "bench",
    quiet: bool = True,
    scenarios: tuple[str, ...] = SCENARIOS,
) -> dict[str, Any]:
    """Measure, print the table, write the JSON; returns the figures. Without `bootstrap` a local broker is started,
    without `url` a chDB store in a temporary directory (chDB allows one store path per process)."""
    if quiet:  # the pipeline's info lines (pauses, commits) would bury the table
        configure_logging(level="error")
    with tempfile.TemporaryDirectory() as tmp:
        if bootstrap is None:
            with LocalBroker() as broker:
                result = await measure(n, rounds, broker.bootstrap, url or f"chdb://{tmp}", prefix, scenarios)
        else:
            result = await measure(n, rounds, bootstrap, url or f"chdb://{tmp}", prefix, scenarios)
    emit(report_lines(result), result, json_path)
    return result


if __name__ == "__main__":
    p = argparse.ArgumentParser(
        description="Monitor throughput against a bare aiokafka loop, same broker and backlog, same run."
    )
    p.add_argument("events", nargs="?", type=int, default=None, help=f"backlog size (default {DEFAULT_EVENTS})")
    p.add_argument("--rounds", type=int, default=None, help=f"interleaved rounds (default {ROUNDS})")
    p.add_argument(
        "--tiny", action="store_true", help=f"{TINY_EVENTS} events, one round: that it runs, not what it measures (CI)"
    )
    p.add_argument(
        "--json", type=Path, default=DEFAULT_JSON, help=f"where to write the figures (default {DEFAULT_JSON})"
    )
    p.add_argument(
        "--scenarios",
        nargs="+",
        choices=MONITOR_SCENARIOS,
        default=MONITOR_SCENARIOS,
        help="the monitor's scenarios (default all)",
    )
    a = p.parse_args()
    size = a.events or (TINY_EVENTS if a.tiny else DEFAULT_EVENTS)
    asyncio.run(
        main(size, rounds=a.rounds or (1 if a.tiny else ROUNDS), json_path=a.json, scenarios=tuple(a.scenarios))
    )
