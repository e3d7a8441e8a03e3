"""Users' feedback as alert signals (issue 45): the shipped `feedback_negative_rise` detector on the negative share of
each segment's feedback, the `feedback_rate_collapse` ticket when feedback per consumed answer collapses, the
`judge_user_auc_low` ticket on the judge's AUC for predicting thumbs-downs, and feedback-triggered judgements
(sample_rule 'feedback') kept out of every relevancy stream."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import numpy as np
import pytest

from monitor.alerts.backtest import BacktestReport, HistoryData, backtest_on, run_backtest
from monitor.alerts.detectability import detectability
from monitor.alerts.engine import SegmentResult, evaluate_rules
from monitor.alerts.history import FEEDBACK_SUMS, History, build_history, grid_for, read_range
from monitor.alerts.outcomes import Newest, describe_empty, describe_shortfalls
from monitor.alerts.queries import examples_sql, fetch_scores
from monitor.alerts.rules import Rule, RuleSet
from monitor.alerts.sequential import Buckets
from monitor.alerts.sources import StoreData
from monitor.alerts.windows import (
    SegmentData,
    SegmentKey,
    TailCounts,
    TrafficCounts,
    VersionStats,
    Windows,
    windows_for,
)
from monitor.store.connection import ClickHouseStore
from schemas.errors import QueryError
from schemas.feedback import FEEDBACK_SAMPLE_RULE
from tests.monitor.alerts.conftest import T0, default_rules, insert, insert_traffic, make_row
from tests.monitor.alerts.feedback_rows import insert_feedback

RISE = "feedback_negative_rise"
COLLAPSE = "feedback_rate_collapse"
AUC = "judge_user_auc_low"
STEP = timedelta(minutes=5)

# ---- feedback_negative_rise: the detector on in-memory history, as the alert-quality benchmark feeds it ----------


class _NoStore:
    """What the in-memory history does not cover is a test bug, not a fallback to a store."""

    def scores(self, rule: Rule, windows: Windows) -> dict[SegmentKey, SegmentData]:
        raise QueryError(f"no history for {rule.name}")

    def versions(self, rule: Rule, windows: Windows) -> dict[SegmentKey, list[VersionStats]]:
        raise QueryError(f"no history for {rule.name}")

    def traffic(self, rule: Rule, windows: Windows) -> dict[SegmentKey, TrafficCounts]:
        raise QueryError(f"no history for {rule.name}")

    def tail_counts(
        self, rule: Rule, windows: Windows, segment: SegmentKey, cutoff: float, threshold: float
    ) -> TailCounts:
        raise QueryError(f"no history for {rule.name}")

    def buckets(self, rule: Rule, windows: Windows) -> dict[SegmentKey, Buckets]:
        raise QueryError(f"no history for {rule.name}")

    def newest(self, rule: Rule, before: datetime) -> Newest | None:
        return None


Segment3 = tuple[str, str, str]


def _minutes(
    segments: dict[Segment3, tuple[float, float]], minutes: int, seed: int, change: tuple[Segment3, int, float] | None
) -> dict[Segment3, dict[int, tuple[int, int]]]:
    """Per segment (feedback a minute, negative share) and minute from T0: Poisson feedback, each negative with the
    segment's share, or from minute `change[1]` on with `change[2]` in segment `change[0]`."""
    rng = np.random.default_rng(seed)
    out: dict[Segment3, dict[int, tuple[int, int]]] = {}
    for seg, (rate, share) in segments.items():
        n = rng.poisson(rate, minutes)
        p = np.full(minutes, share)
        if change is not None and change[0] == seg:
            p[change[1] :] = change[2]
        neg = rng.binomial(n, p)
        out[seg] = {m: (int(n[m]), int(neg[m])) for m in range(minutes) if n[m]}
    return out


