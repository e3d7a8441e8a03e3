"""Rows of `relevancy-monitor replay` (`replay_run` set) in the alert engine: left out of every rule by default, step by
step and in a backtest's history, and read like live rows by a rule with `include_replays: true`."""

from __future__ import annotations

import dataclasses
import math
import random
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import NamedTuple

import pytest

from monitor.alerts.backtest import backtest_times, read_history
from monitor.alerts.engine import Evaluation, evaluate_rules
from monitor.alerts.outcomes import Gap
from monitor.alerts.queries import examples_sql
from monitor.alerts.rules import Rule
from monitor.alerts.sources import RuleData, StoreData
from monitor.alerts.windows import windows_for
from monitor.store.connection import ClickHouseStore
from schemas.scored import ScoredRow
from tests.monitor.alerts.conftest import (
    T0,
    AnsweredOnce,
    default_rules,
    insert,
    insert_traffic,
    make_row,
    noisy,
    rules_from,
    stream,
)
from tests.monitor.alerts.test_history import DAY2, EXTRA_RULES, _history_rows
from tests.store_template import StoreTemplate

# Hourly rounds over the stretch of the history that holds its regression (four steps).
STEP = timedelta(hours=1)
TIMES = backtest_times(DAY2 + timedelta(minutes=30), DAY2 + timedelta(hours=4, minutes=10), STEP)
SUFFIX = "_with_replays"


def _replayed(live: Sequence[ScoredRow]) -> list[ScoredRow]:
    """Two replays of the live primaries' history: the live judge on events the live consumer never scored (scores
    flipped, scored hours later), and another judge (`jr`, not a shadow) on the same events."""
    rng = random.Random(5)
    rows = []
    for r in live:
        if r.sample_rule.startswith("shadow:"):
            continue
        flipped = None if r.score is None else 1.0 - r.score
        later = r.scored_at + timedelta(hours=6)
        rows.append(
            r.model_copy(
                update={
                    "event_id": f"replay-{r.event_id}",
                    "score": flipped,
                    "scored_at": later,
                    "replay_run": "run-same",
                }
            )
        )
        rows.append(
            r.model_copy(
                update={"judge_id": "jr", "judge": "rubric", "score": round(rng.random(), 1), "replay_run": "run-new"}
            )
        )
    return rows


def _fill(store: ClickHouseStore, rows: Sequence[ScoredRow], live: Sequence[ScoredRow]) -> None:
    """`rows`, and the traffic counts of the `live` primaries beside them (each judged event consumed and sampled):
    a replay counts no traffic."""
    insert(store, rows)
    counts: dict[tuple[datetime, str, str, str], int] = {}
    for r in live:
        if not r.sample_rule.startswith("shadow:"):
            key = (r.event_time.replace(second=0, microsecond=0), r.app, r.model, r.prompt_version)
            counts[key] = counts.get(key, 0) + 1
    insert_traffic(store, [(m, a, mo, p, n, n) for (m, a, mo, p), n in counts.items()])


def _rules() -> list[Rule]:
    """The shipped rules and the history test's extra ones (p10 with tail counts, lag, a window off the grid)."""
    return [*default_rules().rules, *rules_from(EXTRA_RULES)]


def _including(rules: Sequence[Rule], suffix: str = "") -> list[Rule]:
    """Copies of the rules over the scores table with `include_replays: true`, named with `suffix`."""
    return [
        r.model_copy(update={"include_replays": True, "name": r.name + suffix})
        for r in rules
        if r.spec.table not in ("canary", "feedback") and r.source == "scores"
    ]


Seen = dict[tuple[str, object], dict[str, object]]


def _seen(e: Evaluation) -> Seen:
    """Per rule and segment: every observed figure and the state; and the rules without segments, with why."""
    out: Seen = {}
    for r in e.results:
        figures = {k: v for k, v in dataclasses.asdict(r.observation).items() if k != "rule"}
        out[(r.rule.name, r.state.segment)] = {**figures, "state": r.state.state}
    for empty in e.empty:
        out[(empty.rule.name, "empty")] = {"gap": empty.gap}
    return out


