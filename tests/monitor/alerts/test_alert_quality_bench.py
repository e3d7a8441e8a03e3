"""bench/alert_quality.py feeds the shipped rounds with in-memory sums: they must be the history query's sums for the
same events, and a tiny run must give the figures it prints."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from bench import alert_quality as aq
from monitor.alerts.history import grid_for, read_range
from monitor.alerts.queries import fetch_score_history
from monitor.store.connection import ClickHouseStore
from tests.monitor.alerts.conftest import make_row


def test_a_shifted_mix_drops_the_mean_by_exactly_the_drop() -> None:
    """The planted mixes are the good mix with its mean lowered by the drop, and still probabilities."""
    good, _ = aq.mean_sd(aq.GOOD)
    for drop in (0.1, 0.2, 0.3):
        mix = aq.shifted(drop)
        assert mix.sum() == pytest.approx(1.0) and mix.min() >= 0
        assert aq.mean_sd(mix)[0] == pytest.approx(good - drop)


def test_in_memory_histories_equal_the_stores_for_the_same_events(store: ClickHouseStore) -> None:
    """Each quality rule's history built from simulated minutes has the same buckets, sums and scores as the one the
    backtest reads from the scores table holding those events."""
    origin = datetime(2026, 1, 5, tzinfo=UTC)
    stream = aq.Stream(
        "app-x",
        3.0,
        [aq.Phase(0, (("model-a", "v1", 1.0, aq.GOOD),)), aq.Phase(2, (("model-a", "v2", 1.0, aq.shifted(0.2)),))],
    )
    minutes = aq.simulate([stream], hours=4, seed=3)
    rows = []
    for (app, model, version), per_minute in minutes.scores.items():
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
                    )
                )
    store.insert_rows(rows, dedup_token="bench-parity")
    since, until, step = origin + timedelta(hours=3), origin + timedelta(hours=4), timedelta(minutes=5)
    for rule in aq.quality_rules().rules:
        mine = aq._history(rule, minutes, origin, since, until, step)
        grid = grid_for(rule, since, step)
        assert grid is not None
        start, end = read_range(rule, since, until - step)
        theirs = fetch_score_history(store, rule, grid.covering(start), start, end)
        assert mine.series.keys() == theirs.series.keys(), rule.name
        for key, s in mine.series.items():
            t = theirs.series[key]
            assert np.array_equal(s.buckets, t.buckets), (rule.name, key)
            assert np.allclose(s.prefix, t.prefix), (rule.name, key)


@pytest.mark.long(seconds=43)
def test_a_tiny_run_pages_on_a_large_drop_and_prints_its_table(capsys: pytest.CaptureFixture[str]) -> None:
    """Two quiet apps for two days, the planted shapes at one rate for 4 h past the change: a large drop pages."""
    result = aq.main(quiet_apps=2, days=2.0, rates=(10.0,), json_path=None, planted_hours=aq.CHANGE_H + 4)
    large = [r for r in result["planted"] if r["shape"] == "large drop (0.3)"]
    assert large and large[0]["paged"] and large[0]["delay_min"] > 0 and large[0]["oracle_min"] > 0
    assert result["quiet"]["segment_days"] == pytest.approx(2 * (2.0 - 25 / 24))
    assert "false pages:" in capsys.readouterr().out
