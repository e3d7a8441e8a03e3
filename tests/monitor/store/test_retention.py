"""Retention as TTLs (privacy issue): the plan is pure and only holds what differs (re-running is a no-op); `migrate`
applies MONITOR_RETENTION_DAYS to the scores, traffic, rollup, canary and feedback tables and
MONITOR_TEXT_RETENTION_DAYS to the text columns (a feedback row's comment included), and chDB then deletes old rows
and empties old text; a store that does not migrate itself only warns."""

from __future__ import annotations

import os
from collections.abc import Iterator, MutableMapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import structlog

import monitor.runtime.logs
from monitor.cli.main import main
from monitor.config import load_settings
from monitor.feedback.rows import FEEDBACK_COLUMNS, FeedbackRow, feedback_values
from monitor.store.connection import ClickHouseStore
from monitor.store.migrations import Migrations
from monitor.store.retention import (
    FEEDBACK_TEXT_COLUMNS,
    TEXT_COLUMNS,
    TTLChange,
    parse_table,
    plan_retention,
    retention_tables,
    wanted_ttls,
)
from schemas.events import KafkaPosition
from schemas.feedback import AnswerRef, FeedbackEvent, Segment
from tests.monitor.alerts.conftest import canary_run, insert, insert_canary, insert_traffic, make_row
from tests.monitor.store.opening import open_as_run

# Every TTL a retention of rows and text sets on a store without any: a table TTL per managed table (scores, traffic,
# two rollups, canary runs, feedback, feedback rollup) and one per text column (the scores' and the feedback comment).
N_CHANGES = 7 + len(TEXT_COLUMNS) + len(FEEDBACK_TEXT_COLUMNS)

# ---- pure: reading a create_table_query and planning -----------------------------------------------------------


def _scores(ttl: str | None = None, text_ttl: str | None = None, table: str = "relevancy_scores") -> str:
    """A scores table's create_table_query as system.tables renders it, with a table TTL and a TTL on its text
    columns."""
    t = f" TTL {text_ttl}" if text_ttl else ""
    return (
        f"CREATE TABLE db.{table} (`event_id` String, `conversation_id` String, `event_time` DateTime64(3, 'UTC'), "
        f"`status` Enum8('ok' = 1, 'error' = 2), `score` Nullable(Float64), `reasoning` String{t}, `statements` "
        f"Array(String){t}, "
        f"`verdicts` Array(LowCardinality(String)), `verdict_reasons` Array(String){t}, `question` String{t}, "
        f"`response` String{t}, `context` String{t}, `system_instructions` String{t}, `context_digest` String, "
        "`redactions` Map(LowCardinality(String), UInt32), `version` UInt64) ENGINE = ReplacingMergeTree(version) "
        f"PARTITION BY toYYYYMM(event_time) ORDER BY (event_id){f' TTL {ttl}' if ttl else ''} SETTINGS "
        "non_replicated_deduplication_window = 1000"
    )


def _aggregate(table: str, column: str, ttl: str | None = None) -> str:
    return (
        f"CREATE TABLE db.{table} (`{column}` DateTime('UTC'), `app` LowCardinality(String), `n_rows` "
        "SimpleAggregateFunction(sum, UInt64)) "
        f"ENGINE = AggregatingMergeTree PARTITION BY toYYYYMM({column}) ORDER BY ({column}, "
        f"app){f' TTL {ttl}' if ttl else ''} "
        "SETTINGS index_granularity = 8192"
    )


def _current(days: int = 0, text_days: int = 0) -> dict[str, str]:
    """Every managed table as ClickHouse renders it after a retention of `days` and `text_days` (0: no TTL)."""

    def ttl(time: str, n: int) -> str | None:
        return f"{time} + toIntervalDay({n})" if n else None

    return {
        "relevancy_scores": _scores(ttl("toDateTime(event_time)", days), ttl("toDateTime(event_time)", text_days)),
        "traffic_counts": _aggregate("traffic_counts", "minute", ttl("minute", days)),
        "relevancy_rollup_1m": _aggregate("relevancy_rollup_1m", "minute", ttl("minute", days)),
        "relevancy_rollup_1h": _aggregate("relevancy_rollup_1h", "hour", ttl("hour", days)),
        "canary_runs": _canary(ttl("toDateTime(run_at)", days)),
        "feedback": _feedback(ttl("toDateTime(feedback_time)", days), ttl("toDateTime(feedback_time)", text_days)),
        "feedback_rollup_1m": _aggregate("feedback_rollup_1m", "minute", ttl("minute", days)),
    }