def _history(
    rule: Rule, counts: dict[Segment3, dict[int, tuple[int, int]]], since: datetime, until: datetime
) -> History:
    """The rule's feedback history over the backtest's range, bucket by bucket, as the rollup's query returns it."""
    grid = grid_for(rule, since, STEP)
    assert grid is not None
    start, end = read_range(rule, since, until - STEP)
    grid = grid.covering(start)
    rows = []
    for (app, model, version), per_minute in sorted(counts.items()):
        for minute, (n, neg) in sorted(per_minute.items()):
            at = T0 + timedelta(minutes=minute)
            if not start <= at < end:
                continue
            bucket = (at - grid.origin) // grid.size
            rows.append((bucket, app, model, version, n, n, 0, n, n, n - neg, n - neg, neg, int(at.timestamp() * 1000)))
    return build_history(grid, start, end, rule.key_fields, FEEDBACK_SUMS, rows, None)


SEGMENTS: dict[Segment3, tuple[float, float]] = {
    ("support", "m1", "v1"): (6.0, 0.20),
    ("billing", "m1", "v1"): (3.0, 0.15),
}
SUPPORT: Segment3 = ("support", "m1", "v1")


def _backtest(counts: dict[Segment3, dict[int, tuple[int, int]]], since: datetime, until: datetime) -> BacktestReport:
    rules = default_rules(RISE)
    [rule] = rules.rules
    data = HistoryData(_NoStore(), {RISE: _history(rule, counts, since, until)}, {})
    return backtest_on(data, rules, since, until, STEP)


def test_a_rise_of_the_negative_share_pages_within_the_hour_and_only_on_its_segment() -> None:
    """One segment's thumbs-down share rising from 20 % to 40 % (6 feedback a minute) pages on that segment within an
    hour, with the share in the page; the segment beside it stays quiet."""
    change_min = 36 * 60
    counts = _minutes(SEGMENTS, 44 * 60, seed=11, change=(SUPPORT, change_min, 0.40))
    since, until = T0 + timedelta(hours=30), T0 + timedelta(hours=44)
    report = _backtest(counts, since, until)
    assert not report.errors
    fired = report.fired(RISE)
    assert [dict(e.segment)["app"] for e in fired] == ["support"]
    [episode] = fired
    assert episode.fired_at is not None and episode.severity == "page"
    delay = episode.fired_at - (T0 + timedelta(minutes=change_min))
    assert timedelta(0) <= delay <= timedelta(hours=1)
    assert episode.baseline_at_fire == pytest.approx(0.20, abs=0.02)
    before, window = episode.baseline_at_fire, episode.value_at_fire
    assert before is not None and window is not None and window > before  # the window's share, most of it before
    assert "a rise of the negative feedback share of 0.1 or more" in episode.note_at_fire
    assert "feedback/min; the change began about 12:0" in episode.note_at_fire


def test_a_quiet_day_of_feedback_never_pages() -> None:
    """A day of steady feedback (each segment at its own negative share) after a day of history pages nothing, and
    every segment was watched (a calibrated reference)."""
    counts = _minutes(SEGMENTS, 50 * 60, seed=12, change=None)
    report = _backtest(counts, T0 + timedelta(hours=26), T0 + timedelta(hours=50))
    assert not report.errors and report.fired(RISE) == []
    assert report.last is not None
    results = [r for r in report.last.results if r.rule.name == RISE]
    assert len(results) == 2
    assert all(r.detection is not None and r.detection.reference is not None for r in results)


def test_a_thin_segment_gets_the_detectability_line_in_feedback_a_minute() -> None:
    """A segment with a feedback event every 20 minutes is too thin to protect, and says so in feedback a minute with
    the rate that would protect it; a busy one says what rise it detects in 15 minutes."""
    segments = {SUPPORT: (6.0, 0.2), ("quiet", "m1", "v1"): (0.05, 0.2)}
    counts = _minutes(segments, 48 * 60, seed=13, change=None)
    report = _backtest(counts, T0 + timedelta(hours=47), T0 + timedelta(hours=48))
    assert report.last is not None
    lines = {dict(r.state.segment)["app"]: detectability(r) for r in report.last.results}
    thin, busy = lines["quiet"], lines["support"]
    assert thin is not None and busy is not None
    assert not thin.protected and thin.describe().startswith("too thin to protect: 0.0")
    assert thin.describe().endswith(f"it needs at least {thin.min_per_minute:.2g} feedback/min")
    assert busy.protected and busy.describe().startswith("6 feedback/min, detects a")
    assert "rise in ~15 min" in busy.describe()


