"""The monitor's OpenAI-compatible judge path against the `openai` SDK alone, both against the same fake Chat
Completions server, in the same run (issue 41's performance requirement; `bench/judge_overhead.py` is the Anthropic
one, and this one measures the same way).

The fake (tests/fake_chat_completions.py, every reply held for LATENCY_S) runs in a process of its own, so this
process's CPU time is the client side's alone. Baseline: `AsyncOpenAI.chat.completions.create` at CONCURRENCY with
the request bodies built beforehand by `judge.request_body` (so both paths send the same bytes: the fake measures
each path's mean body size per round, and they must agree). Measured: the path the pipeline runs per sampled event,
`GuardedJudge.judge_event` over a `RubricJudge` with `judge_provider=openai` and `judge_structured_output=json_schema`
(fixed, so no probe in the timed part), one task per event. `--ladder` adds `RubricJudge.judge` alone under a
semaphore of CONCURRENCY (the guard's share is the difference). Rounds are interleaved, the order rotating, so
machine noise hits every path alike; the fake's recorded requests are counted and cleared between timed runs
(untimed), so each path must have sent exactly one request per event.

Separately (untimed), the probe: a judge with `judge_structured_output=auto` judges one wave of CONCURRENCY events
at once; the fake must see exactly one extra request (the probe's known pair, first, alone), the chosen mode must be
json_schema, and every later request uses it.

Reported: requests/s and CPU ms per request of each path (medians over the rounds), and the ratios judge path ÷ SDK
alone (paired per round: median, min, max). Target (issue 41): rate ratio ≥ 0.97, as for Anthropic.
Run: `python -m bench.judge_overhead_openai [--rounds 8] [--requests 1280] [--ladder] [--tiny] [--json PATH]`."""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
from collections import Counter
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import openai

from bench.judge_overhead import GcClock, always_wanted, events, run_all_at_once, spend_sink, timed
from bench.output import emit
from monitor.config import load_settings
from monitor.judges.llm import PROBE_QUESTION
from monitor.judges.rubric import RubricJudge
from monitor.judging.guarded_judge import GuardedJudge
from monitor.judging.metrics import JudgingMetrics
from schemas.events import ConversationEvent
from tests.fake_chat_completions import FakeChatCompletions, slow

DEFAULT_JSON = Path(".relevancy-monitor/bench/judge_overhead_openai.json")
CONCURRENCY = 64
LATENCY_S = 0.2
RATE_TARGET = 0.97
LABELS = {
    "sdk": "SDK alone (chat.completions.create, bodies prebuilt)",
    "judge": "judge path (GuardedJudge over RubricJudge)",
    "rubric": "RubricJudge.judge alone (no guard)",
}


def _serve(conn: Connection, delay_s: float) -> None:
    """The child process: a fake Chat Completions server answering every request after `delay_s`. Sends its settings
    overrides, then answers each "take" with a summary of the requests since the last one (and forgets them, so its
    memory stays flat), until told to stop."""
    with FakeChatCompletions() as api:
        api.always(slow(delay_s))
        conn.send(api.settings_overrides())
        while conn.recv() == "take":
            chat = api.chat_requests
            conn.send(
                {
                    "requests": len(chat),
                    "statuses": dict(Counter(r.status for r in chat)),
                    "mechanisms": dict(Counter(r.mechanism for r in chat)),
                    "mean_body_bytes": statistics.fmean(len(r.raw) for r in chat) if chat else 0.0,
                    "probes": [i for i, r in enumerate(chat) if PROBE_QUESTION in r.user_text],
                }
            )
            api.reset()
            api.always(slow(delay_s))


class FakeChatInAProcess:
    """The fake Chat Completions server in a child process (its CPU is not ours): a context manager giving the
    settings that point a judge at it; `take()` returns what it received since the last call and clears it."""

    def __init__(self, delay_s: float) -> None:
        ctx = multiprocessing.get_context("spawn")  # no fork of a process that may hold an event loop and threads
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, delay_s), daemon=True, name="fake-chat-completions")

    def __enter__(self) -> dict[str, Any]:
        self._proc.start()
        overrides: dict[str, Any] = self._conn.recv()
        return overrides

    def take(self) -> dict[str, Any]:
        """The summary of the requests received since the last `take` (count, statuses, mechanisms, body size)."""
        self._conn.send("take")
        summary: dict[str, Any] = self._conn.recv()
        return summary

    def __exit__(self, *exc: object) -> None:
        self._conn.send("stop")
        self._proc.join(timeout=10)
        if self._proc.is_alive():
            self._proc.kill()


def judged_events(n: int) -> list[ConversationEvent]:
    """`n` synthetic events that all need a model call (a blank response is scored without one)."""
    out: list[ConversationEvent] = []
    seed = 13
    while len(out) < n:
        out.extend(e for e in events(n, seed=seed) if e.response.strip())
        seed += 1
    return out[:n]


