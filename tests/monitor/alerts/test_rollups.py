"""The rollup tables and their plain views against aggregates computed directly on the raw rows."""

from __future__ import annotations

import math
import random
from datetime import timedelta

import pytest

from monitor.store.connection import ClickHouseStore
from tests.monitor.alerts.conftest import T0, insert, make_row


def _same(got: float | None, want: float | None, tol: float = 1e-9) -> bool:
    # The views say NULL where the raw aggregate over no rows is NaN or NULL.
    if want is None or (isinstance(want, float) and math.isnan(want)):
        return got is None
    return got is not None and got == pytest.approx(want, rel=tol, abs=tol)


def test_minutely_and_hourly_views_match_the_raw_rows(store: ClickHouseStore) -> None:
    """The minutely and hourly views match aggregates of the raw rows; redelivered rows count in `rows` but not in
    `events`."""
    rng = random.Random(11)
    rows = []
    for minute in range(130):  # spans three hours
        t = T0 + timedelta(minutes=minute)
        for app, pv in (("a", "v1"), ("a", "v2"), ("b", "v1")):
            for _ in range(rng.randint(0, 4)):
                at = t + timedelta(seconds=rng.randint(0, 59))
                if rng.random() < 0.1:
                    rows.append(
                        make_row(at, app=app, prompt_version=pv, status="error", cost=None, lag_s=rng.uniform(1, 30))
                    )
                else:
                    rows.append(
                        make_row(
                            at,
                            app=app,
                            prompt_version=pv,
                            score=round(rng.random(), 3),
                            lag_s=rng.uniform(1, 30),
                            cost=rng.choice([None, 0.002, 0.004]),
                            sample_rate=rng.choice([1.0, 0.5, 0.1]),
                        )
                    )
    insert(store, rows)
    dupes = rows[:7]
    insert(store, dupes)  # redelivered: the rollups count these rows twice, distinct `events` does not
    db, t = store.database, store.qualified_table

    for view, bucket in (("relevancy_minutely", "toStartOfMinute"), ("relevancy_hourly", "toStartOfHour")):
        col = "minute" if view.endswith("minutely") else "hour"
        got = store.query(
            f"SELECT {col}, app, prompt_version, rows, events, ok_rows, error_rows, mean_score, low_score_share, "
            "error_rate, "
            f"cost_usd, cost_known_rows, weighted_mean_score, lag_mean_s, lag_max_s, median, score_min "
            f"FROM {db}.{view} ORDER BY {col}, app, prompt_version"
        ).rows
        want = store.query(
            f"SELECT {bucket}(event_time) AS b, app, prompt_version, count(), uniqExact(event_id), countIf(status = "
            "'ok'), "
            f"countIf(status = 'error'), avgIf(score, status = 'ok'), countIf(status = 'ok' AND score < 0.5) / "
            "countIf(status = 'ok'), "
            f"countIf(status = 'error') / count(), sum(ifNull(cost_usd, 0)), countIf(cost_usd IS NOT NULL), "
            f"sumIf(score / sample_rate, status = 'ok') / sumIf(1 / sample_rate, status = 'ok'), "
            f"avg(dateDiff('millisecond', event_time, scored_at) / 1000), max(dateDiff('millisecond', event_time, "
            "scored_at) / 1000), "
            f"quantileExactIf(0.5)(score, status = 'ok'), minIf(score, status = 'ok') "
            f"FROM {t} GROUP BY b, app, prompt_version ORDER BY b, app, prompt_version"
        ).rows
        assert len(got) == len(want) > 0
        for g, w in zip(got, want, strict=True):
            assert g[:7] == w[:7]  # bucket, segment, counts (duplicates included), distinct events
            for gv, wv in zip(g[7:15], w[7:15], strict=True):
                assert _same(gv, wv), (g, w)
            if col == "hour":
                assert _same(g[15], w[15], tol=0.05), (g, w)  # t-digest median, approximate
            assert _same(g[16], w[16]), (g, w)
    total_rows, total_events = store.query(f"SELECT sum(rows), sum(events) FROM {db}.relevancy_hourly").rows[0]
    assert total_rows - total_events == len(dupes)


def test_views_need_no_merge_functions_and_drop_nothing_on_error_only_minutes(store: ClickHouseStore) -> None:
    """A minute with only error rows shows in the view with NULL scores, never a made-up 0."""
    insert(
        store, [make_row(T0, status="error", cost=None), make_row(T0 + timedelta(seconds=5), status="error", cost=None)]
    )
    row = store.query(
        f"SELECT rows, ok_rows, error_rate, mean_score, p10, low_score_share FROM {store.database}.relevancy_minutely"
    ).rows
    assert row == [(2, 0, 1.0, None, None, None)]  # no scores: NULL, never a made-up 0
