"""Alert quality: false pages on quiet streams, and the delay to the page on planted regressions, against the delay a
test that knew the change point would need (`python -m bench.alert_quality`).

The streams are synthetic and in memory: per minute, Poisson arrivals with a diurnal swing, scores from a discrete,
left-skewed 0-4 rubric mix (0, 0.25, 0.5, 0.75, 1). They are summed per grid bucket exactly as the history query sums
the scores table (`monitor.alerts.history.SCORE_SUMS`) and handed to the same rounds as `alerts backtest`
(`backtest_on`): the rules, the tests, the `for` and the state machine are the shipped ones, only the SQL is skipped.

- Quiet: steady apps, diurnal volume, an equally good new prompt version, an equally good new model and low
  traffic; every page there is a false page. Reported per 100 segment-days with a 95 % interval.
- Planted: a full release, 10 % and 1 % canaries, a model swap, drift with no version change, a small (0.1) and a
  large (0.3) drop, and a release rolled back after 3 h, each at 0.5, 2 and 10 judged events a minute.
- Two oracle delays, both at the false-page rate the issue allows (1 per 300 segment-days):
  - `oracle`: a one-sided z-test run once, at the change point plus n events of the changed traffic, with even odds
    of detection (its median): n = (z_{1-a} * sigma / drop)^2. This is the issue's wording ("a test that knew the
    change point"), and the limit it sets is 1.5 x this delay. No monitor that watches all the time can reach it:
    it must keep the same rate over every event of 300 days, not over one test.
  - `bound`: the least delay any continuous monitor can have at that rate when it knows the size of the drop
    (Lorden's bound, which CUSUM attains): n = ln(events in 300 segment-days) / (drop^2 / (2 sigma^2)).
  The ramp of a drift counts half its length on both."""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from bench.output import emit
from monitor.alerts.backtest import BacktestReport, Episode, HistoryData, backtest_on
from monitor.alerts.history import (
    EPOCH,
    SCORE_SUMS,
    TRAFFIC_SUMS,
    History,
    build_history,
    grid_for,
    read_range,
    values_for,
)
from monitor.alerts.outcomes import Newest
from monitor.alerts.rules import Rule, RuleSet, load_rules
from monitor.alerts.sequential import Buckets
from monitor.alerts.windows import (
    BIN_SUMS,
    SCORE_BINS,
    SegmentData,
    SegmentKey,
    TailCounts,
    TrafficCounts,
    VersionStats,
    Windows,
)
from schemas.errors import QueryError

DEFAULT_JSON = Path(".relevancy-monitor/bench/alert_quality.json")
LEVELS = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
GOOD = np.array([0.03, 0.05, 0.10, 0.27, 0.55])  # mean 0.815, sd about 0.27: mostly good answers, a long left tail
JUDGE = "rubric-bench00000000"
QUALITY_METRICS = {"mean_score", "low_score_share", "rollout_mean_score", "p10"}
ALLOWED_PER_SEGMENT_DAY = 1 / 300  # the bound on false pages
MINUTE_MS = 60_000


def shifted(drop: float) -> NDArray[np.float64]:
    """A mix whose mean is `drop` below GOOD's: probability moved from the top level to the bottom one."""
    move = drop / (LEVELS[-1] - LEVELS[0])
    out = GOOD.copy()
    out[-1] -= move
    out[0] += move
    assert out.min() >= 0, drop
    return out


def mean_sd(mix: NDArray[np.float64]) -> tuple[float, float]:
    """The mean and standard deviation of one score from `mix`."""
    mean = float(mix @ LEVELS)
    return mean, math.sqrt(float(mix @ (LEVELS - mean) ** 2))


@dataclass(frozen=True, slots=True)
class Phase:
    """From `start_h` on (hours from the stream's start), who gets the traffic: (model, prompt_version, share, mix)."""

    start_h: float
    arms: tuple[tuple[str, str, float, NDArray[np.float64]], ...]


