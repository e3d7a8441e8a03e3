"""Why no decision was made, as data: every rule of an evaluation has segments or an `EmptyRule` saying why, and a
segment without a decision carries typed shortfalls; both read in plain words."""

from __future__ import annotations

from datetime import timedelta

from monitor.alerts.engine import evaluate_rules
from monitor.alerts.outcomes import Gap, Shortfall, describe_empty, describe_shortfalls
from monitor.alerts.rules import RuleSet
from monitor.store.connection import ClickHouseStore
from tests.monitor.alerts.conftest import T0, default_rules, insert, make_row, rules_from, stream

NOW = T0 + timedelta(hours=12, minutes=30)


def test_every_rule_is_accounted_for_when_the_offset_hides_the_only_rows(store: ClickHouseStore) -> None:
    """With a minute and a half of rows, every rule has segments or says which window was empty and where the newest
    row is."""
    insert(store, [make_row(NOW - timedelta(seconds=100 - 10 * k), app=app) for k in range(10) for app in ("a", "b")])
    rules = default_rules()
    ev = evaluate_rules(store, rules, NOW, {})
    named = {r.rule.name for r in ev.results} | {e.rule.name for e in ev.empty}
    assert named == {r.name for r in rules.rules} and not ev.errors
    empty = {e.rule.name: e for e in ev.empty}
    floor = empty["relevancy_floor"]
    assert floor.gap is Gap.NO_ROWS and floor.newest is not None and floor.newest.at == NOW - timedelta(seconds=10)
    assert (
        describe_empty(floor, NOW)
        == "no judged rows between 11:58 and 12:28 (the window ends `offset` 2m before now; newest row 12:29)"
    )
    # The detector sums every minute up to now: it has the rows, and no baseline to judge them by.
    drops = [r for r in ev.results if r.rule.name == "relevancy_drop"]
    assert len(drops) == 2 and all(r.verdict.shortfalls == (Shortfall(Gap.FEW_BASELINE_EVENTS, 0, 50),) for r in drops)
    volume = describe_empty(empty["judged_volume_drop"], NOW)
    assert volume.startswith("no judged rows between 11:58 and 12:28, nor at these hours on the previous 7 days")
    assert empty["upstream_silent"].gap is Gap.TRAFFIC_EMPTY  # nothing consumed was ever counted
    assert describe_empty(empty["upstream_silent"], NOW).startswith("traffic table empty")
    # Rules whose windows reach the rows have segments; too few rows is a typed shortfall there, not a missing rule.
    lag = [r for r in ev.results if r.rule.name == "scoring_lag"]
    assert len(lag) == 2 and all(r.verdict.sufficient for r in lag)  # no offset: the 10 rows per app are in its window
    [silent] = [r for r in ev.results if r.rule.name == "stream_silent"]
    assert silent.verdict.shortfalls == (Shortfall(Gap.SILENT_FEW_BASELINE, 0, 1),)


def test_a_segment_says_which_minimum_it_missed_and_where(store: ClickHouseStore) -> None:
    """A new app's segments name the window's count against min_events and the empty baseline, in plain words with
    times."""
    insert(store, stream(NOW - timedelta(minutes=32), NOW, per_minute=1, segments=[{"app": "a"}], score=lambda *_: 0.8))
    rules = default_rules("relevancy_drop", "relevancy_floor", "judged_volume_drop")
    ev = evaluate_rules(store, rules, NOW, {})
    by = {r.rule.name: r for r in ev.results}
    floor, drop, volume = by["relevancy_floor"], by["relevancy_drop"], by["judged_volume_drop"]
    assert floor.verdict.shortfalls == (Shortfall(Gap.FEW_EVENTS, 30, 50),)
    assert (
        describe_shortfalls(floor.verdict.shortfalls, floor.rule, floor.windows, NOW)
        == "window: 30 of 50 events needed between 11:58 and 12:28"
    )
    assert drop.verdict.shortfalls == (
        Shortfall(Gap.FEW_BASELINE_EVENTS, 0, 50),
    )  # a detector needs no count in its window
    assert (
        describe_shortfalls(drop.verdict.shortfalls, drop.rule) == "baseline: 0 of 50 events needed in the previous 7d"
    )
    assert (
        describe_shortfalls(volume.verdict.shortfalls, volume.rule)
        == "no history at these hours on the previous 7 days (200 events needed)"
    )
    assert not drop.observation.sufficient and drop.state.note.startswith(
        "no decision: baseline: 0 of 50 events needed"
    )


def test_an_empty_store_says_so(store: ClickHouseStore) -> None:
    """On an empty store the score rules say the store has no judged rows yet and the traffic rule that its table is
    empty."""
    ev = evaluate_rules(store, default_rules("relevancy_drop", "upstream_silent"), NOW, {})
    gaps = {e.rule.name: (e.gap, describe_empty(e, NOW)) for e in ev.empty}
    assert gaps["relevancy_drop"] == (Gap.STORE_EMPTY, "no judged rows in the store yet")
    assert gaps["upstream_silent"][0] is Gap.TRAFFIC_EMPTY


def test_no_rollout_counts_single_versions_and_versions_that_started_together(store: ClickHouseStore) -> None:
    """A rollout rule without a rollout says how many segments had one version and how many versions started
    together."""
    rows = [make_row(NOW - timedelta(minutes=m), app="a", prompt_version="v1") for m in range(3, 60)]
    rows += [
        make_row(NOW - timedelta(minutes=m), app="b", prompt_version=v) for m in range(3, 60) for v in ("v1", "v2")
    ]
    insert(store, rows)
    ev = evaluate_rules(store, default_rules("prompt_rollout_regression"), NOW, {})
    [e] = ev.empty
    assert (e.gap, e.single_version, e.started_together) == (Gap.NO_ROLLOUT, 1, 1)
    assert describe_empty(e, NOW) == (
        "no rollout in the window: 1 segment with a single prompt_version, 1 whose prompt_versions started within 1h "
        "of each other"
    )


def test_counts_of_an_evaluation(store: ClickHouseStore) -> None:
    """`Evaluation.counts` tells rules, segments, states, segments without a decision and rules without segments
    apart."""
    insert(store, stream(NOW - timedelta(minutes=40), NOW, per_minute=3, segments=[{"app": "a"}], score=lambda *_: 0.2))
    rules = RuleSet(
        rules=rules_from("""
- {name: floor, metric: mean_score, segment_by: [app], window: 30m, condition: {threshold: 0.4}, min_events: 50}
- {name: tiny, metric: mean_score, segment_by: [app], window: 5m, condition: {threshold: 0.4}, min_events: 50}
- {name: nothing, metric: mean_score, segment_by: [app], window: 5m, offset: 2h, condition: {threshold: 0.4}}
""")
    )
    c = evaluate_rules(store, rules, NOW, {}).counts()
    assert (c.rules, c.segments, c.firing, c.newly_firing, c.no_decision, c.empty_rules, c.rule_errors) == (
        3,
        2,
        1,
        1,
        1,
        1,
        0,
    )
