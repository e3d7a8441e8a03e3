"""Memory of the monitor under a large backlog and a slow judge, with the embedded engine's fixed cost apart.

A local tansu broker holds N synthetic events (1,000,000 by default, each response made unique so that the verdict
cache cannot stand in for the judge) on 3 partitions. The monitor runs with the
default settings (sampling everything, 8 judge calls at once, max_in_flight 2000, batches of 1000 rows) and the
real statements judge against the fake Messages API answering every call after 2 s, in a process of its own; the
monitor too runs in a process of its own (chDB allows one engine per process, and the producer's buffers must not
count). It consumes for MINUTES (12 by default) while the judge (about 4 calls/s) holds it back, so consumption pauses
at the in-flight cap and resumes at half of it, the first time after about 5 minutes: the first resume (a burst through
the events the freshness governor no longer samples) and the engine's first large merge around then grow the process
once, so the second half of a shorter run would measure that step rather than the steady state.

Reported, from /proc (RSS every second; a breakdown from /proc/self/smaps at the start, after opening the store
and at the end): RSS after the imports; the embedded engine's fixed cost (RSS after opening chDB and creating the
schema, minus RSS before); the peak; the monitor's own peak (peak minus that fixed cost); the growth over the
second half (least-squares slope, MB/min); chDB's own tracked heap (system.metrics MemoryTracking) at the start
and the end. Targets (issue 13): the monitor's own peak < 200 MB, growth < 5 MB/min. `--tracemalloc` lists the
top Python allocations at the end and their growth over the second half (it costs memory itself: its run's RSS
figures are not comparable). Prints a table and writes JSON (`--json PATH`).

The monitor's process imports only what the service imports (the harness is imported by the parent), so "RSS after
the imports" is the service's own. `--server` runs it on the server path instead: the store is a ClickHouse HTTP
server (chDB in a third process, `bench.clickhouse_http`: there is no ClickHouse server binary here), so no engine
is loaded in the monitor's process and its whole RSS is its own. The monitor trims glibc's heap every 30 s as the
service does (`monitor.runtime.heap_trim`; `--trim-every 0` leaves it untrimmed, as before issue 46); `--arena-max N`
sets MALLOC_ARENA_MAX for the monitor's process, and `--chdb-thread-pool N` caps the embedded engine's global thread
pool at N (chDB's `max_thread_pool_size`). The monitor pins glibc's mmap and trim thresholds as the service does
(`monitor.runtime.heap_trim.pin_malloc_thresholds`; `--malloc-defaults` leaves them dynamic) and freezes start-up's
objects once the pipeline is built (`monitor.runtime.service.freeze_start_up`).
Run: `python -m bench.memory_backlog [--events 1000000] [--minutes 12] [--tiny] [--tracemalloc] [--server]
[--arena-max N] [--trim-every SECONDS] [--chdb-thread-pool N] [--malloc-defaults]`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import multiprocessing
import os
import re
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections import Counter
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

# Only what the service itself imports: the monitor's process imports this module (spawn), and "RSS after the
# imports" is the service's. The harness (broker, producer, fake API, the chDB server) is imported where the parent
# process uses it. The logging set-up comes first, as `relevancy-monitor run` imports it (`cmd_run`): it imports
# structlog without rich.
from monitor.runtime.logs import configure_logging

# isort: split
from monitor.config import load_settings
from monitor.judges.factory import build_judge
from monitor.runtime.heap_trim import TRIM_EVERY_S, glibc_malloc_trim, pin_malloc_thresholds, trim_heap_every
from monitor.runtime.metrics import Metrics
from monitor.runtime.service import build_pipeline, freeze_start_up
from monitor.store.async_store import AsyncStore
from monitor.store.connection import ClickHouseStore
from monitor.store.migrations import Migrations

DEFAULT_JSON = Path(".relevancy-monitor/bench/memory_backlog.json")
JUDGE_LATENCY_S = 2.0
OWN_LIMIT_MB = 200.0
GROWTH_LIMIT_MB_PER_MIN = 5.0
DETAIL_EVERY_S = 10.0
_PAGE = os.sysconf("SC_PAGE_SIZE")
_MAPPING = re.compile(r"^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$")


def rss_mb() -> float:
    """This process's resident set, MB (/proc/self/statm: psutil is not a dependency)."""
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * _PAGE / 2**20