@dataclass
class Stream:
    """One app's traffic: its rate (judged events a minute, before the diurnal swing), phases, and the planted
    change."""

    app: str
    rate: float
    phases: list[Phase]
    diurnal: float = 0.0  # amplitude of the daily swing of volume, 0..1
    change_h: float | None = None  # planted: when the regression starts
    rollback_h: float | None = None  # planted: when the bad version stops receiving traffic
    drop: float = 0.0  # planted: the mean drop of the changed traffic
    changed_share: float = 1.0  # planted: the share of traffic the change reaches
    drift_h: float = 0.0  # planted: hours over which the drop grows from 0 to `drop` (drift without a version change)
    shape: str = ""


@dataclass
class Minutes:
    """Per-minute sums of every (app, model, prompt_version) segment of a run, in SCORE_SUMS order, plus the raw
    scores."""

    sums: dict[tuple[str, str, str], dict[int, NDArray[np.float64]]] = field(default_factory=dict)
    scores: dict[tuple[str, str, str], dict[int, list[float]]] = field(default_factory=dict)


def _mix_at(stream: Stream, mix: NDArray[np.float64], hour: float) -> NDArray[np.float64]:
    if stream.drift_h and stream.change_h is not None and hour >= stream.change_h:
        return shifted(stream.drop * min(1.0, (hour - stream.change_h) / stream.drift_h))
    return mix


def simulate(streams: Sequence[Stream], hours: float, seed: int) -> Minutes:
    """Draw every stream's events minute by minute and sum them per segment and minute."""
    rng = np.random.default_rng(seed)
    out = Minutes()
    for s in streams:
        for minute in range(int(hours * 60)):
            hour = minute / 60
            phase = [p for p in s.phases if p.start_h <= hour][-1]
            volume = s.rate * (1 + s.diurnal * math.sin(2 * math.pi * hour / 24))
            for model, version, share, mix in phase.arms:
                n = int(rng.poisson(volume * share))
                if not n:
                    continue
                scores = rng.choice(LEVELS, size=n, p=_mix_at(s, mix, hour))
                key = (s.app, model, version)
                bins = np.bincount(np.floor(scores * 20 + 0.5).astype(np.int64), minlength=SCORE_BINS)
                # By name: a sum the simulation does not draw (errors, the prompt-cache tokens) is 0.
                named = {
                    "rows": n,
                    "ok": n,
                    "weight": n,
                    "weight_sq": n,
                    "w_score": scores.sum(),
                    "w_score_sq": (scores**2).sum(),
                    "w_low": (scores < 0.5).sum(),
                    **dict(zip(BIN_SUMS, bins, strict=False)),
                    "events": n,
                }
                row = np.array([named.get(name, 0.0) for name in SCORE_SUMS], dtype=np.float64)
                out.sums.setdefault(key, {})[minute] = row
                out.scores.setdefault(key, {})[minute] = scores.tolist()
    return out


def _history(
    rule: Rule, minutes: Minutes, origin: datetime, since: datetime, until: datetime, step: timedelta
) -> History:
    grid = grid_for(rule, since, step)
    assert grid is not None, rule.name
    start, end = read_range(rule, since, until - step)
    grid = grid.covering(start)
    size = grid.size_ms // MINUTE_MS
    base = (origin - grid.origin) // timedelta(minutes=1)  # minute 0 of the streams, in minutes from the grid origin
    keys = rule.key_fields
    values = values_for(rule)
    grouped: dict[tuple[tuple[str, ...], int], list[Any]] = {}
    for (app, model, version), per_minute in minutes.sums.items():
        fields = {"app": app, "model": model, "prompt_version": version, "judge_id": JUDGE}
        key = tuple(fields[k] for k in keys)
        for minute, row in per_minute.items():
            bucket = (base + minute) // size
            at = origin + timedelta(minutes=minute)
            if not start <= at < end:
                continue
            slot = grouped.get((key, bucket))
            first_ms = (at - EPOCH) // timedelta(milliseconds=1)
            if slot is None:
                grouped[(key, bucket)] = [row.copy(), first_ms, list(minutes.scores[(app, model, version)][minute])]
            else:
                slot[0] += row
                slot[1] = min(slot[1], first_ms)
                slot[2].extend(minutes.scores[(app, model, version)][minute])
    rows = []
    for (key, bucket), (sums, first_ms, vals) in sorted(grouped.items()):
        judge = ("rubric",) if "judge_id" in keys else ()
        rows.append((bucket, *key, *judge, *sums.tolist(), first_ms, *((vals,) if values == "score" else ())))
    return build_history(grid, start, end, keys, SCORE_SUMS, rows, values)


