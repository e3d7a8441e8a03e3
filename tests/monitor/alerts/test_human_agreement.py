"""The shipped `judge_human_agreement_low` rule against chDB: per judge, quadratic-weighted κ of the review queue's
control labels against the judge's rubric level of the same items; it fires below 0.6 with 50 labels in 14 days,
stays quiet when the judge agrees, and says in one line when there are too few labels or no labels table at all."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from monitor.alerts.engine import SegmentResult, evaluate_rules
from monitor.alerts.outcomes import describe_empty, describe_shortfalls
from monitor.alerts.queries import examples_sql
from monitor.alerts.rules import parse_rules
from monitor.calibration.agreement import weighted_kappa
from monitor.store.connection import ClickHouseStore
from schemas.errors import RulesError
from tests.monitor.alerts.conftest import T0, default_rules, insert, make_row

RULE = "judge_human_agreement_low"
NOW = T0 + timedelta(days=20)
LABELLED = NOW - timedelta(days=3)  # inside the rule's 14 days

# The contract's labels table (helper A's schemas/sql/045_labels.sql), for a store whose schema predates it.
LABELS_DDL = """
CREATE TABLE IF NOT EXISTS {db}.labels
(
    event_id String, app LowCardinality(String), model LowCardinality(String),
    prompt_version LowCardinality(String), turn UInt32, judge_id LowCardinality(String),
    judge_score Nullable(Float64), reviewer String, label UInt8, comment String, route LowCardinality(String),
    inclusion_probability Float64, event_time DateTime64(3, 'UTC'), labelled_at DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(labelled_at) ORDER BY (event_id, reviewer)
"""
COLUMNS = (
    "event_id",
    "app",
    "model",
    "prompt_version",
    "turn",
    "judge_id",
    "judge_score",
    "reviewer",
    "label",
    "comment",
    "route",
    "inclusion_probability",
    "event_time",
    "labelled_at",
)


@pytest.fixture
def labelled(store: ClickHouseStore) -> ClickHouseStore:
    """The store with a labels table (the migration's, or the contract's when the migration is not there)."""
    store.command(LABELS_DDL.format(db=store.database))
    return store


def _label(store: ClickHouseStore, labels: list[int], judges: dict[str, list[float]], route: str = "control") -> None:
    """One judged event per label, scored by each judge in `judges` (its scores in the same order), labelled by a
    reviewer on `route`."""
    rows, label_rows = [], []
    for i, label in enumerate(labels):
        event_id, at = uuid.uuid4().hex, NOW - timedelta(days=5, minutes=i)
        for judge_id, scores in judges.items():
            rows.append(make_row(at, judge_id=judge_id, score=scores[i], event_id=event_id))
        primary = next(iter(judges))
        score = judges[primary][i]
        item = (event_id, "support", "m1", "v1", 0, primary, score)
        label_rows.append((*item, "ana", label, "", route, 0.2, at, LABELLED))
    insert(store, rows)
    store.insert_table("labels", COLUMNS, label_rows)


def _levels(n: int) -> list[int]:
    return [i % 5 for i in range(n)]


def _agreeing(labels: list[int]) -> list[float]:
    return [label / 4 for label in labels]


def _opposite(labels: list[int]) -> list[float]:
    return [(4 - label) / 4 for label in labels]


def _results(store: ClickHouseStore) -> dict[str, SegmentResult]:
    evaluation = evaluate_rules(store, default_rules(RULE), NOW, {})
    assert not evaluation.errors, evaluation.errors
    return {dict(r.state.segment)["judge_id"]: r for r in evaluation.results}


def test_sixty_control_labels_against_the_judge_fire_per_judge_while_an_agreeing_judge_stays_quiet(
    labelled: ClickHouseStore,
) -> None:
    """60 control labels that judge j1 scores the other way round fire for j1 (κ = −1, a ticket), while j2, which
    scored the same items as the reviewers did, stays inactive at κ = 1; labels of other routes count for neither."""
    labels = _levels(60)
    _label(labelled, labels, {"j1": _opposite(labels), "j2": _agreeing(labels)})
    _label(labelled, _levels(40), {"j1": _agreeing(_levels(40))}, route="disagree")  # not the control slice
    results = _results(labelled)
    assert set(results) == {"j1", "j2"}
    bad, good = results["j1"], results["j2"]
    assert bad.state.state == "firing" and bad.state.severity == "ticket"
    assert bad.observation.n_current == 60
    assert bad.observation.value == pytest.approx(weighted_kappa(labels, [4 - x for x in labels]).value)
    assert "beyond threshold 0.6" in bad.state.note
    assert good.state.state == "inactive" and good.observation.value == pytest.approx(1.0)

    # The ready query lists j1's control labels of the window, the largest disagreements first.
    sql = examples_sql(bad.rule, bad.state.segment, bad.windows, labelled.database, labelled.table)
    got = labelled.query(sql)
    gap = got.columns.index("gap")
    assert len(got.rows) == 20 and got.rows[0][gap] == 4
    assert all(r[got.columns.index("judge_id")] == "j1" for r in got.rows)


def test_sixty_agreeing_control_labels_stay_quiet(labelled: ClickHouseStore) -> None:
    """60 control labels that the judge's levels match, bar a few one level off, keep the rule inactive."""
    labels = _levels(60)
    scores = _agreeing(labels)
    scores[:6] = [min(1.0, s + 0.25) for s in scores[:6]]
    _label(labelled, labels, {"j1": scores})
    [result] = _results(labelled).values()
    assert result.verdict.sufficient and not result.verdict.fire
    assert result.state.state == "inactive" and result.observation.value is not None
    assert result.observation.value > 0.9


def test_twenty_control_labels_are_too_few_and_say_so_in_one_line(labelled: ClickHouseStore) -> None:
    """20 control labels, however much they disagree, decide nothing; the reason counts them against the 50 needed."""
    labels = _levels(20)
    _label(labelled, labels, {"j1": _opposite(labels)})
    [result] = _results(labelled).values()
    assert not result.verdict.sufficient and result.state.state == "inactive"
    text = describe_shortfalls(result.verdict.shortfalls, result.rule, result.windows, NOW)
    assert text == "20 labels on the control slice, 50 needed (labelled in the last 14d)"


def test_no_control_label_or_no_labels_table_is_one_line_not_a_crash(
    labelled: ClickHouseStore, store: ClickHouseStore
) -> None:
    """A labels table without control labels, and a store without the table (a schema before migration 045): the rule
    has no segment, no error, and one line that counts 0 labels against the 50 needed."""
    evaluation = evaluate_rules(labelled, default_rules(RULE), NOW, {})
    [empty] = evaluation.empty
    assert not evaluation.errors and not evaluation.results
    assert describe_empty(empty, NOW).startswith("0 labels on the control slice, 50 needed (labelled in the last 14d)")

    store.command(f"DROP TABLE {store.database}.labels SYNC")
    evaluation = evaluate_rules(store, default_rules(RULE), NOW, {})
    [empty] = evaluation.empty
    assert not evaluation.errors and not evaluation.results
    text = describe_empty(empty, NOW)
    assert text.startswith("0 labels on the control slice, 50 needed") and "no labels table" in text
    assert "\n" not in text


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        ("baseline: {trailing: 7d}\n    condition: {change: {fire: 0.1}}", "compares with a floor"),
        ("turns: follow_up\n    condition: {threshold: 0.6}", "turns applies to rules over the scores table only"),
        ("condition: {threshold: {fire: 0.6, clear: 0.5}}", "clear must be >= fire"),
    ],
)
def test_a_control_kappa_rule_takes_a_floor_only(extra: str, error: str) -> None:
    """A control_kappa rule compares with a floor: no baseline or change, no turns; the floor clears above itself."""
    text = f"rules:\n  - name: k\n    metric: control_kappa\n    window: 14d\n    {extra}\n"
    with pytest.raises(RulesError, match=error):
        parse_rules(text, "test")


def test_the_shipped_rule_is_a_ticket_below_0_6_with_50_labels_in_14_days_per_judge() -> None:
    """The shipped rule: per judge_id, 14 days, below 0.6, 50 labels, a ticket spending no false-alarm budget."""
    [rule] = default_rules(RULE).rules
    assert rule.key_fields == ("judge_id",) and rule.window == timedelta(days=14) and rule.min_events == 50
    assert rule.condition.threshold is not None and rule.condition.threshold.fire == 0.6
    assert rule.severity == "ticket" and not rule.spends_budget
