"""Where the monitor's ingest time goes: one scenario of bench/pipeline_throughput.py under py-spy, summarised.

The parent starts a local broker and produces the backlog; the child, recorded by py-spy from outside (no
instrumentation, so per-event code is not slowed down the way cProfile slows it), only runs the scenario. The summary
gives, for the event loop's thread and the store's (chDB) thread, each stage's share of the thread's samples (a stage
is a group of files: decode, sampling, redaction, judge, rows, insert, aiokafka, asyncio; a sample counts for the
stage of its frame nearest the leaf) and the top functions by self and inclusive time. Start-up (imports, pydantic
building its validators) is left out; the store's schema creation is not, and shows under the insert stage.
The OpenTelemetry scenarios (`otlp_sample_0`, `otlp_json_sample_0` and their bare loops `otlp_bare`, `otlp_json_bare`)
read the same events as GenAI spans, 50 LLM calls to a record, as bench/pipeline_throughput.py does.
Run: `python -m bench.profile_ingest [--scenario sample_0|judged|judged_no_redaction|bare|otlp_...] [--events N]
[--out DIR]`
(py-spy is in the dev extra: a profiling tool, not a dependency of the monitor)."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections import Counter
from pathlib import Path
from typing import Literal

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from bench.pipeline_throughput import SPANS_PER_RECORD, bare_loop, monitor_run, otlp_backlog
from monitor.devtools.localbroker import LocalBroker
from monitor.devtools.traffic import generate_events, produce
from monitor.runtime.logs import configure_logging
from tests.harness import create_topic

RATES = {"sample_0": (0.0, True), "judged": (1.0, True), "judged_no_redaction": (1.0, False)}
# The OpenTelemetry scenarios: the monitor at 0 % on each encoding, and each encoding's bare loop
OTLP: dict[str, Literal["otlp_proto", "otlp_json"]] = {
    "otlp_sample_0": "otlp_proto", "otlp_json_sample_0": "otlp_json",
    "otlp_bare": "otlp_proto", "otlp_json_bare": "otlp_json",
}  # fmt: skip
# Frames that mark start-up work (imports, pydantic building its validators), not ingest.
_START_UP = (
    "_find_and_load",
    "<frozen importlib",
    "pydantic/_internal/_model_construction.py",
    "pydantic/_internal/_generate_schema.py",
)
# Frames under which everything runs (the runner, the event loop, the worker thread): left out of the inclusive list.
_FRAMEWORK = (
    "<frozen runpy>",
    "bench/profile_ingest.py",
    "asyncio/runners.py",
    "asyncio/base_events.py",
    "asyncio/events.py",
    "threading.py",
    "concurrent/futures",
)
_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")
# Stages of the pipeline, by the files (or functions) that make them up: the frame nearest the leaf that matches wins.
STAGES = (
    ("OTLP read (consumers/otlp/wire.py, protobuf)", ("consumers/otlp/wire.py", "google/protobuf")),
    ("OTLP short way (consumers/otlp/span_event.py)", ("otlp/span_event.py",)),
    ("OTLP mapping (dialects.py, records.py)", ("consumers/otlp/",)),
    (
        "decode (consumers/decode.py, msgspec, json, pydantic)",
        ("consumers/decode.py", "schemas/events.py", "json/", "decode_event"),
    ),
    ("sampling decision (consumers/sampling.py)", ("consumers/sampling.py",)),
    ("traffic counts", ("traffic_counts.py",)),
    ("Prometheus metrics", ("prometheus_client", "runtime/metrics.py")),
    ("offset tracking", ("consumers/offsets.py", "sortedcontainers")),
    ("redaction (monitor/privacy)", ("monitor/privacy", "re2/")),
    ("lexical judge (monitor/judges)", ("monitor/judges",)),
    ("judge guards (guarded_judge, flow)", ("guarded_judge.py", "judging/flow.py")),
    ("verdict reuse", ("verdict_reuse.py",)),
    ("row building (rows.py, ScoredRow)", ("runtime/rows.py", "schemas/scored.py")),
    ("sink (batching, acknowledgement)", ("runtime/sink.py", "judging/shadow.py", "runtime/service.py")),
    ("ClickHouse insert (driver, chDB)", ("clickhouse_connect", "chdb", "store/connection.py")),
    (
        "pipeline's own code (handle_batch, the scorer, ...)",
        (
            "runtime/pipeline.py",
            "runtime/scorer.py",
            "runtime/batch_counts.py",
            "partition_tasks.py",
            "backpressure.py",
        ),
    ),
    ("aiokafka fetch and parse", ("aiokafka",)),
    ("asyncio event loop (tasks, callbacks, select)", ("asyncio", "selectors.py")),
)


async def child(scenario: str, n: int, bootstrap: str, topic: str) -> None:
    """Run one scenario over the backlog (the process py-spy records: the backlog is produced by the parent)."""
    configure_logging(level="error")
    if scenario in OTLP:
        k, encoding = SPANS_PER_RECORD, OTLP[scenario]
        if scenario.endswith("_bare"):
            parse = ExportTraceServiceRequest.FromString if encoding == "otlp_proto" else json.loads
            await bare_loop(bootstrap, topic, n, parse, k)
            return
        with tempfile.TemporaryDirectory() as tmp:
            await monitor_run(bootstrap, topic, n, f"chdb://{tmp}", "prof", 0.0, per_record=k, input_format=encoding)
        return
    if scenario == "bare":
        await bare_loop(bootstrap, topic, n)
        return
    rate, redact = RATES[scenario]
    with tempfile.TemporaryDirectory() as tmp:
        await monitor_run(bootstrap, topic, n, f"chdb://{tmp}", "prof", rate, redact)


async def backlog(bootstrap: str, n: int, scenario: str = "sample_0") -> str:
    """A fresh topic holding `n` events (as in bench/pipeline_throughput.py, as spans for an OpenTelemetry
    scenario); returns its name."""
    topic = f"prof-{uuid.uuid4().hex[:6]}"
    if scenario in OTLP:
        await otlp_backlog(bootstrap, topic, n, OTLP[scenario])
        return topic
    await create_topic(bootstrap, topic, 3)
    await produce(bootstrap, topic, generate_events(n, seed=5, malformed_share=0.0, pii_share=0.1))
    await create_topic(bootstrap, f"{topic}.dlq", 1)
    return topic


def _frames(stack: str) -> list[tuple[str, str]]:
    """(function, file) per frame, root first."""
    out = []
    for frame in stack.split(";"):
        m = _FRAME.match(frame)
        out.append((m.group("func"), m.group("file")) if m else (frame, ""))
    return out


def _name(func: str, file: str) -> str:
    short = file.split("site-packages/")[-1].split("/work/main/")[-1]
    return f"{func} ({short})"


def _stage(frames: list[tuple[str, str]]) -> str:
    """The stage of the frame nearest the leaf that belongs to one."""
    for func, file in reversed(frames):
        for label, keys in STAGES:
            if any(k in file or k == func for k in keys):
                return label
    return "other"


def summarise(raw: Path, top: int = 25) -> list[str]:
    """The summary lines of a py-spy raw (collapsed, `--threads`) profile: per thread, stages and top functions.
    Start-up (imports, pydantic building its validators) is left out."""
    inclusive: dict[str, Counter[str]] = {}
    selfs: dict[str, Counter[str]] = {}
    stages: dict[str, Counter[str]] = {}
    totals: Counter[str] = Counter()
    for line in raw.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit() or any(mark in stack for mark in _START_UP):
            continue  # start-up, or a line py-spy cut short
        head, *rest = stack.split(";")
        if not head.startswith("thread ("):
            continue  # a line py-spy cut short
        thread = head.partition(": ")[2] or head
        if not rest:  # no Python frame on the thread (the interpreter itself, collecting garbage say)
            rest = ["(no Python frame) (interpreter)"]
        frames = _frames(";".join(rest))
        c = int(count)
        totals[thread] += c
        seen: set[str] = set()
        for func, file in frames:
            name = _name(func, file)
            if any(part in file for part in _FRAMEWORK):
                continue  # on every stack of its thread: says nothing
            if name not in seen:
                inclusive.setdefault(thread, Counter())[name] += c
                seen.add(name)
        if frames:
            selfs.setdefault(thread, Counter())[_name(*frames[-1])] += c
        stages.setdefault(thread, Counter())[_stage(frames)] += c
    grand = sum(totals.values())
    lines = [f"samples: {grand} (" + ", ".join(f"{k}: {v / grand:.0%}" for k, v in totals.most_common()) + ")"]
    for thread, total in totals.most_common(2):
        lines.append(f"\n## thread {thread}: stages (share of this thread's samples; of all samples)")
        lines += [f"{c / total:7.1%} {c / grand:7.1%}  {s}" for s, c in stages[thread].most_common()]
        lines.append(f"\n## thread {thread}: top functions by self time")
        lines += [f"{c / total:7.1%}  {s}" for s, c in selfs[thread].most_common(top)]
        lines.append(f"\n## thread {thread}: top functions by inclusive time")
        lines += [f"{c / total:7.1%}  {s}" for s, c in inclusive[thread].most_common(top)]
    return lines


def main() -> None:
    """Record the scenario under py-spy, then print and save the summary."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", choices=[*RATES, "bare", *OTLP], default="sample_0")
    p.add_argument("--events", type=int, default=100_000)
    p.add_argument("--rate", type=int, default=400, help="py-spy samples per second")
    p.add_argument("--out", type=Path, default=Path(".relevancy-monitor/bench/profiles"))
    p.add_argument("--child", nargs=2, metavar=("BOOTSTRAP", "TOPIC"), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        asyncio.run(child(a.scenario, a.events, *a.child))
        return
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    a.out.mkdir(parents=True, exist_ok=True)
    raw = a.out / f"{a.scenario}.raw.txt"
    with LocalBroker() as broker:
        topic = asyncio.run(backlog(broker.bootstrap, a.events, a.scenario))
        cmd = [
            sys.executable,
            "-m",
            "bench.profile_ingest",
            "--scenario",
            a.scenario,
            "--events",
            str(a.events),
            "--child",
            broker.bootstrap,
            topic,
        ]
        subprocess.run(
            [
                spy,
                "record",
                "--format",
                "raw",
                "--threads",
                "--nonblocking",
                "-r",
                str(a.rate),
                "-o",
                str(raw),
                "--",
                *cmd,
            ],
            check=True,
        )
    lines = [f"# py-spy profile: scenario {a.scenario}, {a.events} events", *summarise(raw)]
    summary = a.out / f"{a.scenario}.summary.txt"
    summary.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    print(f"\nwritten to {summary} (raw stacks: {raw})")


if __name__ == "__main__":
    main()