def _feedback(ttl: str | None = None, text_ttl: str | None = None) -> str:
    """The feedback table's create_table_query (the columns that matter here), with a table TTL and a comment TTL."""
    t = f" TTL {text_ttl}" if text_ttl else ""
    return (
        "CREATE TABLE db.feedback (`feedback_id` String, `event_id` String, `conversation_id` String, `feedback_time` "
        f"DateTime64(3, 'UTC'), `kind` Enum8('thumbs' = 1, 'rating' = 2), `comment` String{t}, "
        "`reason` LowCardinality(String), `version` UInt64) ENGINE = ReplacingMergeTree(version) PARTITION BY "
        f"toYYYYMM(feedback_time) ORDER BY feedback_id{f' TTL {ttl}' if ttl else ''} SETTINGS "
        "non_replicated_deduplication_window = 1000"
    )


def _canary(ttl: str | None = None) -> str:
    return (
        "CREATE TABLE db.canary_runs (`run_id` String, `run_at` DateTime64(3, 'UTC'), `judge_id` "
        "LowCardinality(String), "
        "`written_at` DateTime64(3, 'UTC')) ENGINE = ReplacingMergeTree(written_at) PARTITION BY toYYYYMM(run_at) "
        f"ORDER BY (judge_id, run_id){f' TTL {ttl}' if ttl else ''} SETTINGS index_granularity = 8192"
    )


def test_parse_reads_table_and_column_ttls_types_and_quoted_text() -> None:
    """The table TTL ends at SETTINGS; each column has its type (brackets and quotes included) and its TTL, which
    ends before COMMENT/CODEC; quotes and brackets inside comments, names and strings do not confuse the reading."""
    query = (
        "CREATE TABLE db.t (`t` DateTime64(3, 'UTC'), `q` String DEFAULT 'a, (b' COMMENT 'it\\'s TTL x' CODEC(ZSTD(3)) "
        "TTL toDateTime(t) + "
        "toIntervalDay(3), `odd, name` Enum8('a,b' = 1), "
        "`a` Array(String) TTL toDateTime(t) + toIntervalDay(4) COMMENT 'TTL', "
        "INDEX i q TYPE bloom_filter GRANULARITY 1) ENGINE = ReplicatedMergeTree('/clickhouse/{shard}/TTL', "
        "'{replica}') ORDER BY t "
        "TTL toDateTime(t) + toIntervalDay(30) SETTINGS index_granularity = 8192"
    )
    parsed = parse_table(query)
    assert parsed.ttl == "toDateTime(t) + toIntervalDay(30)"
    assert {name: (c.type, c.ttl) for name, c in parsed.columns.items()} == {
        "t": ("DateTime64(3, 'UTC')", None),
        "q": ("String", "toDateTime(t) + toIntervalDay(3)"),
        "odd, name": ("Enum8('a,b' = 1)", None),
        "a": ("Array(String)", "toDateTime(t) + toIntervalDay(4)"),
    }
    assert parse_table(_scores()).ttl is None and parse_table(_aggregate("x", "minute")).ttl is None
    # A column's own SETTINGS (...), which the parser does not know: refused, not misread.
    with pytest.raises(ValueError, match="cannot read"):
        parse_table(query.replace(" COMMENT 'TTL',", " SETTINGS (max_compress_block_size = 1),"))


def test_hand_set_ttls_in_other_spellings_are_read_as_the_same_ttl() -> None:
    """ClickHouse keeps the brackets and a quoted count of a TTL set by hand (`(minute + toIntervalDay('30'))`):
    they compare equal to the settings' `INTERVAL 30 DAY`, a comment naming TTL is not read as one, and a grouping
    that differs is still replaced."""
    current = _current(30, 7)
    current["traffic_counts"] = _aggregate("traffic_counts", "minute", "(minute + toIntervalDay('30'))")
    current["relevancy_rollup_1m"] = _aggregate("relevancy_rollup_1m", "minute", "((`minute`) + INTERVAL '30' DAY)")
    current["canary_runs"] = _canary("toDateTime(run_at) + INTERVAL '30 day'")
    current["relevancy_scores"] = current["relevancy_scores"].replace(
        "`question` String TTL toDateTime(event_time) + toIntervalDay(7)",
        "`question` String COMMENT 'TTL: 7 days (by hand)' TTL (toDateTime(event_time) + toIntervalDay('7'))",
    )
    assert not plan_retention("db", "relevancy_scores", 30, 7, current)
    regrouped = "(hour + toIntervalDay(15)) + toIntervalDay(15)"
    current["relevancy_rollup_1h"] = _aggregate("relevancy_rollup_1h", "hour", regrouped)
    assert plan_retention("db", "relevancy_scores", 30, 7, current).statements == (
        "ALTER TABLE db.relevancy_rollup_1h MODIFY TTL hour + INTERVAL 30 DAY",
    )