def test_the_shipped_feedback_rules() -> None:
    """The shipped rules: the detector pages per app, model and prompt version with a share of the page budget; the
    rate collapse is a tested ticket; the AUC floor is a ticket per judge and segment that spends no budget."""
    rules = default_rules()
    by_name = {r.name: r for r in rules.rules}
    rise, collapse, auc = by_name[RISE], by_name[COLLAPSE], by_name[AUC]
    assert (
        rise.severity == "page" and rise.detector is not None and rise.key_fields == ("app", "model", "prompt_version")
    )
    assert rules.budget(rise) == pytest.approx(1 / 12)
    assert collapse.severity == "ticket" and collapse.spends_budget and rules.budget(collapse) == pytest.approx(3 / 12)
    assert auc.severity == "ticket" and not auc.spends_budget
    assert auc.key_fields == ("app", "model", "prompt_version", "judge_id") and auc.min_events == 50
    assert auc.condition.threshold is not None and auc.condition.threshold.fire == 0.6


# ---- against chDB: the rollup, the rate collapse, the examples, the AUC -----------------------------------------


def test_the_detector_reads_the_rollup_and_leaves_unresolved_feedback_out(store: ClickHouseStore) -> None:
    """The store's answer for the detector: per segment the rollup's feedback counts of the window (negative ones as
    the share), never the unresolved feedback (app ''); the examples query lists the segment's latest negative
    feedback with its comment and answer event id."""
    now = T0 + timedelta(days=2)
    items = [(now - timedelta(minutes=m + 1), "support", m % 4 == 0, f"ev-{m}") for m in range(120)]
    items += [(now - timedelta(minutes=m + 1), "", True, "") for m in range(40)]
    insert_feedback(store, items, comment="it did not answer the question")
    [rule] = default_rules(RISE).rules
    windows = windows_for(rule, now)
    data = StoreData(store)
    found = data.scores(rule, windows)
    assert list(found) == [(("app", "support"), ("model", "m1"), ("prompt_version", "v1"))]
    [segment] = found.values()
    assert segment.current.ok == 120 and segment.current.weighted.low == 30
    buckets = data.buckets(rule, windows)
    assert list(buckets) == list(found)
    [b] = buckets.values()
    assert b.events == pytest.approx(120) and float(b.value.sum()) == pytest.approx(90)

    key = next(iter(found))
    got = store.query(examples_sql(rule, key, windows, store.database, store.table))
    assert len(got.rows) == 20
    assert got.rows[0][got.columns.index("comment")] == "it did not answer the question"
    assert got.rows[0][got.columns.index("answer_event_id")] == "ev-0"
    assert all(r[got.columns.index("app")] == "support" for r in got.rows)


def test_a_broken_feedback_widget_is_a_ticket_and_a_working_one_is_not(store: ClickHouseStore) -> None:
    """Two apps at 10 consumed answers and a feedback every 2 minutes; support's feedback stops (its widget broke)
    while its answers go on: feedback_rate_collapse goes pending, then fires (a ticket); billing never does."""
    broke = T0 + timedelta(hours=27)
    end = broke + timedelta(hours=4)
    minutes = int((end - T0) / timedelta(minutes=1))
    insert_traffic(
        store,
        [(T0 + timedelta(minutes=m), app, "m1", "v1", 10, 1) for m in range(minutes) for app in ("support", "billing")],
    )
    items = [
        (T0 + timedelta(minutes=m, seconds=7), app, m % 6 == 0, f"{app}-{m}")
        for m in range(0, minutes, 2)
        for app in ("support", "billing")
        if app == "billing" or T0 + timedelta(minutes=m) < broke
    ]
    insert_feedback(store, items)
    rules = default_rules(COLLAPSE)
    report = run_backtest(store, rules, broke - timedelta(minutes=30), end, STEP)
    assert not report.errors
    [episode] = report.fired(COLLAPSE)
    assert dict(episode.segment) == {"app": "support"} and episode.severity == "ticket"
    assert episode.fired_at is not None and broke < episode.fired_at <= end
    assert episode.value_at_fire is not None and episode.value_at_fire <= 0.3 * 0.05
    assert episode.baseline_at_fire == pytest.approx(0.05, rel=0.05)
    assert episode.p_value_at_fire is not None and episode.p_value_at_fire < 1e-6
    # Its example query lists the app's last feedback before the widget broke, thumbs up and down alike.
    [rule] = rules.rules
    at_break = windows_for(rule, broke + timedelta(minutes=30))
    got = store.query(examples_sql(rule, episode.segment, at_break, store.database, store.table))
    negative = [r[got.columns.index("value")] == 0.0 for r in got.rows]
    assert len(got.rows) == 20 and any(negative) and not all(negative)
    assert max(r[got.columns.index("feedback_time")] for r in got.rows) < broke.replace(tzinfo=None)


