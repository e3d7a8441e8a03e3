"""Alert quality: false pages and tickets on quiet deployments against the rules' budget, and the delay to the page on
planted regressions against the least delay any detector can have (`python -m bench.alert_quality`).

The streams are synthetic and in memory: per minute, Poisson arrivals with an optional diurnal swing, scores from a
discrete 0-4 rubric mix (0, 0.25, 0.5, 0.75, 1). They are summed per grid bucket exactly as the history query sums
the scores table (`monitor.alerts.history.SCORE_SUMS`) and handed to the same rounds as `alerts backtest`
(`backtest_on`): the rules, the tests, the `for` and the state machine are the shipped ones, only the SQL is skipped.

A run is a set of deployments, each its own backtest, because the false-alarm budget is per deployment: shared by
the segments a deployment has, so a deployment with many more segments than a real one would give each a longer
ARL0 and a slower detector. Deployments keep about 18 relevancy_drop segments, as the issue's backtest had.

- Planted, per seed: the issue's deployment (12 apps, 19 segments after the change: the six cases below, a regression
  confined to follow-up turns and five unchanged apps, two of them split between two models), from `BASE` (mean 0.75),
  where a bad release moves answers from 1.0 to 0.25: a full release (.75 -> .47 at 2.1 judged/min), a 10 % canary
  whose new version scores .09 (the app at 3.2/min, the canary at 0.32), a model swap (.75 -> .47), drift with no
  version change (.75 -> .45 over a 1 h ramp), a modest release (.75 -> .63 at 4/min), a release rolled back after three
  hours, and an app that stops passing the conversation to its model, with no version change: its follow-up turns (half
  its 2 judged/min) fall .75 -> .47 while its first turns stay at .75. It runs 50 h past the change, to see a
  persisting regression still paging 48 h on. Then the older shapes (from `GOOD`, mass moved from 1.0 to 0) at 0.5, 2
  and 10 judged/min, one deployment per rate, 8 h past the change.
- Quiet, per seed: deployments of steady, diurnal, re-versioned, re-modelled and slow apps (`GOOD` or `BASE`) where
  every page or ticket is false; reported per deployment-week against the rules' `false_alarms_per_week`. 40 % of
  their traffic is follow-up turns, so the rules that read only follow-ups are watched for false pages too.
- The reference (`bench.optimal_cusum`): the likelihood-ratio CUSUM that knows the changed segment's histogram before
  (its baseline's) and after (what the change draws), at the ARL0 the shipped budget gives that segment
  (`Budget.arl_events`: the segment's rate x a week x the deployment's detector segments / the rule's budget), by
  Monte Carlo, on the engine's 5-minute round grid. For a drift the detector is the one for the post-ramp mix and the
  events come from the ramp as planted (each from the new mix with the ramp's share at its time), so the optimum pays
  for the ramp as the shipped rules do. For a change confined to follow-ups the optimum knows that the first turns do
  not change, so only the follow-ups carry evidence: it watches them, at the same ARL0 per unit of time as any
  segment. The ratio is the observed delay (mean over seeds; a seed that never paged counts the whole run after the
  change, and the mean is marked `>` as a lower bound) over it.
- Users' feedback (issue 45): on every deployment, `FEEDBACK_SHARE` of the answers (`ANSWERS_PER_JUDGED` for each
  judged one: the monitor judges a sample, users rate any answer) get a thumbs, down with a
  probability set by the answer's score (`NEGATIVE_BY_LEVEL`: a coin per answer, so a good answer is sometimes
  disliked and a bad one liked), summed per segment and minute as the feedback rollup holds them and fed to
  `feedback_negative_rise` like the scores to the relevancy rules. Its false pages on the quiet deployments count in
  the same page budget (`pages_by_rule` names them); on the planted ones its delay is reported beside the relevancy
  rules' (whose first page, `delay_min`, never counts it), against its own optimum:
  the likelihood-ratio CUSUM knowing the thumbs-down probability before and after (a Bernoulli each; for a change
  confined to follow-ups, the mixture the segment's feedback then has), at the ARL0 the feedback rule's budget gives
  the segment at its feedback rate.
- `oracle`, a secondary column: a one-sided z-test run once, n events after the change, with even odds of detection
  at 1 false alarm per 300 segment-days: n = (z * sd / drop)^2 (half a drift's ramp added). No monitor that
  watches all the time can reach it; it is kept for comparison with older runs. The Gaussian "bound" of earlier
  runs is gone: it was not a lower bound."""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from bench.optimal_cusum import Arrivals, optimal
