"""A rule's `turns`: the shipped follow-up rule reads a conversation's later turns only, so a regression confined to
follow-ups pages on its own history while the first turns are fine; its examples query lists follow-ups only."""

from __future__ import annotations

from datetime import timedelta

from monitor.alerts.engine import evaluate_rules
from monitor.alerts.outcomes import Gap, describe_empty
from monitor.alerts.queries import examples_sql, fetch_scores
from monitor.alerts.windows import windows_for
from monitor.store.connection import ClickHouseStore
from schemas.scored import ScoredRow
from tests.monitor.alerts.conftest import T0, default_rules, insert, make_row, noisy, rules_from, stream

APP = [{"app": "support"}]
NOW = T0 + timedelta(days=2)
CHANGE = NOW - timedelta(hours=2)


def _conversations(follow_up_mean_after: float, first_mean_after: float = 0.8) -> list[ScoredRow]:
    """Two days of an app's first turns (3 a minute) and follow-ups (turns 1-3, 2 a minute), all at mean 0.8 until two
    hours before now, then at `first_mean_after` and `follow_up_mean_after`."""
    first = [
        *stream(T0, CHANGE, per_minute=3, segments=APP, score=noisy(0.8, 0.1), seed=1),
        *stream(CHANGE, NOW, per_minute=3, segments=APP, score=noisy(first_mean_after, 0.1), seed=4),
    ]
    before = stream(T0, CHANGE, per_minute=2, segments=APP, score=noisy(0.8, 0.1), seed=2)
    after = stream(CHANGE, NOW, per_minute=2, segments=APP, score=noisy(follow_up_mean_after, 0.1), seed=3)
    follow_ups = [r.model_copy(update={"turn": 1 + i % 3}) for i, r in enumerate([*before, *after])]
    return [*first, *follow_ups]


def test_a_regression_confined_to_follow_ups_pages_on_the_follow_up_rule(store: ClickHouseStore) -> None:
    """Follow-ups falling from 0.8 to 0.45 while first turns hold: the follow-up rule fires on its own baseline (0.8 of
    follow-ups, 2 a minute) and a rule on first turns only sees the first turns, 3 a minute at 0.8."""
    insert(store, _conversations(0.45))
    first_only = rules_from(
        "[{name: first_drop, metric: mean_score, turns: first, segment_by: [app, model, prompt_version], window: 6h, "
        "baseline: {trailing: 7d}, detector: {shift: 0.1}, min_baseline_events: 50}]"
    )
    shipped = default_rules("follow_up_relevancy_drop")
    rules = shipped.model_copy(update={"rules": [*shipped.rules, *first_only]})
    results = {r.rule.name: r for r in evaluate_rules(store, rules, NOW, {}).results}
    follow_up, first = results["follow_up_relevancy_drop"], results["first_drop"]
    assert follow_up.state.state == "firing", follow_up.verdict.reason
    assert follow_up.detection is not None and follow_up.detection.events_per_min == 2.0  # the follow-ups' rate
    # The window's 6 hours of follow-ups: 4 at 0.8, 2 at 0.45.
    assert follow_up.observation.value is not None and abs(follow_up.observation.value - 0.683) < 0.02
    assert first.state.state == "inactive" and first.observation.value is not None
    assert first.detection is not None and first.detection.events_per_min == 3.0
    assert abs(first.observation.value - 0.8) < 0.02


def test_follow_ups_that_hold_do_not_page(store: ClickHouseStore) -> None:
    """The same conversations with the follow-ups still at 0.8: the follow-up rule stays quiet."""
    insert(store, _conversations(0.8))
    rules = default_rules("follow_up_relevancy_drop")
    (result,) = evaluate_rules(store, rules, NOW, {}).results
    assert result.state.state == "inactive", result.verdict.reason


def test_the_follow_up_rule_reads_and_lists_follow_ups_only(store: ClickHouseStore) -> None:
    """Its per-segment counts hold the follow-ups only, and its examples query lists no first turn."""
    at = NOW - timedelta(minutes=10)
    rows = [make_row(at, event_id=f"e{turn}", score=0.2, turn=turn) for turn in range(4)]
    insert(store, rows)
    (rule,) = default_rules("follow_up_relevancy_drop").rules
    windows = windows_for(rule, NOW)
    (data,) = fetch_scores(store, rule, windows).values()
    assert data.current.rows == 3
    (key,) = fetch_scores(store, rule, windows)
    result = store.query(examples_sql(rule, key, windows, store.database, store.table))
    assert {row[result.columns.index("event_id")] for row in result.rows} == {"e1", "e2", "e3"}


def test_a_follow_up_rule_over_first_turns_only_says_there_are_no_follow_ups(store: ClickHouseStore) -> None:
    """A store of flat events (turn 0) only: the follow-up rule finds no segment and says it has no follow-up turn,
    not that the store holds replays only."""
    insert(store, stream(NOW - timedelta(hours=2), NOW, per_minute=2, segments=APP, score=noisy(0.8, 0.1)))
    rules = default_rules("follow_up_relevancy_drop")
    (empty,) = evaluate_rules(store, rules, NOW, {}).empty
    assert empty.gap is Gap.NO_ROWS
    text = describe_empty(empty, NOW)
    assert text.startswith("no judged rows of a follow-up turn (turn > 0: events that carry the conversation"), text


def test_a_regression_of_every_turn_pages_once_on_relevancy_drop(store: ClickHouseStore) -> None:
    """First turns and follow-ups both falling from 0.8 to 0.45: relevancy_drop fires, and the follow-up rule, whose
    own detector would fire in the same round, is held pending with a note naming relevancy_drop (no second page)."""
    insert(store, _conversations(0.45, first_mean_after=0.45))
    rules = default_rules("relevancy_drop", "follow_up_relevancy_drop")
    results = {r.rule.name: r for r in evaluate_rules(store, rules, NOW, {}).results}
    drop, follow_up = results["relevancy_drop"], results["follow_up_relevancy_drop"]
    assert drop.state.state == "firing", drop.verdict.reason
    assert follow_up.verdict.fire  # its own evidence says fire ...
    assert follow_up.state.state == "pending" and follow_up.state.fired_at is None  # ... but it does not page
    assert follow_up.state.note.startswith("held while relevancy_drop fires on this segment"), follow_up.state.note