class _NoStore:
    """What a history does not cover is a benchmark bug, not a fallback to a store."""

    def _missing(self, rule: Rule) -> QueryError:
        return QueryError(f"bench: no history for {rule.name}")

    def scores(self, rule: Rule, windows: Windows) -> dict[SegmentKey, SegmentData]:
        raise self._missing(rule)

    def versions(self, rule: Rule, windows: Windows) -> dict[SegmentKey, list[VersionStats]]:
        raise self._missing(rule)

    def traffic(self, rule: Rule, windows: Windows) -> dict[SegmentKey, TrafficCounts]:
        raise self._missing(rule)

    def tail_counts(
        self, rule: Rule, windows: Windows, segment: SegmentKey, cutoff: float, threshold: float
    ) -> TailCounts:
        raise self._missing(rule)

    def buckets(self, rule: Rule, windows: Windows) -> dict[SegmentKey, Buckets]:
        raise self._missing(rule)

    def newest(self, rule: Rule, before: datetime) -> Newest | None:
        return None


def backtest(
    rules: RuleSet, minutes: Minutes, origin: datetime, since: datetime, until: datetime, step: timedelta
) -> BacktestReport:
    """The shipped rounds over the simulated minutes."""
    scores = {r.name: _history(r, minutes, origin, since, until, step) for r in rules.rules}
    assert TRAFFIC_SUMS  # the quality rules read no traffic counts
    return backtest_on(HistoryData(_NoStore(), scores, {}), rules, since, until, step)


def quality_rules(path: str | None = None) -> RuleSet:
    """The shipped rules that page or ticket on the scores' level (the ones this benchmark is about)."""
    rules = load_rules(path)
    return RuleSet(rules=[r for r in rules.rules if r.metric in QUALITY_METRICS])


# ---- the streams ----------------------------------------------------------------------------------------------


def quiet_streams(apps: int, rng_seed: int) -> list[Stream]:
    """Steady, diurnal, an equal new version at day 2, an equal new model at day 3, low traffic: in turn."""
    rng = np.random.default_rng(rng_seed)
    out = []
    for i in range(apps):
        kind = i % 5
        rate = 0.5 if kind == 4 else float(rng.choice([1.0, 2.0, 5.0, 10.0]))
        m = "model-a"
        phases = [Phase(0, ((m, "v1", 1.0, GOOD),))]
        if kind == 2:
            phases.append(Phase(48 + float(rng.uniform(0, 24)), ((m, "v2", 1.0, GOOD),)))
        if kind == 3:
            phases.append(Phase(72 + float(rng.uniform(0, 24)), (("model-b", "v1", 1.0, GOOD),)))
        out.append(
            Stream(
                f"quiet-{i:03d}",
                rate,
                phases,
                diurnal=0.6 if kind in (1, 2, 3) else 0.0,
                shape=["steady", "diurnal", "new version", "new model", "low traffic"][kind],
            )
        )
    return out


CHANGE_H = 30.0  # after a day of baseline and some hours of quiet evaluation
PLANTED_HOURS = CHANGE_H + 50.0  # long enough to see a persisting regression still paging 48 h on


