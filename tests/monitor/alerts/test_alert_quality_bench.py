"""bench/alert_quality.py feeds the shipped rounds with in-memory sums: they must be the history query's sums for the
same events, and a tiny run must give the figures it prints."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from bench import alert_quality as aq
from monitor.alerts.history import grid_for, read_range
from monitor.alerts.queries import fetch_score_history
from monitor.alerts.rules import load_rules
from monitor.store.connection import ClickHouseStore
from tests.monitor.alerts.conftest import make_row
from tests.monitor.alerts.feedback_rows import Thumb, insert_feedback


def test_a_shifted_mix_drops_the_mean_by_exactly_the_drop() -> None:
    """The planted mixes are the good (or base) mix with its mean lowered by the drop, and still probabilities."""
    good, _ = aq.mean_sd(aq.GOOD)
    base, _ = aq.mean_sd(aq.BASE)
    for drop in (0.1, 0.2, 0.3):
        for mix, before in ((aq.shifted(drop), good), (aq.moved(aq.BASE, drop), base)):
            assert mix.sum() == pytest.approx(1.0) and mix.min() >= 0
            assert aq.mean_sd(mix)[0] == pytest.approx(before - drop)


def test_in_memory_histories_equal_the_stores_for_the_same_events(store: ClickHouseStore) -> None:
    """Each quality rule's history built from simulated minutes has the same buckets, sums and scores as the one the
    backtest reads from the scores table holding those events, first turns and follow-ups alike (a rule reading
    follow-ups only reads the same rows in both)."""
    origin = datetime(2026, 1, 5, tzinfo=UTC)
    stream = aq.Stream(
        "app-x",
        3.0,
        [aq.Phase(0, (("model-a", "v1", 1.0, aq.GOOD),)), aq.Phase(2, (("model-a", "v2", 1.0, aq.shifted(0.2)),))],
        follow_ups=0.4,
    )
    minutes = aq.simulate([stream], hours=4, seed=3)
    rows = []
    assert {key[3] for key in minutes.scores} == {0, 1}
    for (app, model, version, turn), per_minute in minutes.scores.items():
        for minute, scores in per_minute.items():
            at = origin + timedelta(minutes=minute)
            for k, score in enumerate(scores):
                t = at + timedelta(seconds=k % 60)
                rows.append(
                    make_row(
                        t,
                        app=app,
                        model=model,
                        prompt_version=version,
                        judge_id=aq.JUDGE,
                        judge="rubric",
                        score=score,
                        cost=0.0,
                        turn=turn * (1 + k % 3),  # a follow-up is any turn after the first
                    )
                )
    store.insert_rows(rows, dedup_token="bench-parity")
    # The users' feedback drawn on those answers, as thumbs in the feedback table (its view fills the rollup).
    assert minutes.feedback
    thumbs = [
        Thumb(origin + timedelta(minutes=minute, seconds=k), app, k < negative, f"{app}-{minute}-{k}", model, version)
        for (app, model, version), per_minute in minutes.feedback.items()
        for minute, (n, negative) in per_minute.items()
        for k in range(int(n))
    ]
    insert_feedback(store, thumbs)
    since, until, step = origin + timedelta(hours=3), origin + timedelta(hours=4), timedelta(minutes=5)
    assert {r.turns for r in aq.quality_rules().rules} >= {"all", "follow_up"}
    assert aq.FEEDBACK_RULE in {r.name for r in aq.quality_rules().rules}
    for rule in aq.quality_rules().rules:
        mine = aq._history(rule, minutes, origin, since, until, step)
        grid = grid_for(rule, since, step)
        assert grid is not None
        start, end = read_range(rule, since, until - step)
        theirs = fetch_score_history(store, rule, grid.covering(start), start, end)
        assert mine.series.keys() == theirs.series.keys(), rule.name
        for key, s in mine.series.items():
            other = theirs.series[key]
            assert np.array_equal(s.buckets, other.buckets), (rule.name, key)
            assert np.allclose(s.prefix, other.prefix), (rule.name, key)


def test_the_issue_mixes_have_the_issue_means() -> None:
    """The baseline mix sits at 0.75 and a bad release moves answers from 1.0 to 0.25: .75 -> .47, .63, .45."""
    assert aq.mean_sd(aq.BASE)[0] == pytest.approx(0.75)
    for mix, mean in ((aq.RELEASE, 0.47), (aq.MODEST, 0.63), (aq.DRIFTED, 0.45)):
        assert aq.mean_sd(mix)[0] == pytest.approx(mean)
        assert mix[0] == aq.BASE[0] and mix[1] > aq.BASE[1]  # nothing moved to 0: it went to 0.25
    assert aq.mean_sd(aq.CANARY_BAD)[0] == pytest.approx(0.09, abs=0.005)


def test_the_issue_deployment_has_a_real_deployments_segments() -> None:
    """The issue's deployment has 12 apps (the issue's 11 and the follow-up case) and 19 relevancy_drop segments in the
    first round after the change (the budget's per-segment share depends on it); a legacy one at one rate 15."""
    issue, legacy = aq.planted_deployments((2.0,))
    assert len({s.app for s in issue.streams}) == 12
    assert aq.detector_segments(issue.streams, aq.CHANGE_H + 5 / 60, 6.0) == 19
    assert aq.detector_segments(issue.streams, aq.CHANGE_H, 6.0) == 14  # before the new versions start
    assert aq.detector_segments(legacy.streams, aq.LEGACY_CHANGE_H + 5 / 60, 6.0) == 15


def test_the_benchmarks_rules_keep_their_share_of_the_files_budget() -> None:
    """Leaving the rules the benchmark cannot feed out of the rule set gives no remaining rule a larger budget."""
    shipped = load_rules()
    mine = aq.quality_rules()
    for rule in mine.rules:
        assert mine.budget(rule) == pytest.approx(shipped.budget(rule)), rule.name


@pytest.mark.long(seconds=15)
def test_a_tiny_run_pages_on_a_large_drop_and_prints_its_table(capsys: pytest.CaptureFixture[str]) -> None:
    """One seed, a quiet deployment of two apps for a day and an hour (an hour of rounds after the warm-up), the
    planted deployments (the issue's, the older shapes at one rate, changing after three days) from an hour before the
    change to an hour past it, the optimum from a few hundred Monte Carlo paths: a large drop pages, every case has an
    optimum and a ratio, and the table and summary are printed."""
    result = aq.main(
        seeds=(7,),
        quiet_apps=2,
        quiet_days=1.25,
        quiet_per_seed=1,
        legacy_rates=(10.0,),
        json_path=None,
        issue_hours=aq.CHANGE_H + 1,
        legacy_hours=aq.LEGACY_CHANGE_H + 1,
        workers=1,
        issue_start_h=aq.CHANGE_H - 1,
        legacy_start_h=aq.LEGACY_CHANGE_H - 1,
        paths=400,
    )
    large = [r for r in result["planted"] if r["shape"] == "legacy large drop (0.3)"]
    assert large and large[0]["observed_min"] > 0 and large[0]["optimal_min"] > 0
    issue = [r for r in result["planted"] if r["deployment"] == "issue"]
    assert len(issue) == 7 and all(r["optimal"]["segments"] == 19 for r in issue)
    assert result["summary"]["follow_up_regression"]["paged"] == ["1 of 1"]
    assert result["quiet"]["deployment_weeks"] == pytest.approx((1.25 - 25 / 24) / 7)
    assert result["summary"]["issue_cases"]["median_ratio"] is not None
    out = capsys.readouterr().out
    assert "false pages" in out and "median ratio" in out and "wall" in out and "confined to follow-up turns" in out