from bench.output import emit
from monitor.alerts.backtest import BacktestReport, Episode, HistoryData, backtest_on
from monitor.alerts.detection import Budget
from monitor.alerts.history import (
    EPOCH,
    FEEDBACK_SUMS,
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
BASE = np.array([0.05, 0.08, 0.12, 0.32, 0.43])  # mean 0.75: the issue's apps before their changes
CANARY_BAD = np.array([0.84, 0.06, 0.04, 0.03, 0.03])  # mean 0.0875: a canary that answers almost nothing well
JUDGE = "rubric-bench00000000"
QUALITY_METRICS = {"mean_score", "low_score_share", "rollout_mean_score", "p10", "feedback_negative_share"}
DETECTOR_RULE = "relevancy_drop"
FEEDBACK_RULE = "feedback_negative_rise"
FEEDBACK_SHARE = 0.05  # the share of answers that get a thumbs
# Answers per judged answer: the monitor judges a sample (one answer in ten here), users give feedback on any answer,
# so a segment's feedback a minute is its judged rate x ANSWERS_PER_JUDGED x FEEDBACK_SHARE (half its judged rate).
ANSWERS_PER_JUDGED = 10.0
# P(thumbs down | the answer's score) at the rubric's levels 0, 0.25, 0.5, 0.75, 1: users dislike most bad answers and
# some good ones (BASE gives 16 % negative feedback, GOOD 12 %).
NEGATIVE_BY_LEVEL = np.array([0.60, 0.45, 0.25, 0.12, 0.06])
FEEDBACK_SEED = 45  # the feedback's own draws: the scores' stay those of a run without feedback
ALLOWED_PER_SEGMENT_DAY = 1 / 300  # the oracle's false-alarm rate
MINUTE_MS = 60_000
CHANGE_H = 30.0  # after a day of baseline and some hours of quiet evaluation
PLANTED_HOURS = CHANGE_H + 50.0  # long enough to see a persisting regression still paging 48 h on
# The older shapes change after three days, as the issue's own backtest ran three: their thinnest apps (0.5 judged a
# minute) learn their baseline histogram from 2,000 events, not 700 (a day), which the optimum, knowing it exactly,
# does not need. Their rounds start 5 h before the change (a multiple of the step after WARMUP: the same grid).
LEGACY_CHANGE_H = 73.0
LEGACY_START_H = LEGACY_CHANGE_H - 5.0
LEGACY_HOURS = LEGACY_CHANGE_H + 8.0  # long enough for every drop the optimum catches within 6 h
WARMUP = timedelta(hours=25)  # a day of trailing baseline before the first round
ORIGIN = datetime(2026, 1, 5, tzinfo=UTC)
CATCH_WITHIN_MIN = 360.0
ROLLBACK_LIMIT_MIN = 15.0
DEFAULT_SEEDS = (7, 8, 9)


def shifted(drop: float) -> NDArray[np.float64]:
    """A mix whose mean is `drop` below GOOD's: probability moved from the top level to the bottom one."""
    return moved(GOOD, drop, to=0.0)


def moved(mix: NDArray[np.float64], drop: float, to: float = 0.25) -> NDArray[np.float64]:
    """`mix` with its mean lowered by `drop`: probability moved from the top level (1.0) to the level `to`."""
    move = drop / (LEVELS[-1] - to)
    out = mix.copy()
    out[-1] -= move
    out[int(np.flatnonzero(np.isclose(LEVELS, to))[0])] += move
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
    change: the changed traffic's share and its mixes before (`pre`, its segment's baseline) and after (`post`)."""

    app: str
    rate: float
    phases: list[Phase]
    diurnal: float = 0.0  # amplitude of the daily swing of volume, 0..1
    change_h: float | None = None  # planted: when the regression starts
    rollback_h: float | None = None  # planted: when the bad version stops receiving traffic
    changed_share: float = 1.0  # planted: the share of traffic the change reaches
    drift_h: float = 0.0  # planted: hours over which the mix moves from `pre` to `post` (no version change)
    follow_ups: float = 0.0  # the share of the traffic that is follow-up turns (turn > 0); the rest are first turns
    follow_ups_only: bool = False  # planted: the change reaches the follow-ups only; first turns keep `pre`
    shape: str = ""
    pre: NDArray[np.float64] = field(default_factory=lambda: GOOD)
    post: NDArray[np.float64] = field(default_factory=lambda: GOOD)

    @property
    def drop(self) -> float:
        """The mean drop of the changed traffic."""
        return mean_sd(self.pre)[0] - mean_sd(self.post)[0]

    @property
    def changed_rate(self) -> float:
        """Judged events a minute that the change reaches (before the diurnal swing)."""
        return self.rate * self.changed_share * (self.follow_ups if self.follow_ups_only else 1.0)


@dataclass
class Minutes:
    """Per-minute sums of every (app, model, prompt_version, turn) of a run, in SCORE_SUMS order, plus the raw
    scores; turn is 0 for first turns and 1 for follow-ups (the rules' `turns` split on turn > 0)."""

    sums: dict[tuple[str, str, str, int], dict[int, NDArray[np.float64]]] = field(default_factory=dict)
    scores: dict[tuple[str, str, str, int], dict[int, list[float]]] = field(default_factory=dict)
    # per (app, model, prompt_version) and minute: [feedback events, negative ones] (the rollup has no turns)
    feedback: dict[tuple[str, str, str], dict[int, NDArray[np.int64]]] = field(default_factory=dict)


_BIN_OF_LEVEL = np.floor(LEVELS * 20 + 0.5).astype(np.int64)
# The rows a rule's `turns` reads (`monitor.alerts.queries.TURN_ROWS`), by the simulation's turn (0 or 1).
TURN_KINDS: dict[str, Callable[[int], bool]] = {
    "all": lambda turn: True,
    "first": lambda turn: turn == 0,
    "follow_up": lambda turn: turn > 0,
}


def _mixes(stream: Stream, mix: NDArray[np.float64], hours: NDArray[np.float64]) -> NDArray[np.float64]:
    """The mix of each minute: `mix`, or during and after a drift's ramp its share of the way to `post`."""
    if not stream.drift_h or stream.change_h is None:
        return np.broadcast_to(mix, (len(hours), len(mix)))
    f = np.clip((hours - stream.change_h) / stream.drift_h, 0.0, 1.0)[:, None]
    out: NDArray[np.float64] = (1 - f) * mix + f * stream.post
    return out


def simulate(streams: Sequence[Stream], hours: float, seed: int) -> Minutes:
    """Draw every stream's events minute by minute and sum them per segment and minute."""
    rng = np.random.default_rng(seed)
    feedback_rng = np.random.default_rng([seed, FEEDBACK_SEED])
    out = Minutes()
    minutes = np.arange(int(hours * 60))
    hour = minutes / 60
    index = {name: i for i, name in enumerate(SCORE_SUMS)}
    for s in streams:
        volume = s.rate * (1 + s.diurnal * np.sin(2 * np.pi * hour / 24))
        phase_of = np.searchsorted([p.start_h for p in s.phases], hour, side="right") - 1
        for i, phase in enumerate(s.phases):
            at = minutes[phase_of == i]
            for model, version, share, mix in phase.arms:
                for turn, part in ((0, 1.0 - s.follow_ups), (1, s.follow_ups)):
                    if part <= 0:
                        continue
                    n = rng.poisson(volume[at] * share * part)
                    unchanged = turn == 0 and s.follow_ups_only
                    mixes = np.broadcast_to(s.pre, (len(at), len(s.pre))) if unchanged else _mixes(s, mix, hour[at])
                    _add(out, (s.app, model, version, turn), at, n, rng.multinomial(n, mixes), index)
                    answers = (volume[at] * share * part * ANSWERS_PER_JUDGED)[:, None] * mixes
                    _add_feedback(out, (s.app, model, version), at, answers, feedback_rng)
    return out


def _add(
    out: Minutes,
    key: tuple[str, str, str, int],
    at: NDArray[np.int64],
    n: NDArray[np.int64],
    counts: NDArray[np.int64],
    index: dict[str, int],
) -> None:
    """Sum one arm's draws per minute into `out` under `key`."""
    # By name: a sum the simulation does not draw (errors, the prompt-cache tokens) is 0.
    rows = np.zeros((len(at), len(SCORE_SUMS)))
    for name in ("rows", "ok", "weight", "weight_sq", "events"):
        rows[:, index[name]] = n
    rows[:, index["w_score"]] = counts @ LEVELS
    rows[:, index["w_score_sq"]] = counts @ LEVELS**2
    rows[:, index["w_low"]] = counts[:, LEVELS < 0.5].sum(axis=1)
    for level, b in enumerate(_BIN_OF_LEVEL):
        rows[:, index[BIN_SUMS[b]]] = counts[:, level]
    sums, scores = out.sums.setdefault(key, {}), out.scores.setdefault(key, {})
    for j in np.flatnonzero(n):
        sums[int(at[j])] = rows[j]
        scores[int(at[j])] = np.repeat(LEVELS, counts[j]).tolist()


def _add_feedback(
    out: Minutes,
    key: tuple[str, str, str],
    at: NDArray[np.int64],
    answers: NDArray[np.float64],
    rng: np.random.Generator,
) -> None:
    """Draw the feedback on one arm's answers (expected answers per minute and score level: judged or not) and add it
    to `out` under `key`."""
    given = rng.poisson(answers * FEEDBACK_SHARE)
    negative = rng.binomial(given, NEGATIVE_BY_LEVEL)
    per_minute = out.feedback.setdefault(key, {})
    for j in np.flatnonzero(given.sum(axis=1)):
        row = np.array([given[j].sum(), negative[j].sum()], dtype=np.int64)
        minute = int(at[j])
        per_minute[minute] = per_minute[minute] + row if minute in per_minute else row


def negative_share(mix: NDArray[np.float64]) -> float:
    """The share of feedback that is negative on answers scored from `mix`."""
    return float(mix @ NEGATIVE_BY_LEVEL)


def _feedback_history(
    rule: Rule, minutes: Minutes, origin: datetime, since: datetime, until: datetime, step: timedelta
) -> History:
    """A feedback rule's history from the simulated feedback, as `queries.fetch_feedback_history` reads the rollup."""
    grid = grid_for(rule, since, step)
    assert grid is not None, rule.name
    start, end = read_range(rule, since, until - step)
    grid = grid.covering(start)
    size = grid.size_ms // MINUTE_MS
    base = (origin - grid.origin) // timedelta(minutes=1)
    grouped: dict[tuple[tuple[str, ...], int], list[Any]] = {}
    for (app, model, version), per_minute in minutes.feedback.items():
        fields = {"app": app, "model": model, "prompt_version": version}
        key = tuple(fields[k] for k in rule.key_fields)
        for minute, (n, negative) in per_minute.items():
            at = origin + timedelta(minutes=minute)
            if not start <= at < end:
                continue
            sums = np.array([n, n, 0, n, n, n - negative, n - negative, negative], dtype=np.float64)
            first_ms = (at - EPOCH) // timedelta(milliseconds=1)
            slot = grouped.setdefault((key, (base + minute) // size), [np.zeros(len(FEEDBACK_SUMS)), first_ms])
            slot[0] += sums
            slot[1] = min(slot[1], first_ms)
    rows = [(bucket, *key, *sums.tolist(), first_ms) for (key, bucket), (sums, first_ms) in sorted(grouped.items())]
    return build_history(grid, start, end, rule.key_fields, FEEDBACK_SUMS, rows, None)


def _history(
    rule: Rule, minutes: Minutes, origin: datetime, since: datetime, until: datetime, step: timedelta
) -> History:
    if rule.spec.table == "feedback":
        return _feedback_history(rule, minutes, origin, since, until, step)
    grid = grid_for(rule, since, step)
    assert grid is not None, rule.name
    start, end = read_range(rule, since, until - step)
    grid = grid.covering(start)
    size = grid.size_ms // MINUTE_MS
    base = (origin - grid.origin) // timedelta(minutes=1)  # minute 0 of the streams, in minutes from the grid origin
    keys = rule.key_fields
    values = values_for(rule)
    grouped: dict[tuple[tuple[str, ...], int], list[Any]] = {}
    for (app, model, version, turn), per_minute in minutes.sums.items():
        if not TURN_KINDS[rule.turns](turn):
            continue
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
                grouped[(key, bucket)] = [
                    row.copy(),
                    first_ms,
                    list(minutes.scores[(app, model, version, turn)][minute]),
                ]
            else:
                slot[0] += row
                slot[1] = min(slot[1], first_ms)
                slot[2].extend(minutes.scores[(app, model, version, turn)][minute])
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


def histories(
    rules: RuleSet, minutes: Minutes, origin: datetime, since: datetime, until: datetime, step: timedelta
) -> HistoryData:
    """Every rule's history from the simulated minutes, as `alerts backtest` would read them."""
    scores = {r.name: _history(r, minutes, origin, since, until, step) for r in rules.rules}
    assert TRAFFIC_SUMS  # the quality rules read no traffic counts
    return HistoryData(_NoStore(), scores, {})


def backtest(
    rules: RuleSet, minutes: Minutes, origin: datetime, since: datetime, until: datetime, step: timedelta
) -> BacktestReport:
    """The shipped rounds over the simulated minutes."""
    return backtest_on(histories(rules, minutes, origin, since, until, step), rules, since, until, step)


def quality_rules(path: str | None = None) -> RuleSet:
    """The shipped rules that page or ticket on the scores' level (the ones this benchmark is about), each with the
    share of the false-alarm budget it has in the whole file: the subset's budget per severity is the sum of its
    rules' shares, so that leaving the other rules out gives none of them more."""
    rules = load_rules(path)
    mine = [r for r in rules.rules if r.metric in QUALITY_METRICS]
    spent = {sev: sum(rules.budget(r) for r in mine if r.severity == sev) for sev in {r.severity for r in mine}}
    return RuleSet(rules=mine, false_alarms_per_week={sev: b for sev, b in spent.items() if b > 0})


def quality_budget(path: str | None = None) -> dict[str, float]:
    """The false alarms a week the benchmark's rules may give together, per severity (their share of the file's)."""
    return quality_rules(path).false_alarms_per_week


# ---- the deployments ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Deployment:
    """Streams that share one false-alarm budget, run for `hours` from the origin."""

    name: str
    streams: tuple[Stream, ...]
    hours: float
    planted: bool
    start_h: float = WARMUP / timedelta(hours=1)  # the first round (a whole number of steps after WARMUP)


def quiet_streams(apps: int, rng_seed: int, prefix: str = "quiet") -> list[Stream]:
    """Steady, diurnal, an equal new version at day 2, an equal new model at day 3, low traffic: in turn; from GOOD
    and BASE alternately."""
    rng = np.random.default_rng(rng_seed)
    out = []
    for i in range(apps):
        kind = i % 5
        mix = GOOD if i % 2 == 0 else BASE
        rate = 0.5 if kind == 4 else float(rng.choice([1.0, 2.0, 5.0, 10.0]))
        m = "model-a"
        phases = [Phase(0, ((m, "v1", 1.0, mix),))]
        if kind == 2:
            phases.append(Phase(48 + float(rng.uniform(0, 24)), ((m, "v2", 1.0, mix),)))
        if kind == 3:
            phases.append(Phase(72 + float(rng.uniform(0, 24)), (("model-b", "v1", 1.0, mix),)))
        out.append(
            Stream(
                f"{prefix}-{i:03d}",
                rate,
                phases,
                diurnal=0.6 if kind in (1, 2, 3) else 0.0,
                follow_ups=QUIET_FOLLOW_UPS,
                shape=["steady", "diurnal", "new version", "new model", "low traffic"][kind],
                pre=mix,
                post=mix,
            )
        )
    return out


QUIET_FOLLOW_UPS = 0.4
FOLLOW_UPS = 0.5  # the follow-up case: half the app's judged turns are follow-ups
FOLLOW_UP_SHAPE = "follow-ups lose the thread"
RELEASE = moved(BASE, 0.28)  # .75 -> .47
DRIFTED = moved(BASE, 0.30)  # .75 -> .45
MODEST = moved(BASE, 0.12)  # .75 -> .63


def issue_streams() -> list[Stream]:
    """The issue's six cases, a regression confined to follow-up turns (issue 43) and five unchanged apps (two split
    between two models): 12 apps, 19 segments."""
    m, c = "model-a", CHANGE_H
    before = Phase(0, ((m, "v1", 1.0, BASE),))
    cases = [
        ("full release", 2.1, [before, Phase(c, ((m, "v2", 1.0, RELEASE),))], RELEASE, 1.0, None, 0.0),
        (
            "10% canary",
            3.2,
            [before, Phase(c, ((m, "v1", 0.9, BASE), (m, "v2", 0.1, CANARY_BAD)))],
            CANARY_BAD,
            0.1,
            None,
            0.0,
        ),
        ("model swap", 2.1, [before, Phase(c, (("model-b", "v1", 1.0, RELEASE),))], RELEASE, 1.0, None, 0.0),
        ("drift, no version change", 2.0, [before], DRIFTED, 1.0, None, 1.0),
        ("modest release", 4.0, [before, Phase(c, ((m, "v2", 1.0, MODEST),))], MODEST, 1.0, None, 0.0),
        (
            "rollback after 3 h",
            1.9,
            [before, Phase(c, ((m, "v2", 1.0, RELEASE),)), Phase(c + 3, ((m, "v1", 1.0, BASE),))],
            RELEASE,
            1.0,
            c + 3,
            0.0,
        ),
    ]
    out = [
        Stream(
            f"{name.split()[0].replace('%', 'pct').replace(',', '')}-{i:02d}",
            rate,
            phases,
            change_h=c,
            rollback_h=rollback,
            changed_share=share,
            drift_h=drift,
            shape=name,
            pre=BASE,
            post=post,
        )
        for i, (name, rate, phases, post, share, rollback, drift) in enumerate(cases)
    ]
    # The app stops passing the conversation to its model (no version changes): the follow-ups fall as a bad release
    # does, the first turns hold. The same drop in a new prompt version is also the rollout rules' to find.
    out.append(
        Stream(
            f"follow-ups-{len(out):02d}",
            2.0,
            [before, Phase(c, ((m, "v1", 1.0, RELEASE),))],
            change_h=c,
            follow_ups=FOLLOW_UPS,
            follow_ups_only=True,
            shape=FOLLOW_UP_SHAPE,
            pre=BASE,
            post=RELEASE,
        )
    )
    for i, (rate, split) in enumerate(((1.0, False), (2.0, True), (3.0, False), (1.5, True), (2.5, False))):
        mix = GOOD if i % 2 else BASE
        arms = ((m, "v1", 0.5, mix), ("model-b", "v1", 0.5, mix)) if split else ((m, "v1", 1.0, mix),)
        out.append(Stream(f"unchanged-{i:02d}", rate, [Phase(0, arms)], shape="unchanged", pre=mix, post=mix))
    return out


def legacy_streams(rate: float) -> list[Stream]:
    """The older shapes at one rate: from GOOD, probability moved from the top score to the bottom one."""
    tag = f"{rate:g}"
    m, c = "model-a", LEGACY_CHANGE_H
    bad, big, small = shifted(0.2), shifted(0.3), shifted(0.1)
    before = Phase(0, ((m, "v1", 1.0, GOOD),))
    shapes = [
        ("full release", [before, Phase(c, ((m, "v2", 1.0, bad),))], bad, 1.0, None, 0.0),
        ("10% canary", [before, Phase(c, ((m, "v1", 0.9, GOOD), (m, "v2", 0.1, bad)))], bad, 0.1, None, 0.0),
        ("1% canary", [before, Phase(c, ((m, "v1", 0.99, GOOD), (m, "v2", 0.01, big)))], big, 0.01, None, 0.0),
        ("model swap", [before, Phase(c, (("model-b", "v1", 1.0, bad),))], bad, 1.0, None, 0.0),
        ("drift, no version change", [before], bad, 1.0, None, 3.0),
        ("small drop (0.1)", [before, Phase(c, ((m, "v2", 1.0, small),))], small, 1.0, None, 0.0),
        ("large drop (0.3)", [before, Phase(c, ((m, "v2", 1.0, big),))], big, 1.0, None, 0.0),
        (
            "rollback after 3 h",
            [before, Phase(c, ((m, "v2", 1.0, bad),)), Phase(c + 3, ((m, "v1", 1.0, GOOD),))],
            bad,
            1.0,
            c + 3,
            0.0,
        ),
    ]
    return [
        Stream(
            f"{name.split()[0].replace('%', 'pct')}-{i:02d}-at-{tag}",
            rate,
            phases,
            change_h=c,
            rollback_h=rollback,
            changed_share=share,
            drift_h=drift,
            shape=f"legacy {name}",
            pre=GOOD,
            post=post,
        )
        for i, (name, phases, post, share, rollback, drift) in enumerate(shapes)
    ]


def planted_deployments(
    legacy_rates: Sequence[float] = (0.5, 2.0, 10.0),
    issue_hours: float = PLANTED_HOURS,
    legacy_hours: float = LEGACY_HOURS,
    issue_start_h: float = WARMUP / timedelta(hours=1),
    legacy_start_h: float = LEGACY_START_H,
) -> list[Deployment]:
    """The issue's deployment and one deployment of the older shapes per rate (their first rounds at the
    `*_start_h`, a whole number of steps after WARMUP)."""
    out = [Deployment("issue", tuple(issue_streams()), issue_hours, True, issue_start_h)]
    out += [
        Deployment(f"legacy-{r:g}", tuple(legacy_streams(r)), legacy_hours, True, legacy_start_h) for r in legacy_rates
    ]
    return out


def quiet_deployments(count: int, apps: int, days: float, seed: int) -> list[Deployment]:
    """`count` quiet deployments of `apps` apps for `days` days."""
    return [
        Deployment(f"quiet-{seed}-{k}", tuple(quiet_streams(apps, seed * 100 + k, f"quiet{k}")), days * 24, False)
        for k in range(count)
    ]


def detector_segments(streams: Sequence[Stream], at_h: float, window_h: float) -> int:
    """The (app, model, prompt_version) segments with traffic in the window of `window_h` hours ending at `at_h`:
    the segments the detector rule's budget is shared by in that round."""
    found: set[tuple[str, str, str]] = set()
    for s in streams:
        for i, phase in enumerate(s.phases):
            end = s.phases[i + 1].start_h if i + 1 < len(s.phases) else math.inf
            if phase.start_h < at_h and end > at_h - window_h:
                found.update((s.app, model, version) for model, version, share, _ in phase.arms if share > 0)
    return len(found)


# ---- one backtest, in a worker ----------------------------------------------------------------------------------


def _pages(report: BacktestReport, app: str) -> list[Episode]:
    return [e for e in report.fired() if dict(e.segment).get("app") == app and e.severity == "page"]


def _first_after(pages: Sequence[Episode], change: datetime) -> list[Episode]:
    return sorted((e for e in pages if e.fired_at is not None and e.fired_at >= change), key=_fired)


def _tickets(report: BacktestReport, app: str) -> list[Episode]:
    return [e for e in report.fired() if dict(e.segment).get("app") == app and e.severity == "ticket"]


def _minutes(at: datetime | None, since: datetime) -> float | None:
    return (at - since).total_seconds() / 60 if at is not None else None


def run_deployment(deployment: Deployment, seed: int, step_min: int, rules_path: str | None) -> dict[str, Any]:
    """Simulate and backtest one deployment; its figures (planted: per stream; quiet: false pages and tickets)."""
    started, cpu = time.perf_counter(), time.process_time()
    rules = quality_rules(rules_path)
    step = timedelta(minutes=step_min)
    minutes = simulate(deployment.streams, deployment.hours, seed)
    until = ORIGIN + timedelta(hours=deployment.hours)
    since = ORIGIN + timedelta(hours=deployment.start_h)
    report = backtest(rules, minutes, ORIGIN, since, until, step)
    days = (until - since) / timedelta(days=1)
    out: dict[str, Any] = {"deployment": deployment.name, "seed": seed, "days": days, "streams": []}
    for s in deployment.streams:
        pages, tickets = _pages(report, s.app), _tickets(report, s.app)
        row: dict[str, Any] = {"app": s.app, "shape": s.shape, "rate": s.rate}
        if s.change_h is None:
            row |= {"false_pages": [e.rule for e in pages], "false_tickets": [e.rule for e in tickets]}
        else:
            change = ORIGIN + timedelta(hours=s.change_h)
            # The relevancy rules' first page; the users' feedback detector's is reported beside it.
            after = _first_after([e for e in pages if e.rule != FEEDBACK_RULE], change)
            first = after[0] if after else None
            by_users = _first_after([e for e in pages if e.rule == FEEDBACK_RULE], change)
            row |= {
                "delay_min": _minutes(first.fired_at, change) if first is not None else None,
                "rule": first.rule if first is not None else None,
                "feedback_delay_min": _minutes(by_users[0].fired_at, change) if by_users else None,
                "false_pages": [e.rule for e in pages if e.fired_at is not None and e.fired_at < change],
                "false_tickets": [e.rule for e in tickets if e.fired_at is not None and e.fired_at < change],
            }
            if s.rollback_h is not None:
                back = ORIGIN + timedelta(hours=s.rollback_h)
                ends = [
                    (e.resolved_at - back).total_seconds() / 60 if e.resolved_at is not None else math.inf
                    for e in after
                    if e.fired_at is not None and e.fired_at <= back
                ]
                row["resolved_after_rollback_min"] = max(ends) if ends else None
            elif s.change_h + 48 < deployment.hours:
                at_48h = change + timedelta(hours=48)
                row["firing_48h_on"] = any(
                    e.fired_at is not None
                    and e.fired_at <= at_48h
                    and (e.resolved_at is None or e.resolved_at > at_48h)
                    for e in after
                )
        out["streams"].append(row)
    out["segment_days"] = (
        sum(
            detector_segments(deployment.streams, float(h), 1.0)
            for h in np.arange(deployment.start_h, deployment.hours)
        )
        / 24
    )
    out["wall_s"], out["cpu_s"] = time.perf_counter() - started, time.process_time() - cpu
    return out


def _fired(e: Episode) -> datetime:
    assert e.fired_at is not None
    return e.fired_at


# ---- the reference and the figures ------------------------------------------------------------------------------


def oracle_delay_min(stream: Stream) -> float:
    """Minutes a once-run one-sided z-test at the change point would need for even odds, at the oracle's false rate."""
    z = float(stats.norm.ppf(1 - ALLOWED_PER_SEGMENT_DAY))
    _, sd = mean_sd(stream.pre)
    ramp = stream.drift_h * 60 / 2  # a linear drift reaches its mean drop half-way
    return (z * sd / stream.drop) ** 2 / stream.changed_rate + ramp


def reference(
    stream: Stream,
    segments: int,
    per_week: float,
    step_min: int,
    seed: int = 0,
    paths: int | None = None,
) -> dict[str, Any]:
    """The optimal detector's figures for one planted stream (`bench.optimal_cusum.optimal`) at the ARL0 the budget
    gives its changed segment: `Budget(per_week, segments).arl_events(rate)`; `paths`: see `mc_paths`."""
    assert stream.change_h is not None
    rate_per_min = stream.changed_rate
    arl = Budget(per_week, segments).arl_events(rate_per_min / 60)
    arrivals = Arrivals(rate_per_min, stream.diurnal, stream.change_h * 60, stream.drift_h * 60)
    phase = (stream.change_h * 60 - WARMUP / timedelta(minutes=1)) % step_min
    best = optimal(
        stream.pre, stream.post, arl, arrivals, seed, step_min=step_min, phase_min=-phase % step_min, **mc_paths(paths)
    )
    return {"segments": segments, "per_week": per_week, **best.as_dict()}


def page_budget(rules_path: str | None, rule: str = DETECTOR_RULE) -> float:
    """The shipped rules' false pages a week for a detector rule (`RuleSet.budget`; relevancy_drop by default)."""
    rules = load_rules(rules_path)
    return rules.budget(next(r for r in rules.rules if r.name == rule))


def feedback_rate(stream: Stream) -> float:
    """Feedback events a minute in the changed stream's segment (before the diurnal swing): the whole app's for a
    change confined to follow-ups (feedback has no turns), else the changed traffic's."""
    return (stream.rate if stream.follow_ups_only else stream.changed_rate) * ANSWERS_PER_JUDGED * FEEDBACK_SHARE


def feedback_shares(stream: Stream) -> tuple[float, float]:
    """The negative share of the changed segment's feedback before and after the change (for a change confined to
    follow-ups, the mixture of unchanged first turns and changed follow-ups)."""
    before, after = negative_share(stream.pre), negative_share(stream.post)
    if stream.follow_ups_only:
        after = (1 - stream.follow_ups) * before + stream.follow_ups * after
    return before, after


def mc_paths(paths: int | None) -> dict[str, int]:
    """`optimal`'s Monte Carlo paths: its own (4,000 delay paths, 20,000 for the threshold) without `paths`, else
    `paths` delay paths and five times as many for the threshold (a smoke run's optimum is cheaper, and coarser)."""
    return {} if paths is None else {"paths": paths, "threshold_paths": 5 * paths}


def feedback_reference(
    stream: Stream, segments: int, per_week: float, step_min: int, seed: int = 0, paths: int | None = None
) -> dict[str, Any]:
    """The optimal detector on the changed segment's feedback: the likelihood-ratio CUSUM that knows the Bernoulli
    thumbs-down probability before and after, at the ARL0 the feedback rule's budget gives the segment at its
    feedback rate."""
    assert stream.change_h is not None
    rate = feedback_rate(stream)
    before, after = feedback_shares(stream)
    arl = Budget(per_week, segments).arl_events(rate / 60)
    arrivals = Arrivals(rate, stream.diurnal, stream.change_h * 60, stream.drift_h * 60)
    phase = (stream.change_h * 60 - WARMUP / timedelta(minutes=1)) % step_min
    pre, post = np.array([1 - before, before]), np.array([1 - after, after])
    best = optimal(pre, post, arl, arrivals, seed, step_min=step_min, phase_min=-phase % step_min, **mc_paths(paths))
    return {"segments": segments, "per_week": per_week, "feedback_per_min": rate, **best.as_dict()}


def _poisson_interval(n: int, exposure: float) -> list[float]:
    low = float(stats.chi2.ppf(0.025, 2 * n) / 2) if n else 0.0
    high = float(stats.chi2.ppf(0.975, 2 * n + 2) / 2)
    return [low / exposure, high / exposure]


def quiet_figures(runs: Sequence[dict[str, Any]], budget: dict[str, float], share: dict[str, float]) -> dict[str, Any]:
    """False pages and tickets per deployment-week over the quiet deployments, with exact Poisson 95 % intervals,
    against the whole deployment's `budget` and the `share` of it the benchmark's rules have."""
    weeks = sum(r["days"] for r in runs) / 7
    pages = [rule for r in runs for s in r["streams"] for rule in s["false_pages"]]
    tickets = [rule for r in runs for s in r["streams"] for rule in s["false_tickets"]]
    return {
        "deployments": len(runs),
        "deployment_weeks": weeks,
        "segment_days": sum(r["segment_days"] for r in runs),
        "false_pages": len(pages),
        "pages_per_week": len(pages) / weeks,
        "pages_interval_95": _poisson_interval(len(pages), weeks),
        "page_budget": budget.get("page", 1.0),
        "page_budget_of_these_rules": share.get("page", 0.0),
        "pages_by_rule": {k: pages.count(k) for k in sorted(set(pages))},
        "false_tickets": len(tickets),
        "tickets_per_week": len(tickets) / weeks,
        "tickets_interval_95": _poisson_interval(len(tickets), weeks),
        "ticket_budget": budget.get("ticket", 3.0),
        "ticket_budget_of_these_rules": share.get("ticket", 0.0),
        "tickets_by_rule": {k: tickets.count(k) for k in sorted(set(tickets))},
        "by_shape": {
            shape: sum(len(s["false_pages"]) for r in runs for s in r["streams"] if s["shape"] == shape)
            for shape in sorted({s["shape"] for r in runs for s in r["streams"]})
        },
    }


def _observed(delays: Sequence[float | None], run_min: float) -> tuple[float | None, bool]:
    """The mean delay over seeds (a seed that never paged counts the whole run after the change), and whether that
    makes it a lower bound."""
    observed = statistics.fmean(run_min if x is None else x for x in delays) if delays else None
    return observed, any(x is None for x in delays)


def planted_figures(
    deployments: Sequence[Deployment],
    runs: Sequence[dict[str, Any]],
    per_week: float,
    step_min: int,
    segments: int | None = None,
    feedback_per_week: float | None = None,
    paths: int | None = None,
) -> list[dict[str, Any]]:
    """Per planted case: the optimum, the observed delays per seed, their mean and the ratio; with
    `feedback_per_week` (the feedback rule's budget), the same for `feedback_negative_rise` under `feedback`;
    `paths`: see `mc_paths`."""
    window_h = next(r for r in load_rules().rules if r.name == DETECTOR_RULE).window / timedelta(hours=1)
    out = []
    for d in deployments:
        change_h = next(s.change_h for s in d.streams if s.change_h is not None)
        n_segments = segments or detector_segments(d.streams, change_h + step_min / 60, window_h)
        mine = [r for r in runs if r["deployment"] == d.name]
        for s in d.streams:
            if s.change_h is None:
                continue
            per_seed = {r["seed"]: next(x for x in r["streams"] if x["app"] == s.app) for r in mine}
            delays = [x["delay_min"] for x in per_seed.values()]
            seen = [x for x in delays if x is not None]
            best = reference(s, n_segments, per_week, step_min, paths=paths)
            # A seed that never paged counts the whole run after the change: the mean is then a lower bound.
            censored = len(seen) < len(delays)
            run_min = (d.hours - s.change_h) * 60
            observed = statistics.fmean(run_min if x is None else x for x in delays) if delays else None
            row: dict[str, Any] = {
                "deployment": d.name,
                "shape": s.shape,
                "rate": s.rate,
                "changed_rate": s.changed_rate,
                "pre_mean": mean_sd(s.pre)[0],
                "post_mean": mean_sd(s.post)[0],
                "drop": s.drop,
                "optimal": best,
                "optimal_min": best["mean_min"],
                "observed_min": observed,
                "observed_is_lower_bound": censored,
                "observed_by_seed": {str(k): v["delay_min"] for k, v in per_seed.items()},
                "rule_by_seed": {str(k): v["rule"] for k, v in per_seed.items()},
                "paged": f"{len(seen)} of {len(delays)}",
                "ratio": observed / best["mean_min"] if observed is not None and best["mean_min"] > 0 else None,
                "oracle_min": oracle_delay_min(s),
                "false_pages_before_change": sum(len(x["false_pages"]) for x in per_seed.values()),
            }
            if s.rollback_h is not None:
                row["resolved_after_rollback_min"] = {
                    str(k): v.get("resolved_after_rollback_min") for k, v in per_seed.items()
                }
            if any("firing_48h_on" in v for v in per_seed.values()):
                row["firing_48h_on"] = {str(k): v.get("firing_48h_on") for k, v in per_seed.items()}
            if feedback_per_week is not None:
                row["feedback"] = _feedback_figures(
                    s, per_seed, n_segments, feedback_per_week, step_min, run_min, paths
                )
            out.append(row)
    return out


def _feedback_figures(
    stream: Stream,
    per_seed: dict[int, dict[str, Any]],
    segments: int,
    per_week: float,
    step_min: int,
    run_min: float,
    paths: int | None = None,
) -> dict[str, Any]:
    """`feedback_negative_rise` on one planted case: its optimum, the observed delays per seed, their mean and the
    ratio."""
    best = feedback_reference(stream, segments, per_week, step_min, paths=paths)
    delays = [x.get("feedback_delay_min") for x in per_seed.values()]
    observed, censored = _observed(delays, run_min)
    before, after = feedback_shares(stream)
    return {
        "feedback_per_min": feedback_rate(stream),
        "pre_share": before,
        "post_share": after,
        "optimal": best,
        "optimal_min": best["mean_min"],
        "observed_min": observed,
        "observed_is_lower_bound": censored,
        "observed_by_seed": {str(k): v.get("feedback_delay_min") for k, v in per_seed.items()},
        "paged": f"{sum(x is not None for x in delays)} of {len(delays)}",
        "ratio": observed / best["mean_min"] if observed is not None and best["mean_min"] > 0 else None,
    }


def _ratios(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    rated = [r for r in rows if r["ratio"] is not None]
    if not rated:
        return {"median_ratio": None, "worst_ratio": None, "worst_case": None}
    worst = max(rated, key=lambda r: r["ratio"])
    return {
        "median_ratio": statistics.median(r["ratio"] for r in rated),
        "worst_ratio": worst["ratio"],
        "worst_case": f"{worst['shape']} at {worst['rate']:g}/min"
        + (", a lower bound: a seed did not page" if worst["observed_is_lower_bound"] else ""),
        "median_optimal_min": statistics.median(r["optimal_min"] for r in rows),
        "median_observed_min": statistics.median(r["observed_min"] for r in rated),
    }


def summary(
    quiet: dict[str, Any], planted: list[dict[str, Any]], planted_runs: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """The issue's bars: ratios to the optimum, the whole deployment's false pages and tickets against the budget,
    every drop of 0.1 or more the optimum catches within 6 h paged, the rollback resolved, a regression persisting."""
    misses = [
        f"{r['shape']} at {r['rate']:g}/min, seed {seed}"
        for r in planted
        if r["drop"] >= 0.1 - 1e-9 and r["optimal_min"] <= CATCH_WITHIN_MIN
        for seed, delay in r["observed_by_seed"].items()
        if delay is None
    ]
    rollbacks = [m for r in planted for m in r.get("resolved_after_rollback_min", {}).values()]
    persisting = [v for r in planted for v in r.get("firing_48h_on", {}).values()]
    follow_ups = [r for r in planted if r["shape"] == FOLLOW_UP_SHAPE]
    unchanged_pages = sum(
        len(s["false_pages"]) for run in planted_runs for s in run["streams"] if s["shape"] == "unchanged"
    )
    return {
        "issue_cases": _ratios([r for r in planted if r["deployment"] == "issue"]),
        "all_cases": _ratios(planted),
        "pages_per_week": quiet["pages_per_week"],
        "pages_interval_95": quiet["pages_interval_95"],
        "page_budget": quiet["page_budget"],
        "tickets_per_week": quiet["tickets_per_week"],
        "tickets_interval_95": quiet["tickets_interval_95"],
        "ticket_budget": quiet["ticket_budget"],
        "caught_drops_missed": misses,
        "rollback_resolved_min": rollbacks,
        "rollback_limit_min": ROLLBACK_LIMIT_MIN,
        "persisting_firing_48h": f"{sum(bool(v) for v in persisting)} of {len(persisting)}",
        "planted_false_pages": unchanged_pages + sum(r["false_pages_before_change"] for r in planted),
        "follow_up_regression": {
            "paged": [r["paged"] for r in follow_ups],
            "rules": sorted({rule for r in follow_ups for rule in r["rule_by_seed"].values() if rule}),
        },
        "feedback": _feedback_summary(quiet, planted),
    }


def _feedback_summary(quiet: dict[str, Any], planted: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """`feedback_negative_rise` over the run: its false pages on the quiet deployments, the planted cases it paged on
    in every seed, and its ratios to its optimum where both are finite."""
    rows = [r["feedback"] for r in planted if "feedback" in r]
    rated = [x for x in rows if x["ratio"] is not None and not x["observed_is_lower_bound"]]
    return {
        "false_pages": quiet["pages_by_rule"].get(FEEDBACK_RULE, 0),
        "cases": len(rows),
        "paged_every_seed": sum(1 for x in rows if not x["observed_is_lower_bound"]),
        "median_ratio": statistics.median(x["ratio"] for x in rated) if rated else None,
        "worst_ratio": max((x["ratio"] for x in rated), default=None),
    }


def _feedback_lines(result: dict[str, Any]) -> Iterator[str]:
    """The planted cases as `feedback_negative_rise` saw them, beside the relevancy rules' table."""
    rows = [r for r in result["planted"] if "feedback" in r]
    if not rows:
        return
    yield (
        f"  users' feedback ({FEEDBACK_RULE}; {FEEDBACK_SHARE:.0%} of the answers, {ANSWERS_PER_JUDGED:g} a judged "
        "one, get a thumbs, down with P "
        f"{' / '.join(f'{p:g}' for p in NEGATIVE_BY_LEVEL)} at scores 0 .. 1):"
    )
    yield (
        "    case (negative share pre -> post)                   feedback/min  ARL0 events  optimal min  observed min  "
        "ratio"
    )
    for r in rows:
        f = r["feedback"]
        bound = ">" if f["observed_is_lower_bound"] else " "
        case = f"{r['shape']} ({f['pre_share']:.2f} -> {f['post_share']:.2f})"
        paged = "" if f["paged"].split()[0] == f["paged"].split()[-1] else f"  paged {f['paged']}"
        yield (
            f"    {case:<51} {f['feedback_per_min']:>12.3g}  {f['optimal']['arl0_target_events']:>11,.0f}  "
            f"{_num(f['optimal_min'], '.1f', 11)}  {bound}{_num(f['observed_min'], '.1f', 11)}  "
            f"{bound}{_num(f['ratio'], '.2f', 4)}{paged}"
        )


def _num(x: float | None, fmt: str, width: int) -> str:
    return f"{x:{width}{fmt}}" if x is not None and math.isfinite(x) else f"{'-':>{width}}"


def report_lines(result: dict[str, Any]) -> Iterator[str]:
    """The tables, as they go into BENCHMARKS.md."""
    q, s = result["quiet"], result["summary"]
    yield (
        f"alert quality ({result['rules']}), seeds {' '.join(map(str, result['seeds']))}, step {result['step']}, "
        f"wall {result['wall_s'] / 60:.1f} min ({result['cpu_s'] / 60:.1f} CPU-min in the backtests; load "
        f"{result['load_average'][0]:.1f} at the end)"
    )
    yield (
        f"  quiet: {q['deployments']} deployments, {q['deployment_weeks']:.1f} deployment-weeks, "
        f"{q['segment_days']:.0f} detector segment-days"
    )
    yield (
        f"    false pages {q['false_pages']} = {q['pages_per_week']:.2f}/week (95 % {q['pages_interval_95'][0]:.2f}-"
        f"{q['pages_interval_95'][1]:.2f}; budget {q['page_budget']:g}, of which these rules "
        f"{q['page_budget_of_these_rules']:.2g}) {q['pages_by_rule']}"
    )
    yield (
        f"    false tickets {q['false_tickets']} = {q['tickets_per_week']:.2f}/week (95 % "
        f"{q['tickets_interval_95'][0]:.2f}-{q['tickets_interval_95'][1]:.2f}; budget {q['ticket_budget']:g}, "
        f"of which these rules {q['ticket_budget_of_these_rules']:.2g}) {q['tickets_by_rule']}"
    )
    yield (
        "  planted: case (pre -> post mean)                   judged/min  segs  ARL0 events  optimal min (steady)  "
        "observed min  ratio  oracle  after"
    )
    for r in result["planted"]:
        o = r["optimal"]
        after = ""
        if "resolved_after_rollback_min" in r:
            after = "resolved " + ", ".join(_num(v, ".0f", 0) for v in r["resolved_after_rollback_min"].values())
            after += " min after the rollback"
        elif "firing_48h_on" in r:
            after = f"firing 48 h on: {sum(bool(v) for v in r['firing_48h_on'].values())} of {len(r['firing_48h_on'])}"
        if r["paged"].split()[0] != r["paged"].split()[-1]:
            after = f"paged {r['paged']}; {after}"
        case = f"{r['shape']} ({r['pre_mean']:.2f} -> {r['post_mean']:.2f})"
        bound = ">" if r["observed_is_lower_bound"] else " "
        yield (
            f"    {case:<46} {r['changed_rate']:>10.3g}  {o['segments']:>4}  {o['arl0_target_events']:>11,.0f}  "
            f"{o['mean_min']:>7.1f} ({o['steady_mean_min']:>6.1f})      {bound}{_num(r['observed_min'], '.1f', 11)}  "
            f"{bound}{_num(r['ratio'], '.2f', 4)}  {r['oracle_min']:>6.1f}  {after}"
        )
    yield from _feedback_lines(result)
    for name, label in (("issue_cases", "issue's cases"), ("all_cases", "all cases")):
        x = s[name]
        yield (
            f"  {label}: median ratio {_num(x['median_ratio'], '.2f', 0)}, worst {_num(x['worst_ratio'], '.2f', 0)} "
            f"({x['worst_case']})"
        )
    yield (
        f"  summary: false pages {s['pages_per_week']:.2f}/week (budget {s['page_budget']:g}), false tickets "
        f"{s['tickets_per_week']:.2f}/week (budget {s['ticket_budget']:g}) over the quiet deployments; "
        f"{s['planted_false_pages']} false pages in the planted runs"
    )
    missed = "; ".join(s["caught_drops_missed"]) or "none"
    rollbacks = ", ".join(_num(v, ".0f", 0) for v in s["rollback_resolved_min"])
    f = s["follow_up_regression"]
    yield (
        f"  a regression confined to follow-up turns: paged {', '.join(f['paged']) or '-'} (first page by "
        f"{', '.join(f['rules']) or 'none'})"
    )
    yield (
        f"  every drop >= 0.1 the optimum catches within 6 h pages: misses {missed}; rollback resolved {rollbacks} "
        f"min (limit {s['rollback_limit_min']:g}); persisting regression firing 48 h on: {s['persisting_firing_48h']}"
    )
    fb = s["feedback"]
    yield (
        f"  {FEEDBACK_RULE}: {fb['false_pages']} false pages on the quiet deployments (in the page total above); paged "
        f"in every seed on {fb['paged_every_seed']} of {fb['cases']} planted cases; median ratio "
        f"{_num(fb['median_ratio'], '.2f', 0)}, worst {_num(fb['worst_ratio'], '.2f', 0)} (cases paged in every seed)"
    )


def main(
    seeds: Sequence[int] = DEFAULT_SEEDS,
    quiet_apps: int = 15,
    quiet_days: float = 8.0,
    quiet_per_seed: int = 2,
    legacy_rates: Sequence[float] = (0.5, 2.0, 10.0),
    step_min: int = 5,
    rules_path: str | None = None,
    json_path: Path | None = DEFAULT_JSON,
    issue_hours: float = PLANTED_HOURS,
    legacy_hours: float = LEGACY_HOURS,
    segments: int | None = None,
    workers: int = 2,
    issue_start_h: float = WARMUP / timedelta(hours=1),
    legacy_start_h: float = LEGACY_START_H,
    paths: int | None = None,
) -> dict[str, Any]:
    """Run the planted and quiet deployments for every seed (in `workers` processes) and print the tables;
    `segments` overrides the detector segments each planted deployment's budget is shared by (default: counted);
    `paths` the optimum's Monte Carlo paths (`mc_paths`; default: its own)."""
    started = time.perf_counter()
    planted = planted_deployments(legacy_rates, issue_hours, legacy_hours, issue_start_h, legacy_start_h)
    jobs = [(d, seed) for seed in seeds for d in quiet_deployments(quiet_per_seed, quiet_apps, quiet_days, seed)]
    jobs += [(d, seed) for seed in seeds for d in planted]
    jobs.sort(key=lambda j: -j[0].hours * len(j[0].streams))  # longest first
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            futures = [pool.submit(run_deployment, d, seed, step_min, rules_path) for d, seed in jobs]
            runs = [f.result() for f in futures]
    else:
        runs = [run_deployment(d, seed, step_min, rules_path) for d, seed in jobs]
    budget = load_rules(rules_path).false_alarms_per_week
    quiet_runs = [r for r in runs if r["deployment"].startswith("quiet")]
    planted_runs = [r for r in runs if not r["deployment"].startswith("quiet")]
    per_week = page_budget(rules_path)
    engine_per_week = quality_rules(rules_path).budget(
        next(r for r in quality_rules(rules_path).rules if r.name == DETECTOR_RULE)
    )
    q_fig = quiet_figures(quiet_runs, budget, quality_budget(rules_path))
    feedback_per_week = page_budget(rules_path, FEEDBACK_RULE)
    p_fig = planted_figures(planted, planted_runs, per_week, step_min, segments, feedback_per_week, paths)
    result = {
        "rules": rules_path or "the shipped default rules",
        "seeds": list(seeds),
        "step": f"{step_min}m",
        "detector_budget_per_week": per_week,
        "feedback_budget_per_week": feedback_per_week,
        "engine_budget_per_week": engine_per_week,
        "quiet": q_fig,
        "planted": p_fig,
        "summary": summary(q_fig, p_fig, planted_runs),
        "runs": runs,
        "wall_s": time.perf_counter() - started,
        "cpu_s": sum(r["cpu_s"] for r in runs),  # the backtests' (a busy machine stretches wall time, not this)
        "load_average": list(os.getloadavg()),
    }
    lines = list(report_lines(result))
    if engine_per_week != per_week:
        lines.append(
            f"  NOTE: the benchmark's rule subset gives {DETECTOR_RULE} {engine_per_week:g} false pages a week, the "
            f"shipped file {per_week:g}"
        )
    emit(lines, result, json_path)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(DEFAULT_SEEDS))
    parser.add_argument("--quiet-apps", type=int, default=15, help="apps per quiet deployment (default 15)")
    parser.add_argument("--quiet-days", type=float, default=8.0, help="days per quiet deployment (default 8)")
    parser.add_argument("--quiet-per-seed", type=int, default=2, help="quiet deployments per seed (default 2)")
    parser.add_argument("--rules", default=None, help="a rules file (default: the shipped rules)")
    parser.add_argument(
        "--segments",
        type=int,
        default=None,
        help="detector segments sharing a planted deployment's page budget (default: counted from its streams)",
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = parser.parse_args()
    main(
        args.seeds,
        args.quiet_apps,
        args.quiet_days,
        args.quiet_per_seed,
        rules_path=args.rules,
        json_path=args.json,
        segments=args.segments,
        workers=args.workers,
    )
