"""The backtest's fast path: each rule's history read once and every step evaluated in memory gives the same
observations, states and episodes as one query per rule and step, on data with a rollout, judge errors, silence,
slow scoring, lost coverage, uneven sample rates, a drifting canary and a shadow judge that diverges; the grid;
progress."""

from __future__ import annotations

import dataclasses
import math
import random
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor.alerts.backtest import Progress, backtest_on, backtest_times, read_history, run_backtest
from monitor.alerts.engine import Evaluation, evaluate_rules
from monitor.alerts.history import SCORE_SUMS, Grid, buckets_at, build_history, grid_for
from monitor.alerts.rules import RuleSet
from monitor.alerts.sequential import Reference, cusum
from monitor.alerts.sources import StoreData
from monitor.alerts.windows import Windows, windows_for
from monitor.store.connection import ClickHouseStore
from monitor.store.migrations import Migrations
from schemas.scored import ScoredRow
from tests.monitor.alerts.conftest import (
    T0,
    AnsweredOnce,
    canary_run,
    default_rules,
    insert,
    insert_canary,
    insert_traffic,
    make_row,
    rules_from,
)
from tests.monitor.alerts.feedback_rows import Thumb, insert_feedback

DAY2 = T0 + timedelta(days=1)  # the interesting stretch starts here, with a day of history before it
ROLLOUT, ERRORS, SILENCE, SLOW, LOST = (DAY2 + timedelta(hours=h) for h in (1, 2, 2.5, 3, 3.5))
DRIFT = DAY2 + timedelta(hours=1, minutes=30)  # the canary's judge scores 0.3 lower for an hour, then fails on a run
SHADOW_OFF = DAY2 - timedelta(hours=5)  # from here the shadow judge of a's first event each minute scores at random

# Rules the default set does not cover: p10 with its tail counts, a lag against the day before, and a window of
# 90 s, which is not a grid of whole minutes and so is queried step by step inside the same backtest.
EXTRA_RULES = """
- name: p10_drop
  metric: p10
  segment_by: [app]
  window: 30m
  baseline: {trailing: 6h}
  condition: {change: {fire: 0.15, clear: 0.05}}
  min_events: 30
  min_baseline_events: 100
  for: 5m
- name: lag_vs_yesterday
  metric: scoring_lag_p90
  segment_by: [app]
  window: 20m
  baseline: {previous_days: 1}
  condition: {relative_change: {fire: 2.0, clear: 1.0}}
  min_events: 10
  min_baseline_events: 10
- name: odd_window
  metric: mean_score
  segment_by: [app]
  window: 90s
  condition: {threshold: {fire: 0.6, clear: 0.65}}
  min_events: 2
  alpha: 0.2
"""


def _history_rows() -> list[ScoredRow]:
    """Two apps over T0 .. DAY2+4h: b judged at uneven rates on two models; then a regressing rollout in a,
    a burst of judge errors in b, b silent for half an hour, slow scoring in a."""
    rng = random.Random(11)
    rows = []
    t = T0
    while t < DAY2 + timedelta(hours=4):
        for k in range(3):
            at = t + timedelta(seconds=20 * k + rng.random())
            new = t >= ROLLOUT and k < 2
            score = rng.gauss(0.45 if new else 0.78, 0.15)
            row = make_row(
                at,
                app="a",
                prompt_version="v2" if new else "v1",
                score=min(1.0, max(0.0, score)),
                lag_s=900 if SLOW <= t < SLOW + timedelta(minutes=30) else 5 + rng.random() * 5,
            )
            rows.append(row)
            if k == 0:  # the shadow judge's second row of the event, beside the primary's (scores rounded: ties)
                other = (
                    rng.random() if t >= SHADOW_OFF else min(1.0, max(0.0, (row.score or 0.0) + rng.gauss(0.0, 0.05)))
                )
                rows.append(
                    row.model_copy(
                        update={
                            "judge_id": "js",
                            "score": round(other, 1),
                            "sample_rule": "shadow:base",
                            "sample_rate": 0.3,
                        }
                    )
                )
        if not SILENCE <= t < SILENCE + timedelta(minutes=30):
            for model, rate in (("m1", 1.0), ("m2", 0.25)):
                error = ERRORS <= t < ERRORS + timedelta(minutes=20) and rng.random() < 0.5
                rows.append(
                    make_row(
                        t + timedelta(seconds=30 + rng.random()),
                        app="b",
                        model=model,
                        status="error" if error else "ok",
                        score=min(1.0, max(0.0, rng.gauss(0.7, 0.2))),
                        sample_rate=rate,
                    )
                )
        t += timedelta(minutes=1)
    return rows