def planted_streams(rates: Sequence[float]) -> list[Stream]:
    """Every shape at every rate."""
    out = []
    for rate in rates:
        tag = f"{rate:g}"
        m, c = "model-a", CHANGE_H
        bad, big, small = shifted(0.2), shifted(0.3), shifted(0.1)
        shapes = [
            ("full release", [Phase(0, ((m, "v1", 1, GOOD),)), Phase(c, ((m, "v2", 1, bad),))], 0.2, 1.0, None, 0.0),
            (
                "10% canary",
                [Phase(0, ((m, "v1", 1, GOOD),)), Phase(c, ((m, "v1", 0.9, GOOD), (m, "v2", 0.1, bad)))],
                0.2,
                0.1,
                None,
                0.0,
            ),
            (
                "1% canary",
                [Phase(0, ((m, "v1", 1, GOOD),)), Phase(c, ((m, "v1", 0.99, GOOD), (m, "v2", 0.01, big)))],
                0.3,
                0.01,
                None,
                0.0,
            ),
            (
                "model swap",
                [Phase(0, ((m, "v1", 1, GOOD),)), Phase(c, (("model-b", "v1", 1, bad),))],
                0.2,
                1.0,
                None,
                0.0,
            ),
            ("drift, no version change", [Phase(0, ((m, "v1", 1, GOOD),))], 0.2, 1.0, None, 3.0),
            (
                "small drop (0.1)",
                [Phase(0, ((m, "v1", 1, GOOD),)), Phase(c, ((m, "v2", 1, small),))],
                0.1,
                1.0,
                None,
                0.0,
            ),
            (
                "large drop (0.3)",
                [Phase(0, ((m, "v1", 1, GOOD),)), Phase(c, ((m, "v2", 1, big),))],
                0.3,
                1.0,
                None,
                0.0,
            ),
            (
                "rollback after 3 h",
                [Phase(0, ((m, "v1", 1, GOOD),)), Phase(c, ((m, "v2", 1, bad),)), Phase(c + 3, ((m, "v1", 1, GOOD),))],
                0.2,
                1.0,
                c + 3,
                0.0,
            ),
        ]
        for name, phases, drop, share, rollback, drift in shapes:
            app = f"{name.split()[0].replace('%', 'pct')}-{len(out):02d}-at-{tag}"
            out.append(
                Stream(
                    app,
                    rate,
                    phases,
                    change_h=c,
                    rollback_h=rollback,
                    drop=drop,
                    changed_share=share,
                    drift_h=drift,
                    shape=name,
                )
            )
    return out


# ---- the figures ----------------------------------------------------------------------------------------------


def oracle_delay_min(stream: Stream) -> float:
    """Minutes a once-run one-sided z-test at the change point would need for even odds, at the allowed false rate."""
    z = float(stats.norm.ppf(1 - ALLOWED_PER_SEGMENT_DAY))
    _, sd = mean_sd(GOOD)
    return _minutes(stream, (z * sd / stream.drop) ** 2)


def bound_delay_min(stream: Stream) -> float:
    """Minutes Lorden's bound allows a continuous monitor that knows the drop, at the allowed false rate."""
    _, sd = mean_sd(GOOD)
    rate = stream.rate * stream.changed_share
    events_between_false_pages = rate * 1440 / ALLOWED_PER_SEGMENT_DAY
    return _minutes(stream, math.log(events_between_false_pages) / (stream.drop**2 / (2 * sd**2)))


def _minutes(stream: Stream, events: float) -> float:
    ramp = stream.drift_h * 60 / 2 if stream.drift_h else 0.0  # a linear drift reaches its mean drop half-way
    return events / (stream.rate * stream.changed_share) + ramp


def _pages(report: BacktestReport, app: str) -> list[Episode]:
    return [e for e in report.fired() if dict(e.segment).get("app") == app and e.severity == "page"]


def quiet_figures(report: BacktestReport, streams: Sequence[Stream], days: float) -> dict[str, Any]:
    """False pages per 100 segment-days, with an exact Poisson 95 % interval, and which rules they came from."""
    pages = [e for s in streams for e in _pages(report, s.app)]
    segment_days = len(streams) * days
    low, high = (
        (stats.chi2.ppf(0.025, 2 * len(pages)) / 2 if pages else 0.0),
        stats.chi2.ppf(0.975, 2 * len(pages) + 2) / 2,
    )
    by_rule: dict[str, int] = {}
    for e in pages:
        by_rule[e.rule] = by_rule.get(e.rule, 0) + 1
    tickets = [
        e for s in streams for e in report.fired() if dict(e.segment).get("app") == s.app and e.severity == "ticket"
    ]
    return {
        "segment_days": segment_days,
        "false_tickets": len(tickets),
        "false_tickets_by_rule": {r: sum(1 for e in tickets if e.rule == r) for r in sorted({e.rule for e in tickets})},
        "false_pages": len(pages),
        "per_100_segment_days": 100 * len(pages) / segment_days,
        "interval_95": [100 * low / segment_days, 100 * high / segment_days],
        "limit_per_100_segment_days": 100 * ALLOWED_PER_SEGMENT_DAY,
        "by_rule": by_rule,
        "by_shape": {
            shape: sum(1 for s in streams if s.shape == shape for e in _pages(report, s.app))
            for shape in sorted({s.shape for s in streams})
        },
    }


