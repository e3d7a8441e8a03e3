"""Scale-out on one machine: the aggregate rate of 1, 2 and 4 replicas at 0 % sampling, beside the core count.

One topic of 12 partitions on a local tansu broker holds the backlog, filled before any replica starts. Each run
starts N `relevancy-monitor run` processes in one fresh consumer group (reading from the earliest offset), each with
its own embedded store (chDB: one process per directory, migrated before the start) and its own /metrics port, with
MONITOR_SAMPLE_RATE=0: they decode, sample, count and commit; nothing is judged. Every 0.25 s this process scrapes
each replica's consumed counter and its `group_share` gauge, and reads each process's CPU time from /proc.

The rate is steady-state: the sum of the replicas' consumed counters over a window in which every replica of the run
holds partitions after the last rebalance (all N shares > 0 and adding up to 1, since the previous scrape already)
and still has a backlog: from the first such scrape at or past 10 % of the backlog consumed (the start of the
1-replica run is outside too) until the first at or past 90 %, or earlier, at the last scrape after which every
replica still consumed something (each run goes on to the end of the backlog to see that). The replicas that joined
first may have drained some partitions before the last rebalance; a replica left with drained ones would idle
inside the window, so such a window ends there and is marked "cut". The group join and its rebalances are outside
the window; a share that changes inside it is reported. The limit measured in the same run is the 1-replica rate:
speed-up = rate(N) / rate(1), efficiency = speed-up / min(N, cores), with cores the CPUs this process may run on
(os.sched_getaffinity; the broker, tansu, and this scraper share them). CPU per event is each replica's CPU time
(all its threads, chDB's and aiokafka's included) over the events it consumed in the window; `replica cores` is the
replicas' CPU time over the window's length, `broker cores` the same for tansu. Rounds interleave the replica
counts, the order rotated each round; medians. Prints a table and writes JSON (`--json PATH`).
Run: `python -m bench.scale_out [EVENTS] [--rounds R] [--replicas 1 2 4] [--tiny] [--json PATH]`."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from bench.output import emit
from monitor.devtools.localbroker import LocalBroker, free_port
from monitor.devtools.traffic import generate_events, produce
from tests.harness import create_topic, monitor_env

CLI = Path(sys.executable).parent / "relevancy-monitor"
DEFAULT_EVENTS = 1_500_000
# Enough that a second replica's join (a process start and tansu's ~5 s join) settles before one replica alone has
# consumed 90 % of it, even with the suite's other long tests on the same 2 cores: 60,000 left no window once in three
# fresh-clone runs.
TINY_EVENTS = 150_000
ROUNDS = 2
REPLICAS = (1, 2, 4)
PARTITIONS = 12
DEFAULT_JSON = Path(".relevancy-monitor/bench/scale_out.json")
WINDOW = (0.10, 0.90)  # the window's bounds, as shares of the backlog consumed (the start also waits for the group)
SCRAPE_S = 0.25
CONSUMED = "relevancy_monitor_events_consumed"
SHARE = "relevancy_monitor_group_share"
_TICK = os.sysconf("SC_CLK_TCK")
_START_LIMIT_S = 120.0  # a replica that exposes no /metrics within this is a failed run
_RUN_LIMIT_S = 600.0  # nor may a run take longer than this to consume its backlog
_IDLE_S = 5.0  # a group that consumed nothing for this long, past 90 % of the backlog, has finished it


def cores() -> int:
    """CPUs this process may run on (its affinity mask), which its children inherit."""
    return len(os.sched_getaffinity(0))


def cpu_s(pid: int) -> float | None:
    """A process's CPU time so far (user + system, all its threads), from /proc/<pid>/stat; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime: fields 14 and 15 of stat(5)


def broker_pid(port: int) -> int | None:
    """The tansu process listening on `port`, when it is a child of this process (a `LocalBroker`); else None."""
    for task in Path("/proc/self/task").iterdir():
        try:
            children = (task / "children").read_text(encoding="ascii").split()
        except OSError:
            continue
        for child in children:
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"tcp://127.0.0.1:{port}".encode() in cmdline:
                return int(child)
    return None