def _rss_of(pid: int) -> float | None:
    """Another process's resident set, MB (None once it has gone)."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * _PAGE / 2**20
    except OSError:
        return None


def rss_breakdown_mb() -> dict[str, float]:
    """Resident MB by kind of mapping: the chDB library's pages, other files (Python, extension modules), anonymous."""
    out = {"chdb_library": 0.0, "other_files": 0.0, "anonymous": 0.0}
    name = ""
    with open("/proc/self/smaps", encoding="utf-8", errors="replace") as f:
        for line in f:
            m = _MAPPING.match(line)
            if m:
                name = m.group(1)
                continue
            if line.startswith("Rss:"):
                kb = int(line.split()[1])
                kind = (
                    "chdb_library"
                    if "chdb" in name and name.startswith("/")
                    else ("other_files" if name.startswith("/") else "anonymous")
                )
                out[kind] += kb / 1024
    return out


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _Mallinfo2
    except (OSError, AttributeError):  # not glibc (or older than 2.33): the allocator figures are left out
        return None
    return libc


_LIBC = _libc()


def malloc_mb() -> dict[str, float] | None:
    """glibc's heap over all arenas, MB: in use (Python's larger objects, chDB, the SDK) and free but kept by malloc."""
    if _LIBC is None:
        return None
    m = _LIBC.mallinfo2()
    return {"malloc_in_use": (m.uordblks + m.hblkhd) / 2**20, "malloc_free_kept": m.fordblks / 2**20}


def threads() -> int:
    """Threads of this process (chDB's pools, the store's thread, the embedded reader, asyncio's executor)."""
    return len(os.listdir("/proc/self/task"))


# Packages a configuration may or may not need: which of them a run loaded says what its RSS pays for.
WATCHED_PACKAGES = (
    "anthropic", "openai", "botocore", "google.auth", "chdb", "rich", "pygments", "sqlglot", "opentelemetry.proto",
    "google.protobuf",
)  # fmt: skip


def loaded_packages() -> list[str]:
    """Which of `WATCHED_PACKAGES` this process has imported."""
    return [name for name in WATCHED_PACKAGES if name in sys.modules]


def thread_names() -> dict[str, int]:
    """Threads of this process by name (chDB names its pools' threads), most numerous first."""
    names: Counter[str] = Counter()
    for task in os.listdir("/proc/self/task"):
        try:
            names[Path(f"/proc/self/task/{task}/comm").read_text(encoding="utf-8").strip()] += 1
        except OSError:  # the thread ended meanwhile
            continue
    return dict(names.most_common())


async def _engine_heap_mb(store: AsyncStore) -> float | None:
    """chDB's own tracked allocations (MemoryTracking), MB; None if the engine does not answer."""
    try:
        result = await store.query("SELECT value FROM system.metrics WHERE metric = 'MemoryTracking'")
    except Exception:  # a figure for the report, never a reason to stop the run
        return None
    return float(result.rows[0][0]) / 2**20 if result.rows else None


def unique_events(n: int, seed: int = 11) -> Iterator[bytes]:
    """`n` synthetic events whose responses are all different: the generator repeats its pairs, and repeated pairs are
    served by the verdict cache, which would hide the slow judge this benchmark is about."""
    from monitor.devtools.traffic import generate_events

    for i, value in enumerate(generate_events(n, seed=seed, malformed_share=0.0)):
        event = json.loads(value)
        if "response" in event:
            event["response"] += f" (ref {i})"
        else:
            event["messages"][-1]["content"][0]["text"] += f" (ref {i})"
        yield json.dumps(event).encode()


def _top_allocations(
    snapshot: tracemalloc.Snapshot, earlier: tracemalloc.Snapshot | None, limit: int = 12
) -> list[dict[str, Any]]:
    if earlier is None:
        stats = snapshot.statistics("lineno")[:limit]
        return [{"where": str(s.traceback[0]), "mb": s.size / 2**20, "blocks": s.count} for s in stats]
    diffs = snapshot.compare_to(earlier, "lineno")[:limit]
    return [
        {"where": str(d.traceback[0]), "mb": d.size / 2**20, "growth_mb": d.size_diff / 2**20, "blocks": d.count}
        for d in diffs
    ]