def _judged_feedback(
    store: ClickHouseStore,
    liked: int,
    disliked: int,
    judges: dict[str, tuple[float, float]],
    at: datetime,
    *,
    app: str = "support",
) -> None:
    """`liked` and `disliked` answers of `app` judged by each judge (its score of a liked and of a disliked answer,
    the disliked ones spread a little), each with one thumbs."""
    rows, items = [], []
    for i in range(liked + disliked):
        event_id, negative = uuid.uuid4().hex, i < disliked
        t = at + timedelta(minutes=i)
        for judge_id, (good, bad) in judges.items():
            score = (bad + 0.05 * (i % 3)) if negative else good - 0.05 * (i % 2)
            rows.append(make_row(t, app=app, judge_id=judge_id, score=round(score, 3), event_id=event_id))
        items.append((t + timedelta(minutes=3), app, negative, event_id))
    insert(store, rows)
    insert_feedback(store, items)


def _auc_results(store: ClickHouseStore, now: datetime) -> dict[str, SegmentResult]:
    evaluation = evaluate_rules(store, default_rules(AUC), now, {})
    assert not evaluation.errors, evaluation.errors
    return {dict(r.state.segment)["judge_id"]: r for r in evaluation.results}


def test_a_judge_that_no_longer_predicts_thumbs_downs_is_a_ticket(store: ClickHouseStore) -> None:
    """40 liked and 20 disliked answers: j1 scores the disliked ones lowest (AUC 1, quiet), j2 the other way round
    (AUC 0, a ticket); 30 more disliked answers judged only because of their thumbs-down (sample_rule 'feedback',
    j1 scoring them 1.0) count for no judge, or j1's AUC would fall below the floor too."""
    now = T0 + timedelta(days=10)
    _judged_feedback(store, 40, 20, {"j1": (0.9, 0.1), "j2": (0.1, 0.9)}, now - timedelta(days=2))
    triggered, items = [], []
    for i in range(30):
        event_id, t = uuid.uuid4().hex, now - timedelta(days=1, minutes=i)
        triggered.append(make_row(t, judge_id="j1", score=1.0, event_id=event_id, sample_rule=FEEDBACK_SAMPLE_RULE))
        items.append((t + timedelta(minutes=2), "support", True, event_id))
    insert(store, triggered)
    insert_feedback(store, items)

    results = _auc_results(store, now)
    assert set(results) == {"j1", "j2"}
    good, bad = results["j1"], results["j2"]
    assert good.observation.n_current == 60 and good.observation.value == pytest.approx(1.0)
    assert good.state.state == "inactive" and good.verdict.sufficient
    assert bad.state.state == "firing" and bad.state.severity == "ticket"
    assert bad.observation.value == pytest.approx(0.0) and "beyond threshold 0.6" in bad.state.note

    # The ready query lists j2's disliked answers, the ones it scored highest first, with their comments' column.
    got = store.query(examples_sql(bad.rule, bad.state.segment, bad.windows, store.database, store.table))
    assert len(got.rows) == 20
    assert got.rows[0][got.columns.index("score")] == pytest.approx(1.0)
    assert all(r[got.columns.index("judge_id")] == "j2" and r[got.columns.index("negative")] for r in got.rows)