def _differences(got: Sequence[Seen], expected: Sequence[Seen]) -> list[str]:
    """What differs between two runs of evaluations; floats to the last few bits (the same rows summed in another
    order)."""
    out = []
    for i, (g, x) in enumerate(zip(got, expected, strict=True)):
        if set(g) != set(x):
            out.append(f"step {i}: segments differ: {sorted(map(str, set(g) ^ set(x)))}")
            continue
        for key, figures in g.items():
            for name, v in figures.items():
                w = x[key][name]
                same = (
                    math.isclose(v, w, rel_tol=1e-9, abs_tol=1e-12)
                    if isinstance(v, float) and isinstance(w, float)
                    else v == w
                )
                if not same:
                    out.append(f"step {i} {key} {name}: {v!r} != {w!r}")
    return out


def _evaluations(store: ClickHouseStore, rules: Sequence[Rule], data: RuleData | None = None) -> list[Evaluation]:
    evaluations = [evaluate_rules(store, rules, now, {}, data=data) for now in TIMES]
    assert all(e.errors == [] for e in evaluations)
    return evaluations


def _history(store: ClickHouseStore, rules: Sequence[Rule]) -> RuleData:
    return read_history(store, rules, TIMES, STEP, StoreData(store))


class _Rows(NamedTuple):
    """The history test's live rows and `_replayed` of them."""

    live: tuple[ScoredRow, ...]
    replayed: tuple[ScoredRow, ...]


@pytest.fixture(scope="module")
def rows() -> _Rows:
    """The rows of the two tests below, made once (10,020 live and 16,680 replayed)."""
    live = _history_rows()
    return _Rows(tuple(live), tuple(_replayed(live)))


@pytest.fixture(scope="module")
def replayed_store(store_template: StoreTemplate, rows: _Rows) -> Iterator[AnsweredOnce]:
    """A database of its own holding the live rows, their traffic and then the replayed rows, only read from then on:
    both tests below evaluate the rules leaving replays out on it at the same steps, so each distinct query runs once
    for the module."""
    store = store_template.copy(f"t_{uuid.uuid4().hex[:12]}")
    _fill(store, rows.live, rows.live)
    insert(store, rows.replayed)
    yield AnsweredOnce(store)
    store.command(f"DROP DATABASE IF EXISTS {store.database} SYNC")


@pytest.mark.long(seconds=35)  # after the test below under xdist (the larger marker first), on its module fixtures
@pytest.mark.xdist_group("replays")
def test_replayed_rows_change_nothing_a_rule_leaving_them_out_sees(
    store: ClickHouseStore, rows: _Rows, replayed_store: AnsweredOnce
) -> None:
    """Replays with the live judge and with another judge change no observation, state or example of any rule
    without include_replays, step by step and from a backtest's history (scores, versions, tails, shadow pairs,
    volume): the same live rows without them (`store`) and with them (`replayed_store`) look the same to it."""
    _fill(store, rows.live, rows.live)
    rules = _rules()
    before = [_seen(e) for e in _evaluations(store, rules)]
    before_history = [_seen(e) for e in _evaluations(store, rules, _history(store, rules))]
    after = replayed_store
    assert _differences([_seen(e) for e in _evaluations(after, rules)], before) == []
    assert _differences([_seen(e) for e in _evaluations(after, rules, _history(after, rules))], before_history) == []


