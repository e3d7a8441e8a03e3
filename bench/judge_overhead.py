"""The monitor's judge path against the SDK alone, both against the same fake Messages API, in the same run.

The fake (tests/fake_messages_api.py, every reply held for LATENCY_S) runs in a process of its own, so this
process's CPU time is the client side's alone. Baseline: `AsyncAnthropic.messages.create` at CONCURRENCY with
request bodies built beforehand (the SDK's own cost and nothing else). Measured: the path the pipeline runs per
sampled event, `GuardedJudge.judge_event` over a `StatementsJudge` (circuit breaker, rate limiter, adaptive
concurrency limit at CONCURRENCY, timeout, prompt building, our retry loop, structured-output validation, usage,
cost, metrics), one task per event as the pipeline spawns them. Both judge the same decoded synthetic events, in
interleaved rounds (the order alternating), so machine noise hits both alike.

Reported: requests/s and process CPU time per request of each (medians over the rounds), and the ratios judge
path ÷ SDK alone (paired per round, median). Targets (issue 13): rate ratio ≥ 0.97, CPU ratio ≤ 1.3.
Prints a table and writes JSON (`--json PATH`). Run: `python -m bench.judge_overhead [--rounds 8] [--requests 1280]
[--tiny]`."""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import statistics
import time
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import anthropic

from bench.output import emit
from consumers.decode import decode_event
from monitor.config import load_settings
from monitor.devtools.traffic import generate_events
from monitor.judges.statements import StatementsJudge
from monitor.judging.guarded_judge import GuardedJudge
from monitor.judging.metrics import JudgingMetrics
from schemas.events import ConversationEvent, KafkaPosition
from schemas.usage import Usage
from tests.fake_messages_api import API_KEY, FakeMessagesAPI, Reply

DEFAULT_JSON = Path(".relevancy-monitor/bench/judge_overhead.json")
CONCURRENCY = 64
LATENCY_S = 0.2
RATE_TARGET = 0.97
CPU_LIMIT = 1.3


def _serve(conn: Connection, delay_s: float) -> None:
    """The child process: a fake Messages API answering every request after `delay_s`, until told to stop."""
    with FakeMessagesAPI() as api:
        api.always(Reply(delay_s=delay_s))
        conn.send(api.base_url)
        conn.recv()


class FakeInAProcess:
    """The fake Messages API in a child process (its CPU is not ours), as a context manager giving its URL."""

    def __init__(self, delay_s: float) -> None:
        ctx = multiprocessing.get_context("spawn")  # no fork of a process that may hold an event loop and threads
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, delay_s), daemon=True, name="fake-messages-api")

    def __enter__(self) -> str:
        self._proc.start()
        url: str = self._conn.recv()
        return url

    def __exit__(self, *exc: object) -> None:
        self._conn.send("stop")
        self._proc.join(timeout=10)
        if self._proc.is_alive():
            self._proc.kill()


def events(n: int, seed: int = 13) -> list[ConversationEvent]:
    """`n` synthetic events decoded as the consumer decodes records (no malformed ones)."""
    return [
        decode_event(value, position=KafkaPosition(topic="bench", partition=0, offset=i), record_timestamp_ms=None)
        for i, value in enumerate(generate_events(n, seed=seed, malformed_share=0.0))
    ]


class GcClock:
    """CPU seconds spent in the garbage collector, and full (generation 2) collections, since it was installed."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.full = 0
        self._started = 0.0
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.process_time()
        else:
            self.seconds += time.process_time() - self._started
            self.full += info["generation"] == 2

    def close(self) -> None:
        gc.callbacks.remove(self._on_gc)


async def timed(run: Callable[[], Awaitable[None]], n: int, gc_clock: GcClock) -> dict[str, float]:
    """Rate, process CPU per request (with and without the collector's share) and wall time of `await run()`."""
    gc_s, full = gc_clock.seconds, gc_clock.full
    cpu, wall = time.process_time(), time.perf_counter()
    await run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    gc_s = gc_clock.seconds - gc_s
    return {
        "requests_per_s": n / wall,
        "cpu_ms_per_request": cpu / n * 1000,
        # A full collection walks every object of the process (~0.1 s here) and lands in one round or the next:
        # the CPU without the collector is the steadier comparison of the two paths' own work.
        "cpu_ms_per_request_excluding_gc": (cpu - gc_s) / n * 1000,
        "gc_ms_per_request": gc_s / n * 1000,
        "full_collections": gc_clock.full - full,
        "seconds": wall,
    }


async def measure(
    rounds: int, requests: int, concurrency: int = CONCURRENCY, latency_s: float = LATENCY_S
) -> dict[str, Any]:
    """Interleaved rounds of `requests` calls by each path; returns every round's figures and the medians."""
    with FakeInAProcess(latency_s) as base_url:
        settings = load_settings(
            judge="statements",
            anthropic_base_url=base_url,
            anthropic_api_key=API_KEY,
            judge_concurrency=concurrency,
            metrics_port=0,
        )
        judge = StatementsJudge(settings.judge)
        guard = GuardedJudge(judge, settings.flow, JudgingMetrics(), on_spent=spend_sink())
        sdk = anthropic.AsyncAnthropic(
            api_key=API_KEY, base_url=base_url, max_retries=0, timeout=settings.judge.request_timeout_s
        )
        batch = events(requests)
        # Built once, before any clock: the SDK's baseline is the call alone (its own transform, JSON, HTTP, parse).
        bodies = [judge.request_body(e.question, e.response) for e in batch]

        async def sdk_round() -> None:
            sem = asyncio.Semaphore(concurrency)

            async def one(body: Any) -> None:
                async with sem:
                    await sdk.messages.create(**body)

            await run_all_at_once(one(b) for b in bodies)

        async def judge_round() -> None:
            await run_all_at_once(guard.judge_event(e, still_wanted=always_wanted) for e in batch)

        paths: dict[str, Callable[[], Awaitable[None]]] = {"sdk": sdk_round, "judge": judge_round}
        gc_clock = GcClock()
        try:
            for name in paths:  # warm both (connections, imports, caches), unmeasured
                await paths[name]()
            runs: dict[str, list[dict[str, float]]] = {"sdk": [], "judge": []}
            for i in range(rounds):
                for name in ("sdk", "judge") if i % 2 == 0 else ("judge", "sdk"):
                    runs[name].append(await timed(paths[name], requests, gc_clock))
        finally:
            gc_clock.close()
            await sdk.close()
            await judge.aclose()
    if judge.stats["ok"] != judge.stats["attempts"]:
        raise RuntimeError(f"judge calls failed against the fake: {dict(judge.stats)}")
    rate = [j["requests_per_s"] / s["requests_per_s"] for s, j in zip(runs["sdk"], runs["judge"], strict=True)]
    cpu = [j["cpu_ms_per_request"] / s["cpu_ms_per_request"] for s, j in zip(runs["sdk"], runs["judge"], strict=True)]
    cpu_ex_gc = [
        j["cpu_ms_per_request_excluding_gc"] / s["cpu_ms_per_request_excluding_gc"]
        for s, j in zip(runs["sdk"], runs["judge"], strict=True)
    ]
    median = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in runs.items()}
    return {
        "concurrency": concurrency,
        "latency_s": latency_s,
        "rounds": rounds,
        "requests_per_round": requests,
        "ideal_requests_per_s": concurrency / latency_s,
        "runs": runs,
        "median": median,
        "rate_ratio": statistics.median(rate),
        "cpu_ratio": statistics.median(cpu),
        "cpu_ratio_excluding_gc": statistics.median(cpu_ex_gc),
        "rate_ratios": rate,
        "cpu_ratios": cpu,
        "rate_target": RATE_TARGET,
        "cpu_limit": CPU_LIMIT,
    }


