"""Backtest speed on a week of demo-sized history, against limits measured in the same run on the same rows.

Fills an embedded ClickHouse store through the real insert path (`ClickHouseStore.insert_rows`, so the rollup
views fire too) with about RATE judged events a minute over DAYS days: three apps, two models, a prompt rollout
that regresses for three hours, a burst of judge errors and an hour of silence, plus the traffic counts. Then it
times, over the same range and the shipped default rules:

- `scan`: one plain FINAL scan of those rows (the floor: reading them once);
- `check`: one evaluation of every rule at the end, what `alerts check` does and what each step of the
  step-by-step backtest cost (median of three, or of `--checks`); its product with the number of steps is the old
  backtest's cost;
- `per-step sample`: the step-by-step backtest over the first SAMPLE steps, scaled to all steps;
- `backtest`: `alerts backtest`'s way (each rule's history read once, the steps evaluated in memory).

Prints a table and writes JSON (`--json PATH`). Ratios, not seconds, are what to compare between machines.
Run: `python -m bench.backtest_speed [--days 7] [--rate 100] [--step 5m] [--json PATH]`."""

from __future__ import annotations

import argparse
import math
import random
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.output import emit
from monitor.alerts.backtest import backtest_times, run_backtest
from monitor.alerts.engine import evaluate_rules
from monitor.alerts.rules import load_rules
from monitor.store.connection import ClickHouseStore
from monitor.store.migrations import Migrations
from schemas.durations import parse_duration
from schemas.scored import ScoredRow

APPS = (("support-bot", 0.5), ("coding-assistant", 0.3), ("travel-agent", 0.2))
MODELS = ("assistant-large", "assistant-small")
BATCH = 50_000
END = datetime(2026, 11, 30, tzinfo=UTC)  # fixed, so runs are comparable; nothing reads the clock
DEFAULT_JSON = Path(".relevancy-monitor/bench/backtest_speed.json")


def _rows_in_minute(
    rng: random.Random, minute: datetime, rate: int, since: datetime, until: datetime
) -> list[ScoredRow]:
    hours = (until - since).total_seconds() / 3600
    share = (minute - since).total_seconds() / 3600 / hours  # how far into the range, 0..1
    diurnal = 1.0 + 0.3 * math.sin(2 * math.pi * (minute.hour * 60 + minute.minute) / 1440)
    rows = []
    for _ in range(max(1, round(rate * diurnal))):
        app = rng.choices([a for a, _ in APPS], [w for _, w in APPS])[0]
        prompt, mean = "v12", 0.78
        if app == "support-bot" and 0.6 <= share < 0.6 + 3 / hours and rng.random() < 0.5:
            prompt, mean = "v13", 0.5  # a rollout that regresses for three hours, then a rollback
        if app == "travel-agent" and 0.8 <= share < 0.8 + 1 / hours:
            continue  # an hour of silence
        error = app == "coding-assistant" and 0.7 <= share < 0.7 + 0.5 / hours and rng.random() < 0.3
        score = None if error else min(1.0, max(0.0, rng.gauss(mean, 0.15)))
        at = minute + timedelta(seconds=rng.random() * 60)
        rows.append(
            ScoredRow(
                event_id=uuid.UUID(int=rng.getrandbits(128)).hex,
                conversation_id="c",
                event_time=at,
                app=app,
                model=rng.choice(MODELS),
                prompt_version=prompt,
                judge="lexical",
                judge_model="",
                judge_id="lexical-1",
                status="error" if error else "ok",
                error="unavailable: bench" if error else "",
                score=score,
                raw_score=score,
                cost_usd=0.0004,
                scored_at=at + timedelta(seconds=2 + rng.random() * 6),
                latency_ms=120,
            )
        )
    return rows


def fill(store: ClickHouseStore, since: datetime, until: datetime, rate: int, seed: int = 7) -> int:
    """Write about `rate` judged events a minute over [since, until) through the store's insert path, with the
    matching traffic counts; returns the number of rows."""
    rng = random.Random(seed)
    batch: list[ScoredRow] = []
    traffic: list[tuple[Any, ...]] = []
    total = 0
    minute = since
    while minute < until:
        rows = _rows_in_minute(rng, minute, rate, since, until)
        counts: dict[tuple[str, str, str], int] = {}
        for r in rows:
            counts[(r.app, r.model, r.prompt_version)] = counts.get((r.app, r.model, r.prompt_version), 0) + 1
        traffic += [(minute, a, m, p, n, n, 0, 0) for (a, m, p), n in counts.items()]
        batch += rows
        if batch and (len(batch) >= BATCH or minute + timedelta(minutes=1) >= until):
            store.insert_rows(batch, uuid.uuid4().hex)
            total += len(batch)
            batch = []
        minute += timedelta(minutes=1)
    cols = ["minute", "app", "model", "prompt_version", "consumed", "sampled", "not_sampled", "dead_lettered"]
    for i in range(0, len(traffic), BATCH):
        store.insert_table("traffic_counts", cols, traffic[i : i + BATCH])
    return total