async def _monitor(
    bootstrap: str,
    topic: str,
    base_url: str,
    api_key: str,
    store_url: str | None,
    seconds: float,
    interval_s: float,
    trace: bool,
    trim_every_s: float,
    chdb_thread_pool: int | None,
    malloc_defaults: bool,
) -> dict[str, Any]:
    # As `run_service` does first (the figures below then follow the service's allocator settings).
    thresholds_pinned = False if malloc_defaults else pin_malloc_thresholds()
    out: dict[str, Any] = {
        "malloc_thresholds_pinned": thresholds_pinned,
        "rss_after_imports_mb": rss_mb(),
        "breakdown_after_imports_mb": rss_breakdown_mb(),
        "modules_after_imports": len(sys.modules),
        "loaded_after_imports": loaded_packages(),
    }
    with tempfile.TemporaryDirectory() as tmp:
        embedded = store_url is None
        url = store_url or f"chdb://{tmp}"
        # Migrated here as the embedded store migrates itself; a server's operator runs `migrate` once instead.
        connection = ClickHouseStore(url, "bench", "relevancy_scores")
        if chdb_thread_pool is not None and embedded:
            # An experiment, not a setting of the product: the engine's global thread pool capped through chDB's
            # connection string (server settings), handed to the driver as the store would hand it.
            pool = {"max_thread_pool_size": chdb_thread_pool, "max_thread_pool_free_size": chdb_thread_pool}
            connection._client_options = {**connection._client_options, "chdb_options": pool}
        store = AsyncStore(connection, Migrations(connection, auto_migrate=True))
        before = rss_mb()
        await store.open()
        out["rss_store_open_mb"] = rss_mb()
        out["store_open_mb"] = out["rss_store_open_mb"] - before
        # Embedded, opening the store loads the engine: its fixed cost. On a server there is no engine here, and the
        # client's connection is the monitor's own.
        out["engine_fixed_mb"] = out["store_open_mb"] if embedded else 0.0
        out["breakdown_store_open_mb"] = rss_breakdown_mb()
        out["engine_heap_start_mb"] = await _engine_heap_mb(store) if embedded else None
        settings = load_settings(
            kafka_bootstrap_servers=bootstrap,
            kafka_topics=[topic],
            kafka_group_id=f"mem-{uuid.uuid4().hex[:6]}",
            dlq_topic=f"{topic}.dlq",
            clickhouse_url=url,
            judge="statements",
            anthropic_base_url=base_url,
            anthropic_api_key=api_key,
            metrics_port=0,
        )
        flow = settings.flow
        out["settings"] = {
            "judge": "statements",
            "judge_latency_s": JUDGE_LATENCY_S,
            "judge_concurrency": flow.judge_concurrency,
            "max_in_flight": flow.max_in_flight,
            "resume_in_flight": flow.resume_at,
            "batch_max_rows": flow.batch_max_rows,
            "batch_max_seconds": flow.batch_max_seconds,
            "sample_rate": settings.sampling.rate,
            "max_poll_records": settings.kafka.max_poll_records,
        }
        out["store"] = "embedded chDB" if embedded else "ClickHouse HTTP server (chDB in another process)"
        metrics = Metrics()
        pipeline = build_pipeline(settings, build_judge(settings.judge), store, metrics)
        out["rss_pipeline_built_mb"] = rss_mb()  # the judge's SDK is imported when the judge is built
        out["loaded_pipeline_built"] = loaded_packages()
        freeze_start_up()  # as `run_service` does once the pipeline is built
        stop = asyncio.Event()
        trim_ms: list[float] = []
        glibc_trim = glibc_malloc_trim()

        def timed_trim() -> None:
            """The service's trim, timed: it runs on the event loop."""
            assert glibc_trim is not None
            trim_started = time.perf_counter()
            glibc_trim()
            trim_ms.append((time.perf_counter() - trim_started) * 1000)

        # As `run_service` does (this process builds the pipeline itself): `trim_every_s` 0 leaves the heap untrimmed.
        trimmer = (
            asyncio.create_task(trim_heap_every(trim_every_s, timed_trim), name="heap-trim")
            if trim_every_s and glibc_trim is not None
            else None
        )
        if trace:
            tracemalloc.start()
        task = asyncio.create_task(pipeline.run(stop))
        samples: list[dict[str, float]] = []
        detail: list[dict[str, float | None]] = []  # every DETAIL_EVERY_S: RSS by mapping and the engine's own heap
        half: tracemalloc.Snapshot | None = None
        started = time.monotonic()
        try:
            while (elapsed := time.monotonic() - started) < seconds:
                await asyncio.sleep(interval_s)
                if task.done():
                    break
                samples.append(
                    {
                        "t_s": elapsed,
                        "rss_mb": rss_mb(),
                        "in_flight": pipeline.tracker.in_flight(),
                        "consumed": metrics.total("relevancy_monitor_events_consumed"),
                        "judged": metrics.total("relevancy_monitor_events_judged"),
                    }
                )
                if not detail or elapsed - float(detail[-1]["t_s"] or 0) >= min(DETAIL_EVERY_S, seconds / 10):
                    detail.append(
                        {
                            "t_s": elapsed,
                            "rss_mb": rss_mb(),
                            **rss_breakdown_mb(),
                            **(malloc_mb() or {}),
                            "threads": threads(),
                            "engine_heap_mb": await _engine_heap_mb(store) if embedded else None,
                        }
                    )
                if trace and half is None and elapsed >= seconds / 2:
                    half = tracemalloc.take_snapshot()
            out["breakdown_end_mb"] = rss_breakdown_mb()
            out["engine_heap_end_mb"] = await _engine_heap_mb(store) if embedded else None
            out["loaded_end"] = loaded_packages()
            out["malloc_trim_ms"] = {"calls": len(trim_ms), "max": max(trim_ms, default=0.0), "total": sum(trim_ms)}
            out["malloc_end_mb"] = malloc_mb()
            out["threads_end"] = threads()
            out["thread_names_end"] = thread_names()
            if _LIBC is not None:  # what the allocator kept of what was freed: returned to the system by malloc_trim
                before_trim = rss_mb()
                _LIBC.malloc_trim(0)
                out["malloc_trim_returned_mb"] = before_trim - rss_mb()
            if trace:
                end = tracemalloc.take_snapshot()
                out["tracemalloc_top"] = _top_allocations(end, None)
                out["tracemalloc_growth_second_half"] = _top_allocations(end, half) if half is not None else []
                out["tracemalloc_traced_mb"] = tracemalloc.get_traced_memory()[0] / 2**20
                tracemalloc.stop()
        finally:
            if trimmer is not None:
                trimmer.cancel()
            stop.set()
            await task
            await store.close()
    out["samples"] = samples
    out["detail"] = detail
    return out