def planted_figures(report: BacktestReport, streams: Sequence[Stream], origin: datetime) -> list[dict[str, Any]]:
    """Per stream: paged or not, the delay from the change to the first page, the oracle's, and what happened after."""
    out = []
    for s in streams:
        assert s.change_h is not None
        change = origin + timedelta(hours=s.change_h)
        pages = sorted(
            (e for e in _pages(report, s.app) if e.fired_at is not None and e.fired_at >= change),
            key=lambda e: e.fired_at or change,
        )
        early = [e for e in _pages(report, s.app) if e.fired_at is not None and e.fired_at < change]
        first = pages[0] if pages else None
        delay = (
            (first.fired_at - change).total_seconds() / 60 if first is not None and first.fired_at is not None else None
        )
        oracle, bound = oracle_delay_min(s), bound_delay_min(s)
        row: dict[str, Any] = {
            "shape": s.shape,
            "rate": s.rate,
            "paged": first is not None,
            "rule": first.rule if first else None,
            "delay_min": delay,
            "oracle_min": oracle,
            "ratio": delay / oracle if delay is not None else None,
            "bound_min": bound,
            "ratio_to_bound": delay / bound if delay is not None else None,
            "pages_before_change": len(early),
            "episodes": len(pages),
        }
        if s.rollback_h is not None:
            back = origin + timedelta(hours=s.rollback_h)
            open_at_back = [e for e in pages if e.fired_at is not None and e.fired_at <= back]
            ends = [
                (e.resolved_at - back).total_seconds() / 60 if e.resolved_at is not None else math.inf
                for e in open_at_back
            ]
            row["resolved_after_rollback_min"] = max(ends) if ends else None
        else:
            at_48h = change + timedelta(hours=48)
            row["firing_48h_on"] = any(
                e.fired_at is not None and e.fired_at <= at_48h and (e.resolved_at is None or e.resolved_at > at_48h)
                for e in pages
            )
        out.append(row)
    return out


def summary(quiet: dict[str, Any], planted: list[dict[str, Any]]) -> dict[str, Any]:
    """The issue's bars: false pages, regressions paged, median delay against the oracle, rollback, persistence."""
    relevant = [r for r in planted if r["shape"] != "rollback after 3 h"]
    ratios = [r["ratio"] for r in planted if r["ratio"] is not None]
    to_bound = [r["ratio_to_bound"] for r in planted if r["ratio_to_bound"] is not None]
    rollbacks = [r["resolved_after_rollback_min"] for r in planted if "resolved_after_rollback_min" in r]
    persisting = [r["firing_48h_on"] for r in relevant if "firing_48h_on" in r]
    return {
        "false_pages_per_300_segment_days": 3 * quiet["per_100_segment_days"],
        "regressions_paged": f"{sum(r['paged'] for r in planted)} of {len(planted)}",
        "median_delay_min": statistics.median(
            [r["delay_min"] for r in planted if r["delay_min"] is not None] or [math.nan]
        ),
        "median_ratio_to_oracle": statistics.median(ratios) if ratios else None,
        "ratio_limit": 1.5,
        "median_ratio_to_bound": statistics.median(to_bound) if to_bound else None,
        # What no continuous monitor can beat, in units of the once-run oracle: the floor under the first ratio.
        "median_bound_over_oracle": statistics.median(r["bound_min"] / r["oracle_min"] for r in planted),
        "rollback_resolved_min": rollbacks,
        "persisting_still_firing_48h": f"{sum(persisting)} of {len(persisting)}",
    }