def test_the_wanted_ttls_follow_the_settings() -> None:
    """Rows by event time, run time or feedback time (as a DateTime) or the minute/hour column; text TTL (the scores'
    text columns, the feedback's comment) only when shorter than the rows'."""
    scores, traffic, minute, hour, canary, feedback, feedback_rollup = wanted_ttls("relevancy_scores", 30, 7)
    assert scores.ttl == "toDateTime(event_time) + INTERVAL 30 DAY"
    assert dict(scores.columns) == {c: "toDateTime(event_time) + INTERVAL 7 DAY" for c in TEXT_COLUMNS}
    assert (traffic.table, traffic.ttl) == ("traffic_counts", "minute + INTERVAL 30 DAY")
    assert (minute.table, minute.ttl, hour.table, hour.ttl) == (
        "relevancy_rollup_1m",
        "minute + INTERVAL 30 DAY",
        "relevancy_rollup_1h",
        "hour + INTERVAL 30 DAY",
    )
    assert (canary.table, canary.ttl, canary.columns) == ("canary_runs", "toDateTime(run_at) + INTERVAL 30 DAY", ())
    assert (feedback.table, feedback.ttl, feedback.columns) == (
        "feedback",
        "toDateTime(feedback_time) + INTERVAL 30 DAY",
        (("comment", "toDateTime(feedback_time) + INTERVAL 7 DAY"),),
    )
    assert (feedback_rollup.table, feedback_rollup.ttl) == ("feedback_rollup_1m", "minute + INTERVAL 30 DAY")
    assert dict(wanted_ttls("t", 30, 30)[5].columns) == {"comment": None}
    assert all(
        ttl is None for _, ttl in wanted_ttls("t", 30, 30)[0].columns
    )  # text cannot outlive the row: no column TTL
    assert dict(wanted_ttls("t", 0, 5)[0].columns)["question"] == "toDateTime(event_time) + INTERVAL 5 DAY"
    assert all(w.ttl is None for w in wanted_ttls("t", 0, 0))
    assert retention_tables("s") == (
        "s",
        "traffic_counts",
        "relevancy_rollup_1m",
        "relevancy_rollup_1h",
        "canary_runs",
        "feedback",
        "feedback_rollup_1m",
    )
    with pytest.raises(ValueError, match="0 or more"):
        wanted_ttls("t", -1, 0)


@pytest.mark.parametrize(("days", "text_days"), [(0, 0), (30, 0), (30, 7), (0, 7), (365, 30)])
def test_the_plan_is_empty_when_the_tables_already_have_the_retention(days: int, text_days: int) -> None:
    """Tables rendered with the wanted TTLs (ClickHouse's `toIntervalDay(N)` form) need no statement."""
    plan = plan_retention("db", "relevancy_scores", days, text_days, _current(days, text_days))
    assert not plan and plan.changes == () and plan.statements == ()