def parse_metrics(text: str) -> tuple[float, float]:
    """(records consumed, group share) from a replica's /metrics text."""
    consumed, share = 0.0, 0.0
    for family in text_string_to_metric_families(text):
        if family.name == CONSUMED:
            consumed += sum(s.value for s in family.samples if s.name.endswith("_total"))
        elif family.name == SHARE:
            share = sum(s.value for s in family.samples)
    return consumed, share


def scrape(port: int) -> tuple[float, float] | None:
    """A replica's (consumed, share) now; None while its /metrics does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            return parse_metrics(r.read().decode())
    except OSError:
        return None


@dataclass(frozen=True, slots=True)
class Sample:
    """One scrape of every replica: consumed counters, shares, CPU times; the broker's CPU time."""

    wall: float
    consumed: tuple[float, ...]
    shares: tuple[float, ...]
    cpu: tuple[float, ...]
    broker_cpu: float | None

    @property
    def total(self) -> float:
        """Records consumed by the whole group."""
        return sum(self.consumed)

    @property
    def settled(self) -> bool:
        """Every replica holds partitions of the group's last assignment: all shares > 0, adding up to 1 (a gauge
        left from an earlier, smaller assignment makes the sum larger)."""
        return all(s > 0 for s in self.shares) and abs(sum(self.shares) - 1.0) < 1e-6


@dataclass(frozen=True, slots=True)
class Steady:
    """One run's figures inside its window (zeros and `window_s` 0 when the run had none)."""

    replicas: int
    events_per_s: float
    per_replica_events_per_s: list[float]
    cpu_us_per_event: list[float]  # per replica: its CPU time over the events it consumed
    replica_cores: float  # the replicas' CPU time over the window's length
    broker_cores: float | None
    window_events: float
    window_s: float
    settle_s: float | None  # from the start of the processes to the first settled scrape
    consumed_at_start: float  # share of the backlog consumed when the window opened
    consumed_at_end: float  # and when it closed (under 90 % when it was cut)
    shares: list[float]
    rebalanced_in_window: bool
    cut: bool  # ended before 90 % because a replica consumed nothing after it (its backlog ran out)


def steady(samples: Sequence[Sample], n: int, started: float) -> Steady:
    """The window of a run's samples (to the end of its backlog): from the first scrape at or past 10 % of `n`
    consumed whose group had settled by the scrape before (none when it settled only past 90 %), to the first at or
    past 90 %, cut short at the last scrape after which every replica still consumed (each had a backlog left)."""
    replicas = len(samples[-1].consumed)
    settle = next((s.wall - started for s in samples if s.settled), None)
    first = next(
        (
            i
            for i in range(1, len(samples))
            if samples[i - 1].settled and samples[i].settled and WINDOW[0] <= samples[i].total / n < WINDOW[1]
        ),
        None,
    )
    # The last scrape from which every replica still consumed something before the run's end (it had a backlog
    # left there; a pause of a replica, or of all of them, is no end of its backlog).
    busy = min(
        max((j for j, s in enumerate(samples) if s.consumed[r] < samples[-1].consumed[r]), default=-1)
        for r in range(replicas)
    )
    last = next((j for j, s in enumerate(samples) if s.total >= WINDOW[1] * n), len(samples) - 1)
    cut = busy < last
    last = min(last, busy)
    if first is None or last <= first:
        none = [0.0] * replicas
        return Steady(replicas, 0.0, none, none, 0.0, None, 0.0, 0.0, settle, 0.0, 0.0, [], False, cut)
    low, high = samples[first], samples[last]
    seconds = high.wall - low.wall
    events = [h - lo for h, lo in zip(high.consumed, low.consumed, strict=True)]
    cpu = [h - lo for h, lo in zip(high.cpu, low.cpu, strict=True)]
    broker = (
        (high.broker_cpu - low.broker_cpu) / seconds
        if high.broker_cpu is not None and low.broker_cpu is not None
        else None
    )
    return Steady(
        replicas=replicas,
        events_per_s=sum(events) / seconds,
        per_replica_events_per_s=[e / seconds for e in events],
        cpu_us_per_event=[c / e * 1e6 if e else 0.0 for c, e in zip(cpu, events, strict=True)],
        replica_cores=sum(cpu) / seconds,
        broker_cores=broker,
        window_events=sum(events),
        window_s=seconds,
        settle_s=settle,
        consumed_at_start=low.total / n,
        consumed_at_end=high.total / n,
        shares=list(low.shares),
        rebalanced_in_window=any(s.shares != low.shares for s in samples[first : last + 1]),
        cut=cut,
    )