def _child(conn: Connection, *args: Any) -> None:
    """The monitor's process: run, then hand the figures back over `conn`."""
    configure_logging("json", "warning")  # as the service configures it, quieter: the table is the output here
    conn.send(asyncio.run(_monitor(*args)))


def slope_mb_per_min(samples: list[dict[str, float]], key: str = "rss_mb") -> float:
    """Least-squares slope of `key` (RSS) over time, MB per minute (0 for fewer than two samples)."""
    if len(samples) < 2:
        return 0.0
    ts, ys = [s["t_s"] for s in samples], [s[key] for s in samples]
    mt, my = sum(ts) / len(ts), sum(ys) / len(ys)
    var = sum((t - mt) ** 2 for t in ts)
    return 0.0 if var == 0 else sum((t - mt) * (y - my) for t, y in zip(ts, ys, strict=True)) / var * 60


async def measure(
    events: int,
    minutes: float,
    interval_s: float = 1.0,
    trace: bool = False,
    server: bool = False,
    arena_max: int | None = None,
    trim_every_s: float = TRIM_EVERY_S,
    chdb_thread_pool: int | None = None,
    malloc_defaults: bool = False,
) -> dict[str, Any]:
    """Fill the backlog, run the monitor in its own process against it, and summarise the samples. With `server`, the
    monitor's store is a ClickHouse HTTP server (chDB in a third process: `bench.clickhouse_http`) rather than the
    embedded engine; `arena_max` sets MALLOC_ARENA_MAX for the monitor's process; `trim_every_s` is how often it
    calls `malloc_trim(0)` (the service's interval by default; 0: never); `chdb_thread_pool` caps the embedded
    engine's global thread pool; `malloc_defaults` leaves glibc's thresholds dynamic (the service pins them)."""
    from bench.clickhouse_http import chdb_server
    from bench.judge_overhead import FakeInAProcess
    from monitor.devtools.localbroker import LocalBroker
    from monitor.devtools.traffic import produce
    from tests.fake_messages_api import API_KEY
    from tests.harness import create_topic

    with (
        LocalBroker() as broker,
        FakeInAProcess(JUDGE_LATENCY_S) as base_url,
        tempfile.TemporaryDirectory() as server_dir,
        chdb_server(Path(server_dir)) if server else contextlib.nullcontext(None) as served,
    ):
        topic = f"mem-{uuid.uuid4().hex[:6]}"
        await create_topic(broker.bootstrap, topic, 3)
        await create_topic(broker.bootstrap, f"{topic}.dlq", 1)
        started = time.monotonic()
        await produce(broker.bootstrap, topic, unique_events(events))
        produce_s = time.monotonic() - started
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe(duplex=False)
        store_url = served[0] if served is not None else None
        proc = ctx.Process(
            target=_child,
            args=(
                *(child, broker.bootstrap, topic, base_url, API_KEY, store_url),
                *(minutes * 60, interval_s, trace, trim_every_s, chdb_thread_pool, malloc_defaults),
            ),
            name="monitor",
        )
        # glibc reads MALLOC_ARENA_MAX when the process starts: the spawned child inherits it from this environment.
        previous = os.environ.get("MALLOC_ARENA_MAX")
        if arena_max is not None:
            os.environ["MALLOC_ARENA_MAX"] = str(arena_max)
        try:
            proc.start()
        finally:
            if arena_max is not None:
                os.environ.pop("MALLOC_ARENA_MAX") if previous is None else os.environ.update(MALLOC_ARENA_MAX=previous)
        child.close()
        # The pipe is read in a thread: the broker and the fake must keep serving while the monitor runs.
        r: dict[str, Any] = await asyncio.to_thread(parent.recv)
        proc.join(timeout=30)
        r["server_rss_end_mb"] = _rss_of(served[1]) if served is not None else None
    r["malloc_arena_max"] = arena_max
    r["malloc_trim_every_s"] = trim_every_s
    r["chdb_thread_pool"] = chdb_thread_pool
    r["malloc_defaults"] = malloc_defaults
    samples = r["samples"]
    peak = max(s["rss_mb"] for s in samples)
    second_half = [s for s in samples if s["t_s"] >= samples[-1]["t_s"] / 2]
    own = peak - r["engine_fixed_mb"]
    growth = slope_mb_per_min(second_half)
    # The engine grows too after its fixed cost: its library's pages faulted in by the first inserts and merges, and
    # its own heap. Taken off as well, what is left is the Python side's (and the allocator's) share.
    start = r["breakdown_store_open_mb"]["chdb_library"], r["engine_heap_start_mb"] or 0.0
    for d in r["detail"]:
        d["engine_growth_mb"] = d["chdb_library"] - start[0] + (d["engine_heap_mb"] or 0.0) - start[1]
        d["rss_less_engine_growth_mb"] = d["rss_mb"] - d["engine_growth_mb"]
    at_peak = max(r["detail"], key=lambda d: d["rss_less_engine_growth_mb"])
    detail_half = [d for d in r["detail"] if d["t_s"] >= samples[-1]["t_s"] / 2]
    return {
        **{k: v for k, v in r.items() if k != "samples"},
        "events": events,
        "minutes": minutes,
        "produce_s": produce_s,
        "peak_rss_mb": peak,
        "own_peak_mb": own,
        "own_limit_mb": OWN_LIMIT_MB,
        "own_ratio_to_limit": own / OWN_LIMIT_MB,
        "growth_second_half_mb_per_min": growth,
        "growth_limit_mb_per_min": GROWTH_LIMIT_MB_PER_MIN,
        "growth_ratio_to_limit": growth / GROWTH_LIMIT_MB_PER_MIN,
        "second_half_rss_mb": {"first": second_half[0]["rss_mb"], "last": second_half[-1]["rss_mb"]},
        "own_peak_less_engine_growth_mb": at_peak["rss_less_engine_growth_mb"] - r["engine_fixed_mb"],
        "engine_growth_at_that_point_mb": at_peak["engine_growth_mb"],
        "growth_second_half_less_engine_mb_per_min": slope_mb_per_min(detail_half, "rss_less_engine_growth_mb"),
        "engine_growth_second_half_mb_per_min": slope_mb_per_min(detail_half, "engine_growth_mb"),
        "peak_in_flight": max(s["in_flight"] for s in samples),
        "consumed": samples[-1]["consumed"],
        "judged": samples[-1]["judged"],
        "traced": trace,
        "samples": samples,
    }