def test_setting_a_retention_alters_each_table_once_with_the_table_ttl_last() -> None:
    """From no TTL to 30/7 days: one ALTER per table, the text columns with their types, MODIFY TTL last."""
    plan = plan_retention("db", "relevancy_scores", 30, 7, _current())
    text = "toDateTime(event_time) + INTERVAL 7 DAY"
    assert plan.statements == (
        f"ALTER TABLE db.relevancy_scores MODIFY COLUMN question String TTL {text}, MODIFY COLUMN response String TTL "
        f"{text}, "
        f"MODIFY COLUMN reasoning String TTL {text}, MODIFY COLUMN statements Array(String) TTL {text}, "
        f"MODIFY COLUMN verdict_reasons Array(String) TTL {text}, MODIFY COLUMN context String TTL {text}, "
        f"MODIFY COLUMN system_instructions String TTL {text}, MODIFY TTL toDateTime(event_time) + INTERVAL 30 DAY",
        "ALTER TABLE db.traffic_counts MODIFY TTL minute + INTERVAL 30 DAY",
        "ALTER TABLE db.relevancy_rollup_1m MODIFY TTL minute + INTERVAL 30 DAY",
        "ALTER TABLE db.relevancy_rollup_1h MODIFY TTL hour + INTERVAL 30 DAY",
        "ALTER TABLE db.canary_runs MODIFY TTL toDateTime(run_at) + INTERVAL 30 DAY",
        "ALTER TABLE db.feedback MODIFY COLUMN comment String TTL toDateTime(feedback_time) + INTERVAL 7 DAY, "
        "MODIFY TTL toDateTime(feedback_time) + INTERVAL 30 DAY",
        "ALTER TABLE db.feedback_rollup_1m MODIFY TTL minute + INTERVAL 30 DAY",
    )
    assert (
        len(plan.changes) == 15
        and TTLChange("relevancy_scores", None, None, "toDateTime(event_time) + INTERVAL 30 DAY") in plan.changes
    )
    assert plan.wanted == "rows 30 days, text 7 days"
    assert "db.relevancy_scores: TTL none -> toDateTime(event_time) + INTERVAL 30 DAY" in plan.describe()


def test_changing_only_the_days_changes_only_what_differs() -> None:
    """30/7 to 60/7 alters the table TTLs only; 30/7 to 30/3 only the text columns of the scores table and the
    feedback's comment."""
    longer = plan_retention("db", "relevancy_scores", 60, 7, _current(30, 7))
    assert longer.statements[0] == "ALTER TABLE db.relevancy_scores MODIFY TTL toDateTime(event_time) + INTERVAL 60 DAY"
    assert len(longer.statements) == 7 and all("COLUMN" not in st for st in longer.statements)
    assert longer.changes[0].before == "toDateTime(event_time) + toIntervalDay(30)"
    shorter_text = plan_retention("db", "relevancy_scores", 30, 3, _current(30, 7))
    assert len(shorter_text.statements) == 2 and shorter_text.statements[0].count("MODIFY COLUMN") == len(TEXT_COLUMNS)
    assert shorter_text.statements[1] == (
        "ALTER TABLE db.feedback MODIFY COLUMN comment String TTL toDateTime(feedback_time) + INTERVAL 3 DAY"
    )
    assert all("MODIFY TTL" not in st for st in shorter_text.statements) and {
        c.column for c in shorter_text.changes
    } == {*TEXT_COLUMNS, *FEEDBACK_TEXT_COLUMNS}


def test_a_zero_retention_removes_the_ttls() -> None:
    """0/0 on tables with TTLs: REMOVE TTL on each table and MODIFY COLUMN c REMOVE TTL on each text column."""
    plan = plan_retention("db", "relevancy_scores", 0, 0, _current(30, 7))
    removes = ", ".join(f"MODIFY COLUMN {c} REMOVE TTL" for c in TEXT_COLUMNS)
    assert plan.statements == (
        f"ALTER TABLE db.relevancy_scores {removes}, REMOVE TTL",
        "ALTER TABLE db.traffic_counts REMOVE TTL",
        "ALTER TABLE db.relevancy_rollup_1m REMOVE TTL",
        "ALTER TABLE db.relevancy_rollup_1h REMOVE TTL",
        "ALTER TABLE db.canary_runs REMOVE TTL",
        "ALTER TABLE db.feedback MODIFY COLUMN comment REMOVE TTL, REMOVE TTL",
        "ALTER TABLE db.feedback_rollup_1m REMOVE TTL",
    )
    assert (
        all(c.after is None for c in plan.changes)
        and str(plan.changes[-1]) == "feedback_rollup_1m: TTL minute + toIntervalDay(30) removed"
    )


def test_a_ttl_set_by_hand_is_replaced_and_interval_spellings_compare_equal() -> None:
    """A different TTL expression is replaced by the settings'; `INTERVAL 30 DAY` and `toIntervalDay(30)` are equal."""
    current = _current(30, 0)
    current["traffic_counts"] = _aggregate("traffic_counts", "minute", "minute + INTERVAL 30 DAY")
    assert not plan_retention("db", "relevancy_scores", 30, 0, current)
    current["traffic_counts"] = _aggregate(
        "traffic_counts", "minute", "minute + toIntervalDay(30) DELETE WHERE app = 'x'"
    )
    assert plan_retention("db", "relevancy_scores", 30, 0, current).statements == (
        "ALTER TABLE db.traffic_counts MODIFY TTL minute + INTERVAL 30 DAY",
    )