def report_lines(result: dict[str, Any]) -> Iterator[str]:
    """The tables, as they go into BENCHMARKS.md."""
    q, s = result["quiet"], result["summary"]
    yield (
        f"alert quality ({result['rules']}), {result['quiet_streams']} quiet streams over {result['days']:g} days, "
        f"step {result['step']}"
    )
    yield (
        f"  false pages: {q['false_pages']} in {q['segment_days']:g} segment-days = {q['per_100_segment_days']:.2f} "
        "per 100 "
    )
    yield (
        f"    (95 % {q['interval_95'][0]:.2f}-{q['interval_95'][1]:.2f}; limit "
        f"{q['limit_per_100_segment_days']:.2f}); by rule {q['by_rule']}"
    )
    yield f"    by stream kind {q['by_shape']}; false tickets {q['false_tickets']} {q['false_tickets_by_rule']}"
    yield (
        "  planted:  shape                       rate/min  paged  delay min  oracle min  ratio  bound min  ratio   "
        "after"
    )
    for r in result["planted"]:
        after = (
            f"resolved {r['resolved_after_rollback_min']:.0f} min after the rollback"
            if r.get("resolved_after_rollback_min") not in (None, math.inf)
            else ("still firing at the end after the rollback" if r.get("resolved_after_rollback_min") else "")
        )
        if "firing_48h_on" in r:
            after = "firing 48 h on" if r["firing_48h_on"] else "NOT firing 48 h on"
        delay = f"{r['delay_min']:9.0f}" if r["delay_min"] is not None else "        -"
        ratio = f"{r['ratio']:5.1f}" if r["ratio"] is not None else "    -"
        to_bound = f"{r['ratio_to_bound']:5.1f}" if r["ratio_to_bound"] is not None else "    -"
        yield (
            f"            {r['shape']:<27} {r['rate']:>8g}  {'yes' if r['paged'] else 'NO':>5}  {delay}  "
            f"{r['oracle_min']:10.1f}  {ratio}"
            f"  {r['bound_min']:9.1f}  {to_bound}   {after}"
        )
    to_oracle, to_bound = s["median_ratio_to_oracle"] or math.nan, s["median_ratio_to_bound"] or math.nan
    yield (
        f"  summary: {s['regressions_paged']} paged; median delay {s['median_delay_min']:.0f} min, {to_oracle:.1f} x "
        "the oracle"
        f" (limit {s['ratio_limit']}; the bound itself is {s['median_bound_over_oracle']:.1f} x it), {to_bound:.1f} x "
        "the bound;"
        f" false pages per 300 segment-days {s['false_pages_per_300_segment_days']:.2f} (limit 1)"
    )


def main(
    quiet_apps: int = 100,
    days: float = 31.0,
    rates: Sequence[float] = (0.5, 2.0, 10.0),
    step_min: int = 5,
    rules_path: str | None = None,
    seed: int = 7,
    json_path: Path | None = DEFAULT_JSON,
    planted_hours: float = PLANTED_HOURS,
) -> dict[str, Any]:
    """Run both halves and print the tables (`planted_hours`: how long the planted streams run, the change at 30 h)."""
    rules = quality_rules(rules_path)
    step = timedelta(minutes=step_min)
    origin = datetime(2026, 1, 5, tzinfo=UTC)
    warmup = timedelta(hours=25)  # a day of trailing baseline before the first round
    quiet = quiet_streams(quiet_apps, seed)
    q_minutes = simulate(quiet, days * 24, seed)
    q_report = backtest(rules, q_minutes, origin, origin + warmup, origin + timedelta(days=days), step)
    quiet_days = days - warmup / timedelta(days=1)
    planted = planted_streams(rates)
    p_minutes = simulate(planted, planted_hours, seed + 1)
    p_report = backtest(rules, p_minutes, origin, origin + warmup, origin + timedelta(hours=planted_hours), step)
    q_fig, p_fig = quiet_figures(q_report, quiet, quiet_days), planted_figures(p_report, planted, origin)
    result = {
        "rules": rules_path or "the shipped default rules",
        "quiet_streams": len(quiet),
        "days": quiet_days,
        "step": f"{step_min}m",
        "quiet": q_fig,
        "planted": p_fig,
        "summary": summary(q_fig, p_fig),
    }
    emit(list(report_lines(result)), result, json_path)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quiet-apps", type=int, default=100)
    parser.add_argument("--days", type=float, default=31.0)
    parser.add_argument("--rules", default=None, help="a rules file (default: the shipped rules)")
    parser.add_argument(
        "--planted-hours",
        type=float,
        default=PLANTED_HOURS,
        help="how long the planted streams run (the change is at 30 h)",
    )
    args = parser.parse_args()
    main(args.quiet_apps, args.days, rules_path=args.rules, planted_hours=args.planted_hours)