@pytest.mark.long(seconds=151)
@pytest.mark.xdist_group("replays")
def test_a_rule_with_include_replays_reads_replayed_rows_as_live_ones(
    store: ClickHouseStore, rows: _Rows, replayed_store: AnsweredOnce
) -> None:
    """With include_replays, every rule over the scores table sees exactly what it would if the replayed rows were live,
    step by step and from a history read beside the same rules without it: `replayed_store` against the same rows
    written as live ones (`store`)."""
    other_store = store
    _fill(other_store, [*rows.live, *(r.model_copy(update={"replay_run": ""}) for r in rows.replayed)], rows.live)
    store = replayed_store
    plain = [r for r in _rules() if r.spec.table not in ("canary", "feedback") and r.source == "scores"]
    mixed = [*plain, *_including(plain, SUFFIX)]
    step_by_step = [_seen(e) for e in _evaluations(store, mixed)]
    assert _differences([_seen(e) for e in _evaluations(store, mixed, _history(store, mixed))], step_by_step) == []
    # The same rules on both sides, so a detector rule's share of the budget is the same (the suffixed copies share it).
    as_live = [_unsuffixed(_seen(e)) for e in _evaluations(other_store, mixed)]
    with_replays = [
        {(k[0].removesuffix(SUFFIX), k[1]): v for k, v in seen.items() if k[0].endswith(SUFFIX)}
        for seen in step_by_step
    ]
    assert _differences(with_replays, as_live) == []
    assert (
        _differences([_unsuffixed(seen) for seen in step_by_step], as_live) != []
    )  # the replayed rows do change what a rule sees


def _unsuffixed(seen: Seen) -> Seen:
    return {k: v for k, v in seen.items() if not k[0].endswith(SUFFIX)}


def test_a_backfill_with_the_live_judge_gives_baselines_from_day_one(store: ClickHouseStore) -> None:
    """A day scored by a replay before the monitor started: a rule leaving replays out has no baseline for the first
    live hour (and before it, no live rows in the store: only replayed ones); with include_replays it compares the live
    hour with the backfill."""
    start = T0 + timedelta(days=1)
    app = [{"app": "support"}]
    insert(store, stream(T0, start, per_minute=2, segments=app, score=noisy(0.8, 0.1), replay_run="backfill-1"))
    insert(store, stream(start, start + timedelta(hours=1), per_minute=2, segments=app, score=noisy(0.6, 0.1), seed=2))
    drop = default_rules("relevancy_drop", ignore_for=True).rules
    now = start + timedelta(hours=1)

    def result(rules: Sequence[Rule]) -> tuple[int, bool, str]:
        (r,) = evaluate_rules(store, rules, now, {}).results
        return r.observation.n_baseline, r.observation.sufficient, r.state.state

    # The detector's baseline is the 7 days up to an hour before now: no live minute, or the backfill's day.
    assert result(drop) == (0, False, "inactive")
    assert result(_including(drop)) == (2880, True, "firing")
    floor = default_rules("relevancy_floor").rules
    (empty,) = evaluate_rules(store, floor, start - timedelta(minutes=10), {}).empty
    assert empty.gap is Gap.ONLY_REPLAYS  # the backfill is not live traffic, but the store is not empty either
    assert evaluate_rules(store, _including(floor), start - timedelta(minutes=10), {}).results


def test_an_examples_query_lists_replayed_rows_only_for_a_rule_including_them(store: ClickHouseStore) -> None:
    """The worst-examples query of a notification lists the rows its rule read: no replayed row (nor a shadow pair of
    replayed rows) unless the rule includes them."""
    now = T0 + timedelta(hours=1)
    rows = []
    for i in range(3):
        at = now - timedelta(minutes=20 + i)
        for event, run in ((f"live-{i}", ""), (f"replay-{i}", uuid.uuid4().hex)):
            rows.append(make_row(at, event_id=event, score=0.5 if not run else 0.1, replay_run=run))
            rows.append(
                make_row(at, event_id=event, judge_id="js", score=0.9, sample_rule="shadow:base", replay_run=run)
            )
    insert(store, rows)
    floor = rules_from("[{name: floor, metric: mean_score, window: 30m, condition: {threshold: 0.4}}]")[0]
    shadow = default_rules("shadow_agreement_drop").rules[0]
    pair = (("app", "support"), ("judge_id", "js"), ("primary_judge_id", "j1"))
    for rule, segment in ((floor, (("judge_id", "j1"),)), (shadow, pair)):
        for r, expected in (
            (rule, {f"live-{i}" for i in range(3)}),
            (_including([rule])[0], {row.event_id for row in rows}),
        ):
            result = store.query(examples_sql(r, segment, windows_for(r, now), store.database, store.table))
            assert {row[result.columns.index("event_id")] for row in result.rows} == expected, r.name