def _check(summary: dict[str, Any], n: int, what: str) -> None:
    if summary["requests"] != n or summary["statuses"] != {200: n}:
        raise RuntimeError(f"{what}: the fake saw {summary} for {n} events")


async def measure(
    rounds: int,
    requests: int,
    concurrency: int = CONCURRENCY,
    latency_s: float = LATENCY_S,
    *,
    ladder: bool = False,
) -> dict[str, Any]:
    """Interleaved rounds of `requests` calls by each path, then the probe check; returns every round's figures and
    the medians."""
    fake = FakeChatInAProcess(latency_s)
    with fake as overrides:
        settings = load_settings(
            judge="rubric",
            judge_structured_output="json_schema",
            judge_concurrency=concurrency,
            metrics_port=0,
            **overrides,
        )
        judge = RubricJudge(settings.judge)
        guard = GuardedJudge(judge, settings.flow, JudgingMetrics(), on_spent=spend_sink())
        sdk = openai.AsyncOpenAI(
            api_key=overrides["judge_api_key"],
            base_url=overrides["judge_base_url"],
            max_retries=0,
            timeout=settings.judge.request_timeout_s,
        )
        batch = judged_events(requests)
        # Built once, before any clock: the SDK's baseline is the call alone (its own transform, JSON, HTTP, parse).
        bodies = [judge.request_body(e.question, e.response) for e in batch]

        async def sdk_round() -> None:
            sem = asyncio.Semaphore(concurrency)

            async def one(body: dict[str, Any]) -> None:
                async with sem:
                    await sdk.chat.completions.create(**body)

            await run_all_at_once(one(b) for b in bodies)

        async def judge_round() -> None:
            await run_all_at_once(guard.judge_event(e, still_wanted=always_wanted) for e in batch)

        async def rubric_round() -> None:
            sem = asyncio.Semaphore(concurrency)

            async def one(e: ConversationEvent) -> None:
                async with sem:
                    await judge.judge(e.question, e.response)

            await run_all_at_once(one(e) for e in batch)

        paths: dict[str, Callable[[], Awaitable[None]]] = {"sdk": sdk_round, "judge": judge_round}
        if ladder:
            paths["rubric"] = rubric_round
        names = list(paths)
        body_bytes: dict[str, list[float]] = {name: [] for name in names}
        gc_clock = GcClock()
        try:
            for name in names:  # warm every path (connections, imports, caches), unmeasured
                await paths[name]()
                _check(fake.take(), requests, f"warm-up of {name}")
            runs: dict[str, list[dict[str, float]]] = {name: [] for name in names}
            for i in range(rounds):
                for name in names[i % len(names) :] + names[: i % len(names)]:  # the order rotates
                    runs[name].append(await timed(paths[name], requests, gc_clock))
                    summary = fake.take()  # untimed
                    _check(summary, requests, name)
                    body_bytes[name].append(summary["mean_body_bytes"])
        finally:
            gc_clock.close()
            await sdk.close()
            await judge.aclose()
        if judge.stats["ok"] != judge.stats["attempts"]:
            raise RuntimeError(f"judge calls failed against the fake: {dict(judge.stats)}")
        probe = await probe_once(overrides, concurrency, fake)
    ratios = {
        name: {
            "rate": [j["requests_per_s"] / s["requests_per_s"] for s, j in zip(runs["sdk"], runs[name], strict=True)],
            "cpu": [
                j["cpu_ms_per_request"] / s["cpu_ms_per_request"] for s, j in zip(runs["sdk"], runs[name], strict=True)
            ],
            "cpu_excluding_gc": [
                j["cpu_ms_per_request_excluding_gc"] / s["cpu_ms_per_request_excluding_gc"]
                for s, j in zip(runs["sdk"], runs[name], strict=True)
            ],
        }
        for name in names
        if name != "sdk"
    }
    median = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in runs.items()}
    rate = ratios["judge"]["rate"]
    return {
        "provider": "openai",
        "structured_output": "json_schema",
        "concurrency": concurrency,
        "latency_s": latency_s,
        "rounds": rounds,
        "requests_per_round": requests,
        "ideal_requests_per_s": concurrency / latency_s,
        "mean_body_bytes": {name: statistics.fmean(b) for name, b in body_bytes.items()},
        "runs": runs,
        "median": median,
        "ratios": ratios,
        "rate_ratio": statistics.median(rate),
        "rate_ratio_min": min(rate),
        "rate_ratio_max": max(rate),
        "cpu_ratio": statistics.median(ratios["judge"]["cpu"]),
        "cpu_ratio_excluding_gc": statistics.median(ratios["judge"]["cpu_excluding_gc"]),
        "rate_target": RATE_TARGET,
        "probe": probe,
    }