def _fill_history(store: ClickHouseStore) -> None:
    """`_history_rows` and the traffic counts beside them (a's coverage halves at LOST), and the canary's runs."""
    rows = _history_rows()
    insert(store, rows)
    counts: dict[tuple[datetime, str, str, str], int] = {}
    for r in rows:
        key = (r.event_time.replace(second=0, microsecond=0), r.app, r.model, r.prompt_version)
        counts[key] = counts.get(key, 0) + 1
    traffic = [
        (m, a, mo, p, n * 2, n * 2 if a == "a" and LOST <= m < LOST + timedelta(minutes=30) else n)
        for (m, a, mo, p), n in counts.items()
    ]
    insert_traffic(store, traffic)
    runs = []
    for k in range(int((DAY2 + timedelta(hours=4) - T0) / timedelta(minutes=30))):
        at = T0 + timedelta(minutes=30 * k, seconds=7)
        drifted = DRIFT <= at < DRIFT + timedelta(hours=1)
        runs.append(
            canary_run(
                at,
                shift=-0.3 if drifted else 0.0,
                errors=60 if at - LOST < timedelta(minutes=30) and at > LOST else 0,
                seed=k,
            )
        )
    insert_canary(store, runs)
    insert_feedback(store, _thumbs(rows))


def _thumbs(rows: list[ScoredRow]) -> list[Thumb]:
    """Users' thumbs on a's primary answers (one in two, down mostly on low scores: the regressing rollout raises the
    share) and on b's first model's (one in three, until its widget breaks at ERRORS), and a few unresolved ones."""
    rng = random.Random(12)
    out = []
    for r in rows:
        if r.sample_rule != "base" or r.score is None or rng.random() > (0.5 if r.app == "a" else 0.33):
            continue
        if r.app == "b" and (r.model != "m1" or r.event_time >= ERRORS):
            continue
        negative = rng.random() < (0.7 if r.score < 0.5 else 0.15)
        out.append(Thumb(r.event_time + timedelta(seconds=40), r.app, negative, r.event_id, r.model, r.prompt_version))
        if rng.random() < 0.02:
            out.append(Thumb(r.event_time + timedelta(seconds=45), "", True, ""))
    return out


@pytest.fixture(scope="module")
def history_store(chdb_dir: Path) -> Iterator[ClickHouseStore]:
    """A database of its own holding `_fill_history`, filled once for the tests below, which only read it."""
    store = ClickHouseStore(f"chdb://{chdb_dir}", f"t_{uuid.uuid4().hex[:12]}", "relevancy_scores")
    Migrations(store).ensure()
    _fill_history(store)
    yield store
    store.command(f"DROP DATABASE IF EXISTS {store.database} SYNC")


@pytest.fixture(scope="module")
def per_step(history_store: ClickHouseStore) -> StoreData:
    """One query per rule and step on the history store, each distinct one run once for the module's tests (the
    10-minute steps of one test are answered for the next, and rules asking the same question share its answer)."""
    return StoreData(AnsweredOnce(history_store))


def _rules() -> RuleSet:
    return RuleSet(rules=[*default_rules().rules, *rules_from(EXTRA_RULES)])


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        # The same sums added in another order: equal to the last few bits.
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b) and type(a) is type(b):
        # A detector's frozen reference holds floats computed from the same sums.
        return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        # A likelihood-ratio bank: its histogram, ratios and thresholds, from the same sums.
        return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-9, atol=1e-12))
    return bool(a == b)


def _differences(slow: Evaluation, fast: Evaluation) -> list[str]:
    out = []
    s = {r.state.key: r for r in slow.results}
    f = {r.state.key: r for r in fast.results}
    if set(s) != set(f):
        return [f"{slow.now}: segments differ: {sorted(set(s) ^ set(f))}"]
    for key, r in s.items():
        for name in ("observation", "state"):
            one, other = getattr(r, name), getattr(f[key], name)
            for fld in dataclasses.fields(one):
                x, y = getattr(one, fld.name), getattr(other, fld.name)
                if not _same(x, y):
                    out.append(f"{slow.now} {key} {name}.{fld.name}: {x!r} != {y!r}")
    if [(e.rule.name, e.gap) for e in slow.empty] != [(e.rule.name, e.gap) for e in fast.empty]:
        out.append(f"{slow.now}: rules without segments differ")
    if [e.rule.name for e in slow.errors] != [e.rule.name for e in fast.errors]:
        out.append(f"{slow.now}: rule errors differ")
    return out