def test_the_plan_is_on_cluster_with_a_cluster() -> None:
    """With a cluster every ALTER names ON CLUSTER right after the table."""
    plan = plan_retention("db", "relevancy_scores", 30, 7, _current(), cluster="prod")
    assert [st.split(" MODIFY ")[0] for st in plan.statements] == [
        f"ALTER TABLE db.{t} ON CLUSTER prod" for t in retention_tables("relevancy_scores")
    ]


def test_a_missing_table_or_text_column_is_refused() -> None:
    """The plan names a managed table missing from the store, or a text column missing from the scores table."""
    current = _current()
    del current["relevancy_rollup_1h"]
    with pytest.raises(ValueError, match=r"db\.relevancy_rollup_1h not found"):
        plan_retention("db", "relevancy_scores", 30, 0, current)
    current = _current()
    current["relevancy_scores"] = current["relevancy_scores"].replace("`reasoning` String, ", "")
    with pytest.raises(ValueError, match="column reasoning not found"):
        plan_retention("db", "relevancy_scores", 30, 7, current)
    current = _current()
    current["feedback"] = current["feedback"].replace("`comment` String, ", "")
    with pytest.raises(ValueError, match=r"column comment not found in db\.feedback"):
        plan_retention("db", "relevancy_scores", 30, 7, current)


# ---- against the real store (chDB) ---------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in list(os.environ):
        if k.startswith(("MONITOR_", "ALERTS_", "ANTHROPIC_")):
            monkeypatch.delenv(k)
    monkeypatch.setattr(monitor.runtime.logs, "configure_logging", lambda *a, **k: None)


@pytest.fixture
def kept(clickhouse_url: str, database: str) -> Iterator[Migrations]:
    """A store keeping rows 30 days and text 7 days, on a fresh database (not yet migrated); dropped afterwards."""
    s = Migrations(
        ClickHouseStore(clickhouse_url, database, "relevancy_scores"), retention_days=30, text_retention_days=7
    )
    yield s
    s.store.command(f"DROP DATABASE IF EXISTS {database} SYNC")


def _create_queries(store: ClickHouseStore) -> dict[str, str]:
    rows = store.query(
        "SELECT name, create_table_query FROM system.tables WHERE database = {d:String}", {"d": store.database}
    ).rows
    return {str(n): str(q) for n, q in rows}


def _optimize(store: ClickHouseStore) -> None:
    for table in retention_tables(store.table):
        store.command(f"OPTIMIZE TABLE {store.database}.{table} FINAL")


def test_migrate_sets_the_ttls_and_a_second_migrate_changes_nothing(kept: Migrations) -> None:
    """After migrate with 30/7 days each table's create_table_query carries its TTL and each text column its own;
    migrating again applies no statement."""
    kept.migrate()
    assert kept.retention_applied is not None and len(kept.retention_applied.changes) == N_CHANGES
    queries = _create_queries(kept.store)
    assert (
        "ORDER BY (app, judge_id, event_id) TTL toDateTime(event_time) + toIntervalDay(30) SETTINGS"
        in queries["relevancy_scores"]
    )
    for column in TEXT_COLUMNS:
        assert (
            parse_table(queries["relevancy_scores"]).columns[column].ttl == "toDateTime(event_time) + toIntervalDay(7)"
        )
    assert parse_table(queries["relevancy_scores"]).columns["event_id"].ttl is None
    assert (
        " TTL minute + toIntervalDay(30) " in queries["traffic_counts"]
        and " TTL minute + toIntervalDay(30) " in queries["relevancy_rollup_1m"]
    )
    assert " TTL hour + toIntervalDay(30) " in queries["relevancy_rollup_1h"]
    assert " TTL toDateTime(run_at) + toIntervalDay(30) " in queries["canary_runs"]
    feedback = parse_table(queries["feedback"])
    assert feedback.ttl == "toDateTime(feedback_time) + toIntervalDay(30)"
    assert {name: c.ttl for name, c in feedback.columns.items() if c.ttl} == {
        "comment": "toDateTime(feedback_time) + toIntervalDay(7)"
    }
    assert parse_table(queries["feedback_rollup_1m"]).ttl == "minute + toIntervalDay(30)"
    kept.migrate()
    assert kept.retention_applied is not None and not kept.retention_applied and kept.retention_applied.statements == ()
    assert _create_queries(kept.store) == queries