def always_wanted() -> bool:
    """`still_wanted` for an event that is never dropped while queued."""
    return True


def spend_sink() -> Callable[[Usage], None]:
    """An `on_spent` callback that adds up the cost, as the pipeline's does."""
    spent: list[float] = [0.0]

    def on_spent(usage: Usage) -> None:
        spent[0] += usage.cost_usd or 0.0

    return on_spent


async def run_all_at_once(calls: Any) -> None:
    """Await every call, each in a task of its own started at once."""
    # One task per call, all at once, as the pipeline spawns one per sampled event: the limits do the queueing.
    await asyncio.gather(*(asyncio.ensure_future(c) for c in calls))


def report_lines(r: dict[str, Any]) -> list[str]:
    """The figures as a table for people."""
    m = r["median"]
    return [
        f"{r['rounds']} interleaved rounds of {r['requests_per_round']} requests per path, concurrency "
        f"{r['concurrency']},"
        f" fake Messages API in its own process answering after {r['latency_s'] * 1000:.0f} ms (ideal "
        f"{r['ideal_requests_per_s']:.0f} req/s)",
        "",
        f"{'path':<48}{'req/s':>8}{'CPU ms/req':>12}{'of it GC':>10}{'without GC':>12}",
        *(
            f"{label:<48}{m[k]['requests_per_s']:>8.1f}{m[k]['cpu_ms_per_request']:>12.3f}{m[k]['gc_ms_per_request']:>10.3f}"
            f"{m[k]['cpu_ms_per_request_excluding_gc']:>12.3f}"
            for k, label in (
                ("sdk", "SDK alone (messages.create, bodies prebuilt)"),
                ("judge", "judge path (GuardedJudge over StatementsJudge)"),
            )
        ),
        "(medians over the rounds; full collections per round: SDK "
        f"{', '.join(str(int(x['full_collections'])) for x in r['runs']['sdk'])},"
        f" judge {', '.join(str(int(x['full_collections'])) for x in r['runs']['judge'])})",
        "",
        f"rate ratio judge ÷ SDK : {r['rate_ratio']:.3f}  (target ≥ {r['rate_target']}; rounds "
        f"{', '.join(f'{x:.3f}' for x in r['rate_ratios'])})",
        f"CPU ratio judge ÷ SDK  : {r['cpu_ratio']:.3f}  (limit ≤ {r['cpu_limit']}; rounds "
        f"{', '.join(f'{x:.3f}' for x in r['cpu_ratios'])})",
        f"  the same without GC  : {r['cpu_ratio_excluding_gc']:.3f}",
    ]


def main(rounds: int = 8, requests: int = 1280, json_path: Path | None = DEFAULT_JSON) -> dict[str, Any]:
    """Run the benchmark; print the table and write the JSON."""
    result = asyncio.run(measure(rounds, requests))
    emit(report_lines(result), result, json_path)
    return result


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="The monitor's judge path against the SDK alone, same fake API, same run.")
    p.add_argument("--rounds", type=int, default=8, help="interleaved rounds per path (default 8)")
    p.add_argument("--requests", type=int, default=1280, help="requests per round and path (default 1280)")
    p.add_argument("--tiny", action="store_true", help="2 rounds of 128 requests (CI)")
    p.add_argument(
        "--json", type=Path, default=DEFAULT_JSON, help=f"where to write the figures (default {DEFAULT_JSON})"
    )
    a = p.parse_args()
    main(2, 128, a.json) if a.tiny else main(a.rounds, a.requests, a.json)