def replica_env(bootstrap: str, topic: str, group: str, url: str, port: int) -> dict[str, str]:
    """One replica's environment: the run's group, its own store and /metrics port, nothing sampled (bytecode
    caching as this process has it: `make test` turns it on so that the replicas do not each compile the package)."""
    return monitor_env(
        MONITOR_KAFKA_BOOTSTRAP_SERVERS=bootstrap,
        MONITOR_KAFKA_TOPICS=topic,
        MONITOR_KAFKA_GROUP_ID=group,
        MONITOR_KAFKA_AUTO_OFFSET_RESET="earliest",
        MONITOR_DLQ_TOPIC=f"{topic}.dlq",
        MONITOR_CLICKHOUSE_URL=url,
        MONITOR_METRICS_PORT=str(port),
        MONITOR_SAMPLE_RATE="0",
        MONITOR_JUDGE="lexical",
        MONITOR_LOG_FORMAT="json",
        MONITOR_LOG_LEVEL="warning",
    )


def migrate(urls: Sequence[str], logs: Path) -> None:
    """Create each replica's store, all at once (before the run: outside its window, and its start)."""
    procs = []
    for i, url in enumerate(urls):
        with open(logs / f"migrate-{i}.log", "wb") as log:
            env = monitor_env(MONITOR_CLICKHOUSE_URL=url)
            procs.append(subprocess.Popen([str(CLI), "migrate"], env=env, stdout=log, stderr=subprocess.STDOUT))
    for i, p in enumerate(procs):
        if p.wait(timeout=_START_LIMIT_S) != 0:
            raise RuntimeError(f"migrate of replica {i} failed: {(logs / f'migrate-{i}.log').read_text()[-2000:]}")