def report_lines(r: dict[str, Any]) -> list[str]:
    """The figures as a table for people."""
    s, b0, b1 = r["settings"], r["breakdown_store_open_mb"], r["breakdown_end_mb"]

    def heap(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.1f}"

    lines = [
        f"backlog {r['events']:,} events (produced in {r['produce_s']:.0f} s); monitor for {r['minutes']:g} min: "
        f"{s['judge']} judge at"
        f" {s['judge_latency_s']:g} s per call, {s['judge_concurrency']} at once, max_in_flight {s['max_in_flight']} "
        "(resume at"
        f" {s['resume_in_flight']}), batches {s['batch_max_rows']} rows / {s['batch_max_seconds']:g} s, sample rate "
        f"{s['sample_rate']:g}",
        f"consumed {r['consumed']:,.0f}, judged {r['judged']:,.0f}, peak in flight {r['peak_in_flight']:,.0f}",
        "",
        f"store: {r['store']}; MALLOC_ARENA_MAX {r['malloc_arena_max'] or 'unset'}; malloc_trim(0) "
        + (f"every {r['malloc_trim_every_s']:g} s" if r["malloc_trim_every_s"] else "never")
        + (f"; chDB thread pool {r['chdb_thread_pool']}" if r["chdb_thread_pool"] else "")
        + ("; glibc thresholds pinned" if r["malloc_thresholds_pinned"] else "; glibc thresholds dynamic"),
        "",
        f"{'RSS after imports':<46}{r['rss_after_imports_mb']:>9.1f} MB   ({r['modules_after_imports']:,} modules; "
        f"of those watched: {', '.join(r['loaded_after_imports']) or 'none'})",
        f"{'RSS after opening the store + schema':<46}{r['rss_store_open_mb']:>9.1f} MB",
        f"{'  embedded engine fixed cost (the difference)':<46}{r['engine_fixed_mb']:>9.1f} MB"
        + ("" if r["engine_fixed_mb"] else f"   (no engine here: opening the client took {r['store_open_mb']:.1f} MB)"),
        f"{'RSS after building the pipeline and judge':<46}{r['rss_pipeline_built_mb']:>9.1f} MB   (loaded: "
        f"{', '.join(r['loaded_pipeline_built']) or 'none'})",
        f"{'peak RSS':<46}{r['peak_rss_mb']:>9.1f} MB",
        f"{'monitor own peak (peak - engine fixed cost)':<46}{r['own_peak_mb']:>9.1f} MB   "
        f"{r['own_ratio_to_limit']:.2f} of the"
        f" {r['own_limit_mb']:g} MB limit",
        f"{'growth over the second half':<46}{r['growth_second_half_mb_per_min']:>9.2f} MB/min "
        f"{r['growth_ratio_to_limit']:.2f} of the"
        f" {r['growth_limit_mb_per_min']:g} MB/min limit ({r['second_half_rss_mb']['first']:.1f} → "
        f"{r['second_half_rss_mb']['last']:.1f} MB)",
        "",
        f"{'RSS by mapping (MB)':<28}{'chDB library':>14}{'other files':>13}{'anonymous':>11}",
        f"{'  after opening the store':<28}{b0['chdb_library']:>14.1f}{b0['other_files']:>13.1f}"
        f"{b0['anonymous']:>11.1f}",
        f"{'  at the end':<28}{b1['chdb_library']:>14.1f}{b1['other_files']:>13.1f}{b1['anonymous']:>11.1f}",
        f"chDB tracked heap (MemoryTracking): {heap(r['engine_heap_start_mb'])} MB after opening, "
        f"{heap(r['engine_heap_end_mb'])} MB at the end",
        f"{'monitor own peak less the engine growth':<46}{r['own_peak_less_engine_growth_mb']:>9.1f} MB   (engine grew"
        f" {r['engine_growth_at_that_point_mb']:.1f} MB by then: library pages + its heap)",
        f"{'growth over the second half, engine apart':<46}{r['growth_second_half_less_engine_mb_per_min']:>9.2f} "
        "MB/min (the engine's:"
        f" {r['engine_growth_second_half_mb_per_min']:.2f} MB/min)",
    ]
    m = r.get("malloc_end_mb")
    if m is not None:
        lines.append(
            f"glibc malloc at the end: {m['malloc_in_use']:.1f} MB in use, {m['malloc_free_kept']:.1f} MB free but "
            "kept;"
            f" malloc_trim(0) returned {r['malloc_trim_returned_mb']:.1f} MB of RSS"
        )
    if r["malloc_trim_ms"]["calls"]:
        t = r["malloc_trim_ms"]
        lines.append(
            f"periodic malloc_trim(0): {t['calls']} calls, {t['total']:.0f} ms in all, {t['max']:.1f} ms at most"
        )
    if r.get("server_rss_end_mb") is not None:
        lines.append(f"the chDB server's process at the end (not the monitor's): {r['server_rss_end_mb']:.1f} MB RSS")
    names = ", ".join(f"{k} {v}" for k, v in list(r["thread_names_end"].items())[:6])
    lines.append(f"threads at the end: {r['threads_end']} ({names})")
    if r["traced"]:
        lines += [
            "",
            f"tracemalloc (its own cost inflates RSS in this run): {r['tracemalloc_traced_mb']:.1f} MB traced at the "
            "end; top:",
        ]
        lines += [f"  {a['mb']:8.2f} MB {a['blocks']:>8} blocks  {a['where']}" for a in r["tracemalloc_top"]]
        lines += ["growth over the second half:"]
        lines += [f"  {a['growth_mb']:+8.2f} MB  {a['where']}" for a in r["tracemalloc_growth_second_half"]]
    return lines


