"""`migrate --check` reports a retention that differs from MONITOR_RETENTION_DAYS (and the text retention) as a
difference, in one line naming the tables and their days, exit 1; `migrate` applies it, and the check is then clean."""

from __future__ import annotations

import pytest

from monitor.cli.main import main
from monitor.store.connection import ClickHouseStore
from monitor.store.retention import RetentionPlan, TTLChange, ttl_days


def test_a_ttl_reads_as_its_days() -> None:
    """A TTL as ClickHouse renders it or as written reads as its days; none is `none`; anything else is shown as is."""
    assert ttl_days("toDateTime(event_time) + toIntervalDay(30)") == "30 days"
    assert ttl_days("minute + INTERVAL 7 DAY") == "7 days"
    assert ttl_days("hour + toIntervalDay('14')") == "14 days"
    assert ttl_days(None) == "none"
    assert ttl_days("minute + toIntervalHour(5)") == "minute + toIntervalHour(5)"


def test_the_summary_groups_the_tables_by_their_days() -> None:
    """One line: the tables whose TTL is 30 days and wanted 7 together, the text columns' TTL apart, each table once."""
    plan = RetentionPlan(
        "db",
        7,
        3,
        (
            TTLChange("relevancy_scores", "question", None, "toDateTime(event_time) + INTERVAL 3 DAY"),
            TTLChange("relevancy_scores", "response", None, "toDateTime(event_time) + INTERVAL 3 DAY"),
            TTLChange("relevancy_scores", None, "toDateTime(event_time) + toIntervalDay(30)", "x + INTERVAL 7 DAY"),
            TTLChange("traffic_counts", None, "minute + toIntervalDay(30)", "minute + INTERVAL 7 DAY"),
        ),
    )
    assert plan.summary() == (
        "retention: text TTL of db.relevancy_scores is none, MONITOR_TEXT_RETENTION_DAYS wants 3 days; "
        "TTL of db.relevancy_scores, db.traffic_counts is 30 days, MONITOR_RETENTION_DAYS wants 7 days"
    )


def test_migrate_check_reports_a_differing_retention_and_migrate_applies_it(
    store: ClickHouseStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a current schema without TTLs, MONITOR_RETENTION_DAYS=30: `--check` exits 1 with one `differs: retention`
    line naming the seven tables, `none` and `30 days`, and counts it; after `migrate`, `--check` says current (0)."""
    flags = ["--clickhouse-url", store.url, "--clickhouse-database", store.database]
    assert main(["migrate", "--check", *flags]) == 0  # retention unmanaged: nothing to compare
    capsys.readouterr()
    monkeypatch.setenv("MONITOR_RETENTION_DAYS", "30")
    assert main(["migrate", "--check", *flags]) == 1
    err = capsys.readouterr().err.splitlines()
    db = store.database
    assert err == [
        f"differs: retention: TTL of {db}.relevancy_scores, {db}.traffic_counts, {db}.relevancy_rollup_1m, "
        f"{db}.relevancy_rollup_1h, {db}.canary_runs, {db}.feedback, {db}.feedback_rollup_1m is none, "
        "MONITOR_RETENTION_DAYS wants 30 days (`migrate` applies it)",
        f"schema of {db}.relevancy_scores at {store.url} is not current: 0 pending, 1 difference(s)",
    ], err
    assert main(["migrate", *flags]) == 0
    capsys.readouterr()
    assert main(["migrate", "--check", *flags]) == 0
    assert capsys.readouterr().err.splitlines() == [f"schema of {db}.relevancy_scores at {store.url} is current"]