def _timed(fn: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def measure(
    store: ClickHouseStore, days: float, rate: int, step: timedelta, sample: int, checks: int = 3
) -> dict[str, Any]:
    """Fill `store`, then time the scan, one check (the median of `checks`), a per-step sample and the backtest;
    returns the figures."""
    since = END - timedelta(days=days)
    fill_s, rows = _timed(lambda: fill(store, since, END, rate))
    rules = load_rules()
    times = backtest_times(since, END, step)
    scan_sql = (
        f"SELECT count(), sum(score) FROM {store.qualified_table} FINAL WHERE event_time >= {{s:DateTime64(3, 'UTC')}}"
    )
    scan_s, _ = _timed(lambda: store.query(scan_sql, {"s": since - timedelta(days=7)}))
    check_s = statistics.median(_timed(lambda: evaluate_rules(store, rules, END, {}))[0] for _ in range(checks))
    sample_steps = times[: max(1, min(sample, len(times)))]
    sample_until = sample_steps[-1] + step
    sample_s, _ = _timed(lambda: run_backtest(store, rules, since, sample_until, step, per_step=True))
    backtest_s, report = _timed(lambda: run_backtest(store, rules, since, END, step))
    return {
        "days": days,
        "rate_per_minute": rate,
        "rows": rows,
        "fill_s": fill_s,
        "step_s": step.total_seconds(),
        "steps": len(times),
        "rules": len(rules.rules),
        "episodes": len(report.fired()),
        "scan_s": scan_s,
        "check_s": check_s,
        "check_x_steps_s": check_s * len(times),
        "per_step_sample_steps": len(sample_steps),
        "per_step_estimate_s": sample_s / len(sample_steps) * len(times),
        "backtest_s": backtest_s,
        "ratio_to_check_x_steps": backtest_s / (check_s * len(times)),
        "ratio_to_per_step_estimate": backtest_s / (sample_s / len(sample_steps) * len(times)),
        "ratio_to_scan": backtest_s / scan_s if scan_s > 0 else None,
    }


def report_lines(r: dict[str, Any]) -> list[str]:
    """The figures as a table for people."""
    return [
        f"history: {r['rows']:,} rows over {r['days']:g} days (~{r['rate_per_minute']}/min), filled in "
        f"{r['fill_s']:.1f} s",
        f"backtest: {r['rules']} default rules, {r['steps']} steps of {r['step_s'] / 60:g} min, {r['episodes']} "
        "episodes fired",
        "",
        f"{'measured in this run':<44}{'seconds':>10}{'backtest ÷ it':>16}",
        f"{'plain FINAL scan of the rows':<44}{r['scan_s']:>10.2f}{_ratio(r['ratio_to_scan']):>16}",
        f"{'one check (every rule once) × steps':<44}{r['check_x_steps_s']:>10.1f}"
        f"{_ratio(r['ratio_to_check_x_steps']):>16}",
        f"{'per-step backtest, {} steps scaled'.format(r['per_step_sample_steps']):<44}"
        f"{r['per_step_estimate_s']:>10.1f}"
        f"{_ratio(r['ratio_to_per_step_estimate']):>16}",
        f"{'backtest (history read once per rule)':<44}{r['backtest_s']:>10.2f}{'1':>16}",
    ]


def _ratio(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def main(
    days: float = 7,
    rate: int = 100,
    step: str = "5m",
    sample: int = 12,
    json_path: Path | None = DEFAULT_JSON,
    url: str | None = None,
    database: str = "bench_backtest",
    checks: int = 3,
) -> dict[str, Any]:
    """Run the benchmark on a fresh store (a temporary chDB directory unless `url` names one); print, write JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        store = ClickHouseStore(url or f"chdb://{tmp}", database, "relevancy_scores")
        Migrations(store).ensure()
        try:
            result = measure(store, days, rate, parse_duration(step), sample, checks)
        finally:
            store.command(f"DROP DATABASE IF EXISTS {database} SYNC")
            store.close()
    emit(report_lines(result), result, json_path)
    return result


if __name__ == "__main__":
    p = argparse.ArgumentParser(
        description="Backtest speed against a plain scan and the step-by-step backtest, in the same run."
    )
    p.add_argument("--days", type=float, default=7.0, help="days of history (default 7)")
    p.add_argument("--rate", type=int, default=100, help="judged events per minute (default 100)")
    p.add_argument("--step", default="5m", help="backtest step (default 5m)")
    p.add_argument("--sample", type=int, default=12, help="steps of the step-by-step backtest to time (default 12)")
    p.add_argument("--checks", type=int, default=3, help="checks timed, their median reported (default 3)")
    p.add_argument(
        "--json", type=Path, default=DEFAULT_JSON, help=f"where to write the figures (default {DEFAULT_JSON})"
    )
    a = p.parse_args()
    main(a.days, a.rate, a.step, a.sample, a.json, checks=a.checks)