@pytest.mark.long(seconds=15)  # after the test below under xdist (the larger marker first), on its answers
@pytest.mark.xdist_group("history_store")
def test_history_gives_the_observations_and_states_of_one_query_per_step(
    history_store: ClickHouseStore,
    per_step: StoreData,
) -> None:
    """At every step, the history read once gives the same observations, states and outcomes as one query per rule and
    step."""
    store, rules, step = history_store, _rules(), timedelta(minutes=10)
    times = backtest_times(DAY2 + timedelta(minutes=30), DAY2 + timedelta(hours=4, minutes=10), step)
    # The histories read through the module's answers: the test below reads the same ones in `run_backtest`.
    history = read_history(per_step.store, rules.rules, times, step, per_step)
    states: dict[tuple[str, str], Any] = {}
    seen_states: set[str] = set()
    problems: list[str] = []
    for now in times:
        slow = evaluate_rules(store, rules, now, states, data=per_step)
        fast = evaluate_rules(store, rules, now, states, data=history)
        problems += _differences(slow, fast)
        states.update(slow.states())
        seen_states |= {r.state.state for r in slow.results}
    assert problems == []
    assert {
        "pending",
        "firing",
        "resolved",
    } <= seen_states  # the stretch exercised the transitions, not only quiet rounds


@pytest.mark.long(seconds=166)
@pytest.mark.xdist_group("history_store")
def test_the_fast_backtest_finds_the_episodes_of_the_per_step_backtest(per_step: StoreData) -> None:
    """`run_backtest` reading histories reports the same episodes, cleared pendings and errors as querying every step
    (the rounds of `run_backtest(per_step=True)`, on the module's shared per-step answers)."""
    rules = _rules()
    # The same 10-minute steps as the test above, so the per-step side is answered from the module's shared answers.
    since, until, step = DAY2 + timedelta(minutes=30), DAY2 + timedelta(hours=4, minutes=10), timedelta(minutes=10)
    slow = backtest_on(per_step, rules, since, until, step)
    # The store behind `per_step`: the histories, and the odd window's steps, as the test above read them.
    fast = run_backtest(per_step.store, rules, since, until, step)

    def episodes(report: Any) -> list[tuple[object, ...]]:
        return [
            (e.rule, e.segment, e.pending_at, e.fired_at, e.resolved_at, e.n_at_fire, e.note_at_fire)
            for e in report.episodes
        ]

    assert episodes(fast) == episodes(slow)
    assert [e.value_at_fire for e in fast.episodes] == pytest.approx([e.value_at_fire for e in slow.episodes])
    assert (fast.suppressed, fast.errors, fast.evaluations) == (slow.suppressed, slow.errors, slow.evaluations)
    fired = {e.rule for e in fast.fired()}
    assert {
        "relevancy_drop",
        "prompt_rollout_regression",
        "judge_error_rate",
        "scoring_lag",
        "judge_coverage",
        "p10_drop",
    } <= fired
    assert {"canary_scores_lower", "canary_errors", "shadow_agreement_drop"} <= fired


def test_a_history_that_cannot_be_read_leaves_its_rules_to_per_step_errors(traffic_store: ClickHouseStore) -> None:
    """Without the traffic table, the rules that read it report one error per step, as step-by-step evaluation does."""
    store = traffic_store
    insert(store, [make_row(DAY2 + timedelta(minutes=m)) for m in range(60)])
    store.command(f"DROP TABLE {store.database}.traffic_counts")
    rules = default_rules("judge_coverage", "upstream_silent", "relevancy_floor")
    report = run_backtest(store, rules, DAY2, DAY2 + timedelta(hours=1), timedelta(minutes=15))
    assert report.errors == {"judge_coverage": 4, "upstream_silent": 4}