def stop_all(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    """SIGTERM every replica (a clean stop), then wait; one that outstays the grace is killed."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def run_replicas(bootstrap: str, topic: str, n: int, replicas: int, work: Path, broker: int | None) -> Steady:
    """Start `replicas` processes in a fresh group over the backlog of `n`, scrape them until the group has consumed all
    of it, stop them; the run's steady-state figures."""
    group = f"scale-{uuid.uuid4().hex[:6]}"
    run_dir = work / group
    run_dir.mkdir()
    urls = [f"chdb://{run_dir}/replica-{i}" for i in range(replicas)]
    migrate(urls, run_dir)
    ports = [free_port() for _ in range(replicas)]
    procs: list[subprocess.Popen[bytes]] = []
    started = time.perf_counter()
    try:
        for i, (url, port) in enumerate(zip(urls, ports, strict=True)):
            with open(run_dir / f"replica-{i}.log", "wb") as log:
                procs.append(
                    subprocess.Popen(
                        [str(CLI), "run"],
                        env=replica_env(bootstrap, topic, group, url, port),
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
        samples: list[Sample] = []
        grew = started
        while True:
            for i, p in enumerate(procs):
                if p.poll() is not None:
                    log_text = (run_dir / f"replica-{i}.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"replica {i} of {replicas} exited with {p.returncode}: {log_text}")
            scraped = [scrape(port) for port in ports]
            now = time.perf_counter()
            if all(s is not None for s in scraped):
                cpu = [cpu_s(p.pid) for p in procs]
                samples.append(
                    Sample(
                        now,
                        tuple(s[0] for s in scraped if s is not None),
                        tuple(s[1] for s in scraped if s is not None),
                        tuple(c or 0.0 for c in cpu),
                        cpu_s(broker) if broker is not None else None,
                    )
                )
                # To the end of the backlog: which replica still consumed after a scrape shows that it had a backlog
                # left there. A group idle past 90 % has finished too (should a record be counted twice or not at all).
                if len(samples) == 1 or samples[-1].total > samples[-2].total:
                    grew = now
                if samples[-1].total >= n or (samples[-1].total >= WINDOW[1] * n and now - grew > _IDLE_S):
                    break
            elif now - started > _START_LIMIT_S:
                raise RuntimeError(f"a replica's /metrics did not answer within {_START_LIMIT_S:.0f} s")
            if now - started > _RUN_LIMIT_S:
                raise RuntimeError(f"{replicas} replicas did not consume the backlog within {_RUN_LIMIT_S:.0f} s")
            time.sleep(max(0.0, SCRAPE_S - (time.perf_counter() - now)))
    finally:
        stop_all(procs)
    return steady(samples, n, started)


async def fill(bootstrap: str, topic: str, n: int) -> float:
    """The backlog: `n` synthetic events on PARTITIONS partitions (and the dead-letter topic); seconds it took."""
    begun = time.perf_counter()
    await create_topic(bootstrap, topic, PARTITIONS)
    await create_topic(bootstrap, f"{topic}.dlq", 1)
    await produce(bootstrap, topic, generate_events(n, seed=5, malformed_share=0.0), partitions=PARTITIONS)
    return time.perf_counter() - begun


def measure(bootstrap: str, n: int, rounds: int, counts: Sequence[int], broker: int | None) -> dict[str, Any]:
    """Fill the backlog once, then run every replica count `rounds` times, interleaved; the figures."""
    topic = f"scale-{uuid.uuid4().hex[:6]}"
    produce_s = asyncio.run(fill(bootstrap, topic, n))
    runs: dict[int, list[Steady]] = {c: [] for c in counts}
    with tempfile.TemporaryDirectory(prefix="scale-out-") as tmp:
        for r in range(rounds):
            for count in [*counts[r % len(counts) :], *counts[: r % len(counts)]]:
                runs[count].append(run_replicas(bootstrap, topic, n, count, Path(tmp), broker))
    k = cores()
    out: dict[str, Any] = {
        "events": n,
        "partitions": PARTITIONS,
        "rounds": rounds,
        "window": list(WINDOW),
        "produce_s": produce_s,
        "cpu_count": os.cpu_count(),
        "cores": k,
        "broker_measured": broker is not None,
        "scrape_s": SCRAPE_S,
    }
    base = runs[counts[0]] if counts[0] == 1 else None
    by_count: dict[str, Any] = {}
    for count in counts:
        figures = runs[count]
        speedups = (
            [f.events_per_s / b.events_per_s if b.events_per_s else 0.0 for f, b in zip(figures, base, strict=True)]
            if base is not None
            else []
        )
        speedup = statistics.median(speedups) if speedups else None
        brokers = [f.broker_cores for f in figures if f.broker_cores is not None]
        by_count[str(count)] = {
            "replicas": count,
            "events_per_s": statistics.median(f.events_per_s for f in figures),
            "per_replica_events_per_s": statistics.median(statistics.mean(f.per_replica_events_per_s) for f in figures),
            "speedup": speedup,
            "speedups_per_round": speedups,
            "efficiency": speedup / min(count, k) if speedup is not None else None,
            "cpu_us_per_event": statistics.median(statistics.mean(f.cpu_us_per_event) for f in figures),
            "replica_cores": statistics.median(f.replica_cores for f in figures),
            "broker_cores": statistics.median(brokers) if brokers else None,
            "settle_s": statistics.median(f.settle_s for f in figures if f.settle_s is not None)
            if any(f.settle_s is not None for f in figures)
            else None,
            "window_s": statistics.median(f.window_s for f in figures),
            "window_opened_at": statistics.median(f.consumed_at_start for f in figures),
            "window_closed_at": statistics.median(f.consumed_at_end for f in figures),
            "rebalanced_runs": sum(1 for f in figures if f.rebalanced_in_window),
            "cut_runs": sum(1 for f in figures if f.cut),
            "runs": [asdict(f) for f in figures],
        }
    out["replicas"] = by_count
    return out


def report_lines(result: dict[str, Any]) -> list[str]:
    """The table: per replica count the aggregate rate, per replica, speed-up and efficiency, CPU per event."""
    lines = [
        f"events: {result['events']:,} on {result['partitions']} partitions (produced in {result['produce_s']:.0f} s),"
        f" rounds: {result['rounds']} (interleaved), 0 % sampled; steady state: every replica holding partitions and a"
        " backlog,"
        f" {result['window'][0]:.0%} to {result['window'][1]:.0%} of the backlog consumed; medians",
        f"cores: {result['cores']} usable (os.sched_getaffinity), os.cpu_count() {result['cpu_count']}; the broker"
        " and this scraper run on them too",
        f"{'replicas':>8} {'events/s':>10} {'per replica':>12} {'speed-up':>9} {'efficiency':>11} {'cpu µs/ev':>10}"
        f" {'replica cores':>14} {'broker cores':>13} {'settle s':>9} {'window s':>9}  per-round speed-ups",
    ]
    for f in result["replicas"].values():
        if not f["events_per_s"]:
            lines.append(
                f"{f['replicas']:>8} {'-':>10}  no window: the group settled too late, or a replica had no backlog left"
            )
            continue
        speedup = "-" if f["speedup"] is None else f"{f['speedup']:.2f}"
        efficiency = "-" if f["efficiency"] is None else f"{f['efficiency']:.2f}"
        broker = "-" if f["broker_cores"] is None else f"{f['broker_cores']:.2f}"
        settle = "-" if f["settle_s"] is None else f"{f['settle_s']:.1f}"
        rounds = ", ".join(f"{s:.2f}" for s in f["speedups_per_round"])
        notes = [f"{f['rebalanced_runs']} run(s) rebalanced inside the window"] if f["rebalanced_runs"] else []
        cut = (
            f"{f['cut_runs']} window(s) cut: a replica's backlog ran out first (closed at {f['window_closed_at']:.0%})"
        )
        notes += [cut] if f["cut_runs"] else []
        lines.append(
            f"{f['replicas']:>8} {f['events_per_s']:>10.0f} {f['per_replica_events_per_s']:>12.0f} {speedup:>9}"
            f" {efficiency:>11} {f['cpu_us_per_event']:>10.1f} {f['replica_cores']:>14.2f} {broker:>13}"
            f" {settle:>9} {f['window_s']:>9.1f}  {rounds}" + (f"  ({'; '.join(notes)})" if notes else "")
        )
    lines.append(
        "speed-up = rate(N) / rate(1) of the same round; efficiency = speed-up / min(N, cores); cpu µs/ev: each"
        " replica's CPU time over its events; replica / broker cores: CPU seconds per second of the window"
    )
    return lines


def main(
    n: int = DEFAULT_EVENTS,
    *,
    rounds: int = ROUNDS,
    counts: Sequence[int] = REPLICAS,
    json_path: Path | None = DEFAULT_JSON,
    bootstrap: str | None = None,
) -> dict[str, Any]:
    """Measure, print the table, write the JSON; returns the figures. Without `bootstrap` a local broker is started
    (its CPU is then measured too)."""
    if not CLI.exists():
        raise RuntimeError(f"{CLI} is missing: install the project (pip install -e .) in this interpreter's venv")
    counts = sorted(set(counts))
    if bootstrap is None:
        with LocalBroker() as broker:
            result = measure(broker.bootstrap, n, rounds, counts, broker_pid(broker.port))
    else:
        port = int(bootstrap.rsplit(":", 1)[1])
        result = measure(bootstrap, n, rounds, counts, broker_pid(port))
    emit(report_lines(result), result, json_path)
    return result


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="Aggregate rate of 1, 2 and 4 replicas at 0 % sampling, on this machine.")
    p.add_argument("events", nargs="?", type=int, default=None, help=f"backlog size (default {DEFAULT_EVENTS:,})")
    p.add_argument("--rounds", type=int, default=None, help=f"interleaved rounds (default {ROUNDS})")
    p.add_argument("--replicas", type=int, nargs="+", default=list(REPLICAS), help="replica counts (default 1 2 4)")
    p.add_argument(
        "--tiny",
        action="store_true",
        help=f"{TINY_EVENTS:,} events, one round: that it runs, not what it measures (CI)",
    )
    p.add_argument(
        "--json", type=Path, default=DEFAULT_JSON, help=f"where to write the figures (default {DEFAULT_JSON})"
    )
    a = p.parse_args()
    size = a.events or (TINY_EVENTS if a.tiny else DEFAULT_EVENTS)
    main(size, rounds=a.rounds or (1 if a.tiny else ROUNDS), counts=a.replicas, json_path=a.json)
