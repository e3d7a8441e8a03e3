"""The judge-against-user figures read from chDB: feedback joined to the judges' primary live rows only (no shadow,
replay or feedback-triggered rows, no unresolved or unnamed feedback), grouped per segment of the judged answer,
judge and ISO week of the feedback, with the all-segments and whole-range views, checked against the pure
statistics on the pairs by hand."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from monitor.feedback.agreement import auc_of, spearman_of
from monitor.feedback.agreement_queries import JudgeUserAgreement, judge_user_agreement
from monitor.store.connection import ClickHouseStore
from tests.monitor.feedback.agreement_data import JUDGE, MONDAY, rating, scored, thumbs, write

WEEK = timedelta(days=7)
START, END = MONDAY - timedelta(hours=9), MONDAY + 2 * WEEK


def _find(rows: list[JudgeUserAgreement], app: str | None, week: date | None) -> JudgeUserAgreement:
    found = [r for r in rows if r.app == app and r.week == week]
    assert len(found) == 1, rows
    return found[0]


def test_thumbs_join_only_primary_live_rows_of_resolved_feedback(store: ClickHouseStore) -> None:
    """Of all the feedback, only the thumbs on answers with a primary live ok row count: a shadow judge's row, a
    replayed row, a feedback-triggered row, an error row, unresolved feedback, feedback without an event id and
    feedback outside the range are all left out; a re-written feedback id counts once."""
    t = MONDAY + timedelta(hours=1)
    scores = [scored(f"e{i}", s, t) for i, s in enumerate([0.2, 0.6, 0.5, 0.9, 0.6], start=1)]
    scores += [
        scored("e1", 0.99, t, judge_id="shadow-9", sample_rule="shadow:base"),
        scored("r1", 0.95, t, replay_run="run-1"),
        scored("f1", 0.97, t, sample_rule="feedback"),
        scored("x1", 0.0, t, status="error"),
        scored("old", 0.99, t - 2 * WEEK),
    ]
    later = t + timedelta(hours=2)
    rows = [
        thumbs("e1", later, up=False),
        thumbs("e2", later, up=False, feedback_id="dup"),
        thumbs("e3", later, up=True),
        thumbs("e4", later, up=True),
        thumbs("e5", later, up=True),
        thumbs("r1", later, up=False),
        thumbs("f1", later, up=False),
        thumbs("x1", later, up=True),
        thumbs("e4", later, up=False, segment_source="unresolved"),
        thumbs("", later, up=True),
        thumbs("old", t - 2 * WEEK, up=False),
    ]
    write(store, scores, rows)
    write(store, [], [thumbs("e2", later, up=False, feedback_id="dup", version=2)])  # a second part: FINAL merges it
    result = judge_user_agreement(store, START, END)
    assert {r.judge_id for r in result} == {JUDGE}
    expected = auc_of([0.2, 0.6], [0.5, 0.9, 0.6])
    overall = _find(result, None, None)
    assert overall.auc == expected
    assert (overall.auc.disliked, overall.auc.liked) == (2, 3)
    assert overall.auc.auc == pytest.approx((1 + 0 + 1 + 1 + 1 + 0.5) / 6)  # liked 0.5, 0.9, 0.6 vs 0.2, 0.6
    assert overall.spearman.rho is None and overall.spearman.n == 0
    assert result[0] == overall  # the judge's headline comes first


def test_weeks_follow_the_feedback_time_and_segments_the_judged_row(store: ClickHouseStore) -> None:
    """An answer judged in the first week and rated in the second counts in the second; feedback naming only its
    app counts in the judged answer's full segment; the whole-range and all-segments rows pool them."""
    t = MONDAY + timedelta(hours=1)
    scores = [
        scored("a1", 0.1, t), scored("a2", 0.8, t), scored("a3", 0.3, t), scored("a4", 0.7, t),
        scored("b1", 0.4, t, app="help", prompt_version="v9"), scored("b2", 0.9, t, app="help", prompt_version="v9"),
    ]  # fmt: skip
    rows = [
        thumbs("a1", t + timedelta(hours=1), up=False),
        thumbs("a2", t + timedelta(hours=1), up=True),
        thumbs("a3", t + WEEK, up=True),  # next week
        thumbs("a4", t + WEEK, up=False),
        thumbs("b1", t + timedelta(hours=3), up=False, app="help", model="", prompt_version=""),
        thumbs("b2", t + timedelta(hours=3), up=True, app="help", model="", prompt_version=""),
    ]
    write(store, scores, rows)
    result = judge_user_agreement(store, START, END)
    week1, week2 = MONDAY.date(), (MONDAY + WEEK).date()
    shop = [r for r in result if r.app == "shop"]
    assert [(r.model, r.prompt_version, r.week) for r in shop] == [("m1", "v1", None), ("m1", "v1", week1),
                                                                   ("m1", "v1", week2)]  # fmt: skip
    assert _find(result, "shop", week1).auc == auc_of([0.1], [0.8])
    assert _find(result, "shop", week2).auc == auc_of([0.7], [0.3])
    assert _find(result, "shop", None).auc == auc_of([0.1, 0.7], [0.8, 0.3])
    help_rows = [r for r in result if r.app == "help"]
    assert [(r.model, r.prompt_version, r.week) for r in help_rows] == [("m1", "v9", None), ("m1", "v9", week1)]
    assert _find(result, None, week1).auc == auc_of([0.1, 0.4], [0.8, 0.9])
    assert _find(result, None, week2).auc == auc_of([0.7], [0.3])
    assert _find(result, None, None).auc == auc_of([0.1, 0.4, 0.7], [0.8, 0.9, 0.3])
    assert [(r.app, r.week) for r in result[:3]] == [(None, None), (None, week1), (None, week2)]


def test_ratings_feed_spearman_on_their_scale_mapped_to_unit(store: ClickHouseStore) -> None:
    """Ratings on a 1-5 and a 1-10 scale count as (value - 1) / (scale - 1) against the judge's score; thumbs do
    not enter ρ, ratings do not enter the AUC."""
    t = MONDAY + timedelta(hours=1)
    score = {"q1": 0.1, "q2": 0.3, "q3": 0.5, "q4": 0.7, "q5": 0.9, "q6": 0.95}
    given = [(1, 5), (3, 5), (2, 5), (9, 10), (5, 5), (10, 10)]
    ratings = [rating(e, t, value, scale) for e, (value, scale) in zip(score, given, strict=True)]
    write(store, [scored(e, s, t) for e, s in score.items()], [*ratings, thumbs("q1", t, up=True)])
    overall = _find(judge_user_agreement(store, START, END), None, None)
    units = [0.0, 0.5, 0.25, 8 / 9, 1.0, 1.0]
    assert overall.spearman == spearman_of(list(score.values()), units)
    assert overall.spearman.n == 6 and overall.spearman.rho is not None
    assert (overall.auc.disliked, overall.auc.liked, overall.auc.auc) == (0, 1, None)


def test_nothing_joined_is_an_empty_list(store: ClickHouseStore) -> None:
    """Feedback on answers nobody judged, and judged answers without feedback, give no rows at all."""
    t = MONDAY + timedelta(hours=1)
    write(store, [scored("j1", 0.5, t)], [thumbs("n1", t, up=False)])
    assert judge_user_agreement(store, START, END) == []