def test_every_table_of_the_schema_is_read_with_the_types_system_columns_has(kept: Migrations) -> None:
    """Each create_table_query of a migrated store (tables, views, materialized views) is read: its columns, in order,
    with the types system.columns gives them; the TTLs as ClickHouse renders them."""
    kept.migrate()
    columns = kept.store.query(
        "SELECT table, name, type FROM system.columns WHERE database = {d:String} ORDER BY table, position",
        {"d": kept.store.database},
    ).rows
    queries = _create_queries(kept.store)
    assert len(queries) > len(retention_tables(kept.store.table))
    for table, query in queries.items():
        parsed = parse_table(query)
        types = [(name, column_type) for of, name, column_type in columns if of == table]
        assert [(name, column.type) for name, column in parsed.columns.items()] == types, table
    assert parse_table(queries["relevancy_scores"]).ttl == "toDateTime(event_time) + toIntervalDay(30)"
    assert parse_table(queries["relevancy_rollup_1h"]).ttl == "hour + toIntervalDay(30)"


def test_ttls_set_by_hand_in_other_spellings_are_left_alone(kept: Migrations) -> None:
    """TTLs altered by hand to the same retention in other spellings (brackets, `INTERVAL '30' DAY`, a comment naming
    TTL), which ClickHouse renders as written, give an empty plan."""
    kept.migrate()
    db, off = kept.store.database, {"materialize_ttl_after_modify": 0}
    kept.store.command(f"ALTER TABLE {db}.traffic_counts MODIFY TTL (minute + INTERVAL '30' DAY)", settings=off)
    kept.store.command(f"ALTER TABLE {db}.relevancy_rollup_1h MODIFY TTL ((`hour`) + toIntervalDay(30))", settings=off)
    kept.store.command(
        f"ALTER TABLE {db}.relevancy_scores MODIFY COLUMN question String COMMENT 'TTL: 7 days, (by hand)' "
        "TTL (toDateTime(event_time) + INTERVAL '7' DAY)",
        settings=off,
    )
    queries = _create_queries(kept.store)
    assert "TTL (minute + toIntervalDay('30')) SETTINGS" in queries["traffic_counts"]
    assert "TTL ((hour) + toIntervalDay(30)) SETTINGS" in queries["relevancy_rollup_1h"]
    question = "`question` String COMMENT 'TTL: 7 days, (by hand)' TTL (toDateTime(event_time) + toIntervalDay('7'))"
    assert question in queries["relevancy_scores"]
    assert not kept.retention_plan()


def _age(store: ClickHouseStore, days_ago: list[int]) -> None:
    now = datetime.now(UTC)
    rows = [make_row(now - timedelta(days=d), event_id=f"e{d}", statements=["s"], verdicts=["yes"]) for d in days_ago]
    insert(store, rows)
    minute = (now - timedelta(days=0)).replace(second=0, microsecond=0)
    insert_traffic(store, [(minute - timedelta(days=d), "support", "m1", "v1", 10, 5) for d in days_ago])
    insert_canary(store, [canary_run(now - timedelta(days=d), seed=d) for d in days_ago])
    store.insert_table("feedback", FEEDBACK_COLUMNS, [feedback_values(_feedback_row(now, d)) for d in days_ago])


def _feedback_row(now: datetime, days_ago: int) -> FeedbackRow:
    """A thumbs down with a comment on answer e<days_ago>, given `days_ago` days before `now`."""
    at = now - timedelta(days=days_ago)
    event = FeedbackEvent(
        f"f{days_ago}", AnswerRef(event_id=f"e{days_ago}"), at, "thumbs", 0.0, 1, True, "json", comment="wrong [EMAIL]"
    )
    return FeedbackRow(
        event, Segment("support", "m1", "v1"), "feedback", KafkaPosition(topic="fb", partition=0, offset=days_ago), at
    )