@pytest.mark.parametrize(
    ("window", "offset", "step", "size_min", "origin"),
    [
        ("30m", "2m", timedelta(minutes=5), 5, DAY2 - timedelta(minutes=2)),  # every boundary moves by 5 minutes
        ("30m", "90s", timedelta(minutes=10), 10, DAY2 - timedelta(minutes=2)),  # the end is floored to the minute
        ("45m", "0s", timedelta(minutes=10), 5, DAY2),  # gcd(45, 10, 24h)
        ("30m", "0s", timedelta(seconds=90), 1, DAY2),  # a step of 90 s ends windows on any minute
    ],
)
def test_the_grid_puts_every_window_boundary_on_a_bucket_boundary(
    window: str, offset: str, step: timedelta, size_min: int, origin: datetime
) -> None:
    """The grid is the coarsest on which every window of every step starts and ends."""
    [rule] = rules_from(f"""
- name: r
  metric: mean_score
  window: {window}
  offset: {offset}
  baseline: {{trailing: 24h}}
  condition: {{relative_change: 0.1}}
""")
    grid = grid_for(rule, DAY2, step)
    assert grid is not None and grid.size == timedelta(minutes=size_min) and grid.origin == origin
    for k in range(50):
        w = windows_for(rule, DAY2 + k * step)
        assert all(grid.index(t) is not None for t in (*w.current, *w.baseline[0]))


def test_a_rule_off_the_minute_grid_has_no_grid() -> None:
    """A window or baseline that is not a whole number of minutes gets no grid (its steps are queried)."""
    [odd] = rules_from("- {name: r, metric: mean_score, window: 90s, condition: {threshold: 0.5}}")
    assert grid_for(odd, DAY2, timedelta(minutes=5)) is None


def test_progress_is_told_of_each_history_read_and_each_step(store: ClickHouseStore) -> None:
    """The progress callback hears every history query, then every step with the time it evaluated."""
    insert(store, [make_row(DAY2 + timedelta(minutes=m)) for m in range(30)])
    seen: list[Progress] = []
    rules = default_rules("relevancy_drop", "relevancy_floor", "judge_error_rate")
    report = run_backtest(store, rules, DAY2, DAY2 + timedelta(hours=1), timedelta(minutes=15), progress=seen.append)
    reads = [p for p in seen if p.phase == "reading"]
    steps = [p for p in seen if p.phase == "evaluating"]
    # One query per distinct segment keys and grid: the three rules differ in keys or offset.
    assert [(p.done, p.total) for p in reads] == [(1, 3), (2, 3), (3, 3)]
    assert [(p.done, p.total, p.at) for p in steps] == [(i + 1, 4, DAY2 + timedelta(minutes=15 * i)) for i in range(4)]
    assert report.evaluations == 4


def test_a_nan_score_is_left_out_of_the_sums_the_buckets_and_the_history(store: ClickHouseStore) -> None:
    """An ok row with a NaN score (the column takes one) is no score: the window's mean, its minute buckets and the
    detector's statistic are those of the other rows, in a round and in a backtest's history alike."""
    rows = [make_row(T0 + timedelta(minutes=m, seconds=s), score=0.8) for m in range(60) for s in (5, 35)]
    rows[40] = rows[40].model_copy(update={"score": math.nan})
    insert(store, rows)
    rule = default_rules("relevancy_drop").rules[0]
    windows = windows_for(rule, T0 + timedelta(hours=1))
    data = StoreData(store)
    [(_, seg)] = data.scores(rule, windows).items()
    assert seg.current.weighted.weight == 119 and seg.current.weighted.score == pytest.approx(0.8 * 119)
    [bucket] = data.buckets(rule, windows).values()
    assert np.isfinite(bucket.value).all() and bucket.weight.sum() == 119 and bucket.mean() == pytest.approx(0.8)
    assert cusum(bucket, Reference(0.9, 0.05, 5.0)) == pytest.approx(119 * 0.05)
    # The history's own guard, for sums that arrive NaN all the same: that bucket holds no ok score, not zeros.
    row = [0.0] * len(SCORE_SUMS)
    sums = {"rows": 2, "ok": 2, "weight": 2.0, "weight_sq": 2.0, "w_score": 1.6, "w_score_sq": 1.28}
    good = [float(sums.get(c, 0.0)) for c in SCORE_SUMS]
    row[SCORE_SUMS.index("rows")], row[SCORE_SUMS.index("w_score")] = 2, math.nan
    grid = Grid(T0, timedelta(minutes=1))
    rows = [(b, "support", "j1", "lexical", *(row if b == 1 else good), 0) for b in range(3)]
    history = build_history(grid, T0, T0 + timedelta(minutes=3), ("app", "judge_id"), SCORE_SUMS, rows, None)
    [series] = history.series.values()
    assert np.isfinite(series.prefix).all()
    [three] = buckets_at(history, rule, Windows((T0, T0 + timedelta(minutes=3))), [0, 3]).values()
    assert three.weight.tolist() == [2.0, 2.0] and three.mean() == pytest.approx(0.8)
