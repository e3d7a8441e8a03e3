"""The agreement report on chDB, checked against κ computed by hand: a judge's control slice and everything side by
side, its confusion, its weeks and its disagreements, a shadow judge's κ over the same labels, and reviewers against
each other."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from monitor.calibration.agreement import Bootstrap
from monitor.review.agreement import AgreementReport, JudgeAgreement, agreement_report
from monitor.review.label_rows import LabelWriter, NewLabel
from monitor.review.routing import Route
from monitor.store.connection import ClickHouseStore
from tests.monitor.review.scored import NOW, PRIMARY, SHADOW, row, write

BOOT = Bootstrap(resamples=300, seed=5)


def _label(writer: LabelWriter, store: ClickHouseStore, event: str, who: str, value: int, route: Route = "control",
           at: timedelta = timedelta(0)) -> None:  # fmt: skip
    writer.record(store, NewLabel(event, who, value, "", route, 0.1), NOW + at)


def _report(store: ClickHouseStore) -> AgreementReport:
    """The hand case: primary scores e1..e6 (levels 0, 2, 2, 3, 3, 0), ann labels e1..e5 (0..4, control) and e6
    (4, disagree route, a week later); e7..e10 have only error rows of the primary and a shadow's scores, ann and
    bob label them (ann 0, 1, 2, 3; bob 0, 2, 2, 4)."""
    scores = [0.0, 0.5, 0.5, 0.75, 0.75, 0.0]
    write(store, [row(f"e{i}", s) for i, s in enumerate(scores, start=1)])
    write(store, [row(f"e{i}", None) for i in range(7, 11)])
    write(store, [row(f"e{i}", s, judge_id=SHADOW, shadow=True) for i, s in zip(range(7, 11), [1.0, 0.5, 0.5, 1.0])])
    writer = LabelWriter(ClickHouseStore(store.url, store.database, store.table))
    for i, value in enumerate([0, 1, 2, 3, 4], start=1):
        _label(writer, store, f"e{i}", "ann", value)
    _label(writer, store, "e6", "ann", 4, "disagree", at=timedelta(days=7))
    for i, (a, b) in zip(range(7, 11), [(0, 0), (1, 2), (2, 2), (3, 4)]):
        _label(writer, store, f"e{i}", "ann", a)
        _label(writer, store, f"e{i}", "bob", b, at=timedelta(minutes=1))
    return agreement_report(store, NOW - timedelta(days=1), NOW + timedelta(days=30), BOOT)


def _judge(report: AgreementReport, judge_id: str) -> JudgeAgreement:
    return next(j for j in report.judges if j.judge_id == judge_id)


def test_kappa_of_a_judge_matches_the_hand_computed_values(store: ClickHouseStore) -> None:
    """Control slice (e1..e5): Σw·observed = 2/16, Σw·expected = 1, κ = 0.875. Everything (with e6, 4 against 0):
    κ = 1 − (18/16) / (152/16/6) = 44/152. Both with a bootstrap interval; the 5×5 confusion counts each pair."""
    report = _report(store)
    primary = _judge(report, PRIMARY)
    assert report.labels == 14
    assert (primary.n_control, primary.n_everything) == (5, 6)
    assert primary.control.value == pytest.approx(0.875)
    assert primary.everything.value == pytest.approx(44 / 152)
    assert primary.everything.ci is not None and primary.everything.ci[0] <= primary.everything.ci[1]
    expected = [[0] * 5 for _ in range(5)]
    for human, judge in [(0, 0), (1, 2), (2, 2), (3, 3), (4, 3), (4, 0)]:
        expected[human][judge] += 1
    assert primary.confusion == tuple(tuple(r) for r in expected)


def test_weeks_and_disagreements(store: ClickHouseStore) -> None:
    """κ per ISO week of labelled_at (NOW is a Tuesday of the week of 2026-11-30; 0.875 over the first week's 5
    labels, 0 over the second's one pair, 4 against 0);
    e6 (reviewer 4, judge level 0) is too strict; the shadow gives e7 level 4 where both reviewers said 0: too
    lenient."""
    report = _report(store)
    primary = _judge(report, PRIMARY)
    assert [(w.week, w.n) for w in primary.weekly] == [(date(2026, 11, 30), 5), (date(2026, 12, 7), 1)]
    assert primary.weekly[0].kappa.value == pytest.approx(0.875) and primary.weekly[1].kappa.value == 0.0
    assert [(d.event_id, d.judge_level, d.human_level) for d in primary.too_strict] == [("e6", 0, 4.0)]
    assert primary.too_lenient == ()
    shadow = _judge(report, SHADOW)
    assert [(d.event_id, d.judge_level, d.human_level, d.reviewers) for d in shadow.too_lenient] == [("e7", 4, 0.0, 2)]


def test_a_shadow_judge_gets_its_kappa_over_the_same_labels(store: ClickHouseStore) -> None:
    """The shadow scored e7..e10 (levels 4, 2, 2, 4): its 8 pairs are both reviewers' labels of those events."""
    shadow = _judge(_report(store), SHADOW)
    assert (shadow.n_control, shadow.n_everything) == (8, 8)
    assert shadow.everything.value is not None


def test_human_against_human_kappa(store: ClickHouseStore) -> None:
    """ann (0, 1, 2, 3) against bob (0, 2, 2, 4) on e7..e10: Σw·observed = 2/16, Σw·expected = 56/16/4, κ = 6/7."""
    humans = _report(store).humans
    assert humans.items == 4
    assert humans.kappa.value == pytest.approx(6 / 7)
    assert humans.kappa.ci is not None


def test_the_report_repeats(store: ClickHouseStore) -> None:
    """The same labels give the same report, intervals included (pairs in (event_id, reviewer) order, seeded)."""
    first = _report(store)
    again = agreement_report(store, first.since, first.until, BOOT)
    assert again == first