def _ages_left(store: ClickHouseStore) -> dict[str, list[tuple[object, ...]]]:
    db = store.database
    return {
        "scores": store.query(
            f"SELECT event_id, question, response, reasoning, statements, verdict_reasons, verdicts, score"
            f" FROM {db}.relevancy_scores ORDER BY event_id"
        ).rows,
        "traffic": store.query(f"SELECT dateDiff('day', minute, now()) FROM {db}.traffic_counts ORDER BY 1").rows,
        "minutely": store.query(f"SELECT dateDiff('day', minute, now()) FROM {db}.relevancy_rollup_1m ORDER BY 1").rows,
        "hourly": store.query(f"SELECT dateDiff('day', hour, now()) FROM {db}.relevancy_rollup_1h ORDER BY 1").rows,
        "canary": store.query(f"SELECT DISTINCT dateDiff('day', run_at, now()) FROM {db}.canary_runs ORDER BY 1").rows,
        "feedback": store.query(
            f"SELECT feedback_id, comment, negative FROM {db}.feedback ORDER BY feedback_time DESC"
        ).rows,
        "feedback_minutely": store.query(
            f"SELECT dateDiff('day', minute, now()), n_feedback FROM {db}.feedback_rollup_1m ORDER BY 1"
        ).rows,
    }


def test_rows_past_the_retention_go_and_old_text_is_emptied_after_optimize(kept: Migrations) -> None:
    """With 30/7 days, after OPTIMIZE ... FINAL: rows 40 days old are gone from every table; a row 10 days old keeps
    its score and verdicts but its text columns are empty (a feedback row its verdict but not its comment); a row 1
    day old keeps everything."""
    kept.migrate()
    _age(kept.store, [1, 10, 40])
    _optimize(kept.store)
    left = _ages_left(kept.store)
    assert left["scores"] == [
        ("e1", "q support", "a support", "r", ["s"], [""], ["yes"], 0.8),
        ("e10", "", "", "", [], [], ["yes"], 0.8),
    ]
    assert left["traffic"] == [(1,), (10,)] and left["minutely"] == [(1,), (10,)] and left["hourly"] == [(1,), (10,)]
    assert left["canary"] == [(1,), (10,)]
    assert left["feedback"] == [("f1", "wrong [EMAIL]", True), ("f10", "", True)]
    assert left["feedback_minutely"] == [(1, 1), (10, 1)]


def test_rows_stored_before_the_retention_was_set_go_when_migrate_applies_it(
    clickhouse_url: str, kept: Migrations
) -> None:
    """Rows written under no retention are deleted (and old text emptied) by the migrate that sets one, without any
    OPTIMIZE: the TTL is materialized on the existing parts (chDB waits for that mutation)."""
    forever = Migrations(ClickHouseStore(clickhouse_url, kept.store.database, kept.store.table))
    forever.migrate()
    _age(forever.store, [1, 10, 40])
    kept.migrate()
    left = _ages_left(kept.store)
    assert [(r[0], r[1]) for r in left["scores"]] == [("e1", "q support"), ("e10", "")]
    assert left["traffic"] == [(1,), (10,)] and left["minutely"] == [(1,), (10,)]
    assert left["feedback"] == [("f1", "wrong [EMAIL]", True), ("f10", "", True)]
    assert left["feedback_minutely"] == [(1, 1), (10, 1)]


def test_a_zero_retention_removes_the_ttls_and_keeps_old_rows(clickhouse_url: str, kept: Migrations) -> None:
    """Migrating with 0/0 after 30/7 removes every TTL; rows of any age then stay through OPTIMIZE ... FINAL."""
    kept.migrate()
    forever = Migrations(ClickHouseStore(clickhouse_url, kept.store.database, kept.store.table), retention_days=0)
    forever.migrate()
    assert forever.retention_applied is not None and len(forever.retention_applied.changes) == N_CHANGES
    assert all(" TTL " not in q for q in _create_queries(forever.store).values())
    _age(forever.store, [1, 40])
    _optimize(forever.store)
    left = _ages_left(forever.store)
    assert [(r[0], r[1]) for r in left["scores"]] == [("e1", "q support"), ("e40", "q support")]
    assert [r[:2] for r in left["feedback"]] == [("f1", "wrong [EMAIL]"), ("f40", "wrong [EMAIL]")]
    assert left["feedback_minutely"] == [(1, 1), (40, 1)]


def test_a_migrate_without_a_retention_setting_leaves_the_ttls_alone(clickhouse_url: str, kept: Migrations) -> None:
    """MONITOR_RETENTION_DAYS unset (a `migrate` run without the deployment's settings) changes no TTL and checks
    none."""
    kept.migrate()
    before = _create_queries(kept.store)
    unset = Migrations(ClickHouseStore(clickhouse_url, kept.store.database, kept.store.table))
    unset.migrate()
    unset.check()
    assert (unset.retention_applied, unset.retention_pending) == (None, None)
    assert _create_queries(kept.store) == before and " TTL " in before["relevancy_scores"]