async def probe_once(overrides: dict[str, Any], concurrency: int, fake: FakeChatInAProcess) -> dict[str, Any]:
    """One wave of `concurrency` events at once through a judge with `judge_structured_output=auto`: what the fake
    received (one probe, first, then one request per event) and the mode chosen."""
    settings = load_settings(
        judge="rubric", judge_structured_output="auto", judge_concurrency=concurrency, metrics_port=0, **overrides
    )
    judge = RubricJudge(settings.judge)
    guard = GuardedJudge(judge, settings.flow, JudgingMetrics(), on_spent=spend_sink())
    try:
        await run_all_at_once(guard.judge_event(e, still_wanted=always_wanted) for e in judged_events(concurrency))
    finally:
        await judge.aclose()
    summary = fake.take()
    result = {
        "events": concurrency,
        "requests": summary["requests"],
        "probe_positions": summary["probes"],
        "mechanisms": summary["mechanisms"],
        "chosen_mode": judge.client.mode,
        "attempts": judge.stats["attempts"],
    }
    once = (
        summary["requests"] == concurrency + 1
        and summary["probes"] == [0]
        and summary["mechanisms"] == {"json_schema": concurrency + 1}
        and judge.client.mode == "json_schema"
    )
    if not once:
        raise RuntimeError(f"the probe did not happen exactly once, first, in json_schema: {result}")
    return result


def report_lines(r: dict[str, Any]) -> list[str]:
    """The figures as a table for people."""
    m = r["median"]
    names = list(m)
    lines = [
        f"{r['rounds']} interleaved rounds of {r['requests_per_round']} requests per path, concurrency "
        f"{r['concurrency']}, fake Chat Completions server in its own process answering after "
        f"{r['latency_s'] * 1000:.0f} ms (ideal {r['ideal_requests_per_s']:.0f} req/s); judge_provider=openai, "
        f"judge_structured_output={r['structured_output']}",
        "mean request body as the fake received it: "
        + ", ".join(f"{n} {b:,.0f} B" for n, b in r["mean_body_bytes"].items()),
        "",
        f"{'path':<54}{'req/s':>8}{'CPU ms/req':>12}{'of it GC':>10}{'without GC':>12}",
        *(
            f"{LABELS[k]:<54}{m[k]['requests_per_s']:>8.1f}{m[k]['cpu_ms_per_request']:>12.3f}"
            f"{m[k]['gc_ms_per_request']:>10.3f}{m[k]['cpu_ms_per_request_excluding_gc']:>12.3f}"
            for k in names
        ),
        "(medians over the rounds)",
        "",
    ]
    for name, ratio in r["ratios"].items():
        rate, cpu = ratio["rate"], ratio["cpu"]
        lines += [
            f"{name} ÷ SDK, rate : median {statistics.median(rate):.3f}, min {min(rate):.3f}, max {max(rate):.3f}"
            f"  (rounds {', '.join(f'{x:.3f}' for x in rate)})",
            f"{name} ÷ SDK, CPU  : median {statistics.median(cpu):.3f} (without GC "
            f"{statistics.median(ratio['cpu_excluding_gc']):.3f})",
        ]
    met = "met" if r["rate_ratio"] >= r["rate_target"] else "NOT met"
    p = r["probe"]
    lines += [
        f"rate ratio judge ÷ SDK : {r['rate_ratio']:.3f}  (target ≥ {r['rate_target']}: {met})",
        "",
        f"probe with judge_structured_output=auto: {p['events']} events at once -> {p['requests']} requests at the fake"
        f" (probe at position {p['probe_positions']}), mode chosen {p['chosen_mode']}: the probe happens once",
    ]
    return lines


def main(
    rounds: int = 8, requests: int = 1280, json_path: Path | None = DEFAULT_JSON, *, ladder: bool = False
) -> dict[str, Any]:
    """Run the benchmark; print the table and write the JSON."""
    result = asyncio.run(measure(rounds, requests, ladder=ladder))
    emit(report_lines(result), result, json_path)
    return result


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="The OpenAI-compatible judge path against the openai SDK alone, same run.")
    p.add_argument("--rounds", type=int, default=8, help="interleaved rounds per path (default 8)")
    p.add_argument("--requests", type=int, default=1280, help="requests per round and path (default 1280)")
    p.add_argument("--ladder", action="store_true", help="also RubricJudge.judge alone (the guard's share)")
    p.add_argument("--tiny", action="store_true", help="2 rounds of 128 requests (CI)")
    p.add_argument(
        "--json", type=Path, default=DEFAULT_JSON, help=f"where to write the figures (default {DEFAULT_JSON})"
    )
    a = p.parse_args()
    main(2, 128, a.json, ladder=a.ladder) if a.tiny else main(a.rounds, a.requests, a.json, ladder=a.ladder)