def main(
    events: int = 1_000_000,
    minutes: float = 12.0,
    json_path: Path | None = DEFAULT_JSON,
    trace: bool = False,
    interval_s: float = 1.0,
    server: bool = False,
    arena_max: int | None = None,
    trim_every_s: float = TRIM_EVERY_S,
    chdb_thread_pool: int | None = None,
    malloc_defaults: bool = False,
) -> dict[str, Any]:
    """Run the benchmark; print the table and write the JSON."""
    from bench.output import emit

    result = asyncio.run(
        measure(events, minutes, interval_s, trace, server, arena_max, trim_every_s, chdb_thread_pool, malloc_defaults)
    )
    emit(report_lines(result), result, json_path)
    return result


if __name__ == "__main__":
    p = argparse.ArgumentParser(
        description="Monitor memory under a backlog and a 2 s judge, the embedded engine's fixed cost apart."
    )
    p.add_argument("--events", type=int, default=1_000_000, help="backlog size (default 1,000,000)")
    p.add_argument("--minutes", type=float, default=12.0, help="how long the monitor consumes (default 12)")
    p.add_argument("--tiny", action="store_true", help="5,000 events for 20 s (CI)")
    p.add_argument("--tracemalloc", action="store_true", help="also list the top Python allocations (inflates RSS)")
    p.add_argument(
        "--server",
        action="store_true",
        help="the store on a ClickHouse HTTP server (chDB in another process): no engine in the monitor's process",
    )
    p.add_argument(
        "--arena-max", type=int, help="MALLOC_ARENA_MAX for the monitor's process (glibc's default: 8 x cores)"
    )
    p.add_argument(
        "--trim-every",
        type=float,
        default=TRIM_EVERY_S,
        metavar="SECONDS",
        help=f"how often the monitor calls malloc_trim(0) (default {TRIM_EVERY_S:g}, the service's; 0: never)",
    )
    p.add_argument(
        "--chdb-thread-pool", type=int, metavar="N", help="cap the embedded engine's global thread pool at N threads"
    )
    p.add_argument(
        "--malloc-defaults",
        action="store_true",
        help="leave glibc's mmap and trim thresholds dynamic (the service pins them: monitor.runtime.heap_trim)",
    )
    p.add_argument(
        "--json", type=Path, default=DEFAULT_JSON, help=f"where to write the figures (default {DEFAULT_JSON})"
    )
    a = p.parse_args()
    options = {
        "server": a.server,
        "arena_max": a.arena_max,
        "trim_every_s": a.trim_every,
        "chdb_thread_pool": a.chdb_thread_pool,
        "malloc_defaults": a.malloc_defaults,
    }
    if a.tiny:
        main(5_000, 20 / 60, a.json, a.tracemalloc, interval_s=0.5, **options)
    else:
        main(a.events, a.minutes, a.json, a.tracemalloc, **options)