def test_check_schema_finds_a_differing_retention_without_applying_it(clickhouse_url: str, kept: Migrations) -> None:
    """A store that does not migrate itself: check_schema passes, leaves the difference in retention_pending and
    alters nothing; an equal retention leaves it empty."""
    Migrations(ClickHouseStore(clickhouse_url, kept.store.database, kept.store.table)).migrate()
    before = _create_queries(kept.store)
    kept.check()
    assert kept.retention_pending is not None and len(kept.retention_pending.changes) == N_CHANGES
    assert _create_queries(kept.store) == before
    kept.migrate()
    kept.check()
    assert kept.retention_pending is not None and not kept.retention_pending


def _schema_events(logs: list[MutableMapping[str, Any]]) -> list[str]:
    """The events logged about the schema (the embedded store's read endpoint logs its start besides)."""
    return [e["event"] for e in logs if not e["event"].startswith("embedded_reader")]


def test_run_without_migrating_warns_about_a_differing_retention_and_starts(
    clickhouse_url: str, kept: Migrations
) -> None:
    """`run`'s opening of a store that does not migrate itself logs one warning naming `relevancy-monitor
    migrate` (and does not refuse); migrating itself, it applies the retention and logs that instead."""
    Migrations(ClickHouseStore(clickhouse_url, kept.store.database, kept.store.table)).migrate()
    settings = load_settings(
        clickhouse_url=clickhouse_url, clickhouse_database=kept.store.database, auto_migrate=False, retention_days=30
    )
    with structlog.testing.capture_logs() as logs:
        open_as_run(settings.store)
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert len(warnings) == 1 and "relevancy-monitor migrate" in warnings[0]["event"], logs
    assert warnings[0]["retention"] == "rows 30 days, text as long as the row" and len(warnings[0]["changes"]) == 7
    assert " TTL " not in _create_queries(kept.store)["relevancy_scores"]
    migrating = load_settings(
        clickhouse_url=clickhouse_url, clickhouse_database=kept.store.database, auto_migrate=True, retention_days=30
    )
    with structlog.testing.capture_logs() as logs:
        open_as_run(migrating.store)
    assert _schema_events(logs) == ["retention applied"] and " TTL " in _create_queries(kept.store)["relevancy_scores"]
    with structlog.testing.capture_logs() as logs:
        open_as_run(settings.store)
    assert _schema_events(logs) == []


def test_the_migrate_command_prints_the_retention_changes(
    clickhouse_url: str, database: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`relevancy-monitor migrate` with MONITOR_RETENTION_DAYS prints each TTL it changed, then `unchanged`."""
    monkeypatch.setenv("MONITOR_RETENTION_DAYS", "30")
    monkeypatch.setenv("MONITOR_TEXT_RETENTION_DAYS", "7")
    flags = ["--clickhouse-url", clickhouse_url, "--clickhouse-database", database]
    try:
        assert main(["migrate", *flags]) == 0
        err = capsys.readouterr().err.splitlines()
        assert err[1] == (
            f"retention set to rows 30 days, text 7 days ({N_CHANGES} TTL change(s); rows already stored follow in the "
            "background):"
        ), err
        assert f"  {database}.relevancy_scores: TTL none -> toDateTime(event_time) + INTERVAL 30 DAY" in err
        assert (
            f"  {database}.relevancy_scores.question: text TTL none -> toDateTime(event_time) + INTERVAL 7 DAY" in err
        )
        assert f"  {database}.canary_runs: TTL none -> toDateTime(run_at) + INTERVAL 30 DAY" in err
        assert f"  {database}.feedback: TTL none -> toDateTime(feedback_time) + INTERVAL 30 DAY" in err
        assert f"  {database}.feedback.comment: text TTL none -> toDateTime(feedback_time) + INTERVAL 7 DAY" in err
        assert f"  {database}.feedback_rollup_1m: TTL none -> minute + INTERVAL 30 DAY" in err
        assert len(err) == 2 + N_CHANGES
        assert main(["migrate", *flags]) == 0
        assert capsys.readouterr().err.splitlines()[1:] == ["retention unchanged: rows 30 days, text 7 days"]
    finally:
        cleanup = ClickHouseStore(clickhouse_url, database, "relevancy_scores")
        cleanup.command(f"DROP DATABASE IF EXISTS {database} SYNC")