def test_a_judge_below_the_floor_only_by_chance_is_not_a_ticket(store: ClickHouseStore) -> None:
    """12 disliked and 40 liked answers that the judge scores no better than a coin (AUC 0.5): below the 0.6 floor,
    but on so few pairs that the upper end of its 95 % interval is above it, so the rule does not fire."""
    now = T0 + timedelta(days=10)
    _judged_feedback(store, 40, 12, {"j3": (0.57, 0.5)}, now - timedelta(days=1))
    [result] = _auc_results(store, now).values()
    assert result.verdict.sufficient and result.state.state == "inactive"
    assert result.observation.value is not None and result.observation.value > 0.6


def test_too_few_of_a_class_decides_nothing_and_says_so(store: ClickHouseStore) -> None:
    """55 feedback events on judged answers, only 5 of them thumbs-down: no AUC decision, whatever it reads, and the
    reason names the 10 of each class needed; a store without feedback says so in one line."""
    now = T0 + timedelta(days=10)
    [rule] = default_rules(AUC).rules
    empty = evaluate_rules(store, default_rules(AUC), now, {}).empty
    assert [e.rule.name for e in empty] == [AUC]
    assert "no users' feedback in the store yet (MONITOR_FEEDBACK_TOPICS" in describe_empty(empty[0], now)

    _judged_feedback(store, 50, 5, {"j1": (0.1, 0.9)}, now - timedelta(days=1))
    [result] = _auc_results(store, now).values()
    assert not result.verdict.sufficient and result.state.state == "inactive"
    text = describe_shortfalls(result.verdict.shortfalls, rule, result.windows, now)
    assert text == "5 answers in the smaller class (disliked or not), 10 of each needed"


# ---- feedback-triggered judgements stay out of every relevancy stream -------------------------------------------


def test_a_feedback_triggered_judgement_moves_no_relevancy_figure(store: ClickHouseStore) -> None:
    """60 sampled rows at 0.8 and 60 rows judged because users disliked them (sample_rule 'feedback', and a shadow
    judge's row of one, at 0): the mean, the detector's buckets, the judged volume and the examples read the 60
    sampled rows only."""
    now = T0 + timedelta(days=3)
    at = now - timedelta(minutes=20)
    insert(store, [make_row(at + timedelta(seconds=i), score=0.8) for i in range(60)])
    insert(
        store,
        [make_row(at + timedelta(seconds=i), score=0.0, sample_rule=FEEDBACK_SAMPLE_RULE) for i in range(60)]
        + [make_row(at, score=0.0, judge_id="j1", sample_rule=f"shadow:{FEEDBACK_SAMPLE_RULE}")],
    )
    rules = {r.name: r for r in default_rules("relevancy_floor", "judged_volume_drop", "relevancy_drop").rules}
    floor = rules["relevancy_floor"]
    windows = windows_for(floor, now)
    [segment] = fetch_scores(store, floor, windows).values()
    assert segment.current.ok == 60
    assert segment.current.weighted.score / segment.current.weighted.weight == pytest.approx(0.8)
    [volume] = fetch_scores(store, rules["judged_volume_drop"], windows_for(rules["judged_volume_drop"], now)).values()
    assert volume.current.rows == 60
    drop = rules["relevancy_drop"]
    [b] = StoreData(store).buckets(drop, windows_for(drop, now)).values()
    assert b.events == pytest.approx(60) and b.mean() == pytest.approx(0.8)
    key = next(iter(fetch_scores(store, floor, windows)))
    got = store.query(examples_sql(floor, key, windows, store.database, store.table))
    assert len(got.rows) == 20 and all(r[got.columns.index("score")] == pytest.approx(0.8) for r in got.rows)


def test_the_rule_set_budget_counts_the_feedback_rules() -> None:
    """The shipped file's page weights add up to 12 with the feedback detector, and its ticket weights to 12 with the
    rate collapse: relevancy_drop keeps 6 of them."""
    rules: RuleSet = default_rules()
    by_name = {r.name: r for r in rules.rules}
    assert rules.budget(by_name["relevancy_drop"]) == pytest.approx(6 / 12)
    assert rules.budget(by_name["low_score_share_rise"]) == pytest.approx(3 * 6 / 12)
