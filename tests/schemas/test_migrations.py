"""Schema migrations (issue 11): each versioned DDL file is applied once, in order, and recorded with its checksum in
`{database}.schema_migrations`; an applied file that changed is refused; a store made by the first release (its
frozen files in tests/schemas/first_release, with or without its records) upgrades to exactly a fresh install and
keeps its rows; with a cluster the DDL is ON CLUSTER with Replicated engines, without one it is unchanged."""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

import pytest

import monitor.store.migrations as store_module
from monitor.alerts.queries import fetch_no_content
from monitor.alerts.state import StateStore
from monitor.cli.main import main
from monitor.report.model import Replays
from monitor.report.queries import fetch_report_data
from monitor.store.connection import ClickHouseStore
from monitor.store.migrations import Migrations
from schemas.ddl import (
    MIGRATIONS_TABLE,
    PER_GRAIN_SUFFIX,
    ROLLUP_GRAINS,
    Migration,
    ddl_files,
    migrations,
    migrations_table_ddl,
    on_cluster,
    render_ddl,
)
from schemas.errors import StoreError
from schemas.scored import SCORED_COLUMNS


def _previous_render(database: str, table: str) -> list[str]:
    """`render_ddl` as the previous release wrote it, to hold the non-cluster DDL to byte-for-byte equality."""
    folder = resources.files("schemas") / "sql"
    statements = []
    for name in ddl_files():
        text = (folder / name).read_text(encoding="utf-8")
        body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--")).strip()
        if name.endswith(PER_GRAIN_SUFFIX):
            statements += [body.format(database=database, table=table, grain=grain) for grain in ROLLUP_GRAINS]
        else:
            statements.append(body.format(database=database, table=table))
    return statements


@pytest.fixture
def fresh(clickhouse_url: str, database: str) -> Iterator[ClickHouseStore]:
    """A store on a database nothing has created yet; dropped afterwards."""
    s = ClickHouseStore(clickhouse_url, database, "relevancy_scores")
    yield s
    s.command(f"DROP DATABASE IF EXISTS {database} SYNC")


def _recorded(store: ClickHouseStore) -> list[tuple[str, str, str]]:
    sql = (
        f"SELECT version, name, checksum FROM {store.database}.schema_migrations FINAL WHERE scores_table = "
        f"{{t:String}} ORDER BY version"
    )
    rows = store.query(sql, {"t": store.table}).rows
    return [(str(v), str(n), str(c)) for v, n, c in rows]


def _tables(store: ClickHouseStore) -> set[str]:
    return {
        str(r[0])
        for r in store.query("SELECT name FROM system.tables WHERE database = {d:String}", {"d": store.database}).rows
    }


# ---- the rendered DDL ---------------------------------------------------------------------------------------


def test_non_cluster_ddl_is_byte_for_byte_the_previous_one() -> None:
    """Without a cluster, render_ddl is exactly what the previous release rendered (no migration table among it)."""
    assert render_ddl("relevancy", "relevancy_scores") == _previous_render("relevancy", "relevancy_scores")
    assert render_ddl("db2", "t2", None) == _previous_render("db2", "t2")
    assert not any("schema_migrations" in st for st in render_ddl("relevancy", "relevancy_scores"))


def test_cluster_ddl_is_on_cluster_with_replicated_engines() -> None:
    """With a cluster every CREATE and ALTER names ON CLUSTER right after its object, every MergeTree engine is
    Replicated* with the macro path and replica before its own arguments, and nothing else changes."""
    plain = render_ddl("relevancy", "relevancy_scores") + migrations_table_ddl("relevancy")
    clustered = render_ddl("relevancy", "relevancy_scores", "prod") + migrations_table_ddl("relevancy", "prod")
    assert len(clustered) == len(plain)
    head = re.compile(
        r"^(?:CREATE (DATABASE|TABLE|VIEW|MATERIALIZED VIEW) IF NOT EXISTS|ALTER TABLE) [A-Za-z_][A-Za-z0-9_.]* ON CLU"
        r"STER prod(\s|$)"
    )
    engines = 0
    for before, after in zip(plain, clustered, strict=True):
        assert head.match(after), after[:120]
        assert after.count("ON CLUSTER") == 1
        for engine in re.findall(r"ENGINE = (\w+)(\([^()]*\))?", after):
            engines += 1
            assert engine[0].startswith("Replicated") and engine[0].endswith("MergeTree"), engine
            assert engine[1].startswith("('/clickhouse/tables/{shard}/{database}/{table}', '{replica}'"), engine
        assert "non_replicated_deduplication_window" not in after
        undo = (
            after.replace(" ON CLUSTER prod", "")
            .replace("'/clickhouse/tables/{shard}/{database}/{table}', '{replica}', ", "")
            .replace("('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')", "")
            .replace("ENGINE = Replicated", "ENGINE = ")
            .replace("replicated_deduplication_window", "non_replicated_deduplication_window")
        )
        assert undo == before
    assert engines == sum("ENGINE = " in st for st in plain) and engines >= 7


def test_on_cluster_refuses_what_it_cannot_place() -> None:
    """A statement that is not CREATE ... IF NOT EXISTS, ALTER TABLE or DELETE FROM, or a cluster name that is not an
    identifier, is refused."""
    with pytest.raises(ValueError, match="ON CLUSTER"):
        on_cluster("DROP TABLE db.t", "prod")
    with pytest.raises(ValueError, match="cluster name"):
        on_cluster("CREATE DATABASE IF NOT EXISTS db", "prod; DROP")


def test_every_file_is_a_migration_with_its_own_version_and_a_checksum_over_its_sql() -> None:
    """Each DDL file is one migration, versions are unique and ordered, and the checksum ignores comment lines only."""
    ms = migrations("relevancy", "relevancy_scores")
    assert [m.name for m in ms] == ddl_files()
    assert [m.version for m in ms] == sorted({m.version for m in ms})
    assert all(m.version.isdigit() and re.fullmatch(r"[0-9a-f]{64}", m.checksum) for m in ms)
    assert [m.checksum for m in ms] == [
        m.checksum for m in migrations("other", "t", "c")
    ]  # per file, not per rendering
    per_grain = next(m for m in ms if m.name.endswith(PER_GRAIN_SUFFIX))
    assert len(per_grain.statements) == len(ROLLUP_GRAINS)


# ---- applying them ------------------------------------------------------------------------------------------


def test_migrate_applies_each_version_once_in_order_and_records_it(fresh: ClickHouseStore) -> None:
    """A new store gets every migration applied and recorded (version, name, checksum, applied_at); a second run
    applies none."""
    applied = Migrations(fresh).migrate()
    want = migrations(fresh.database, fresh.table)
    assert [m.version for m in applied] == [m.version for m in want]
    assert _recorded(fresh) == [(m.version, m.name, m.checksum) for m in want]
    assert {"relevancy_scores", "traffic_counts", "alert_state", "schema_migrations"} <= _tables(fresh)
    at = fresh.query(f"SELECT min(applied_at) > now64() - INTERVAL 1 HOUR FROM {fresh.database}.schema_migrations").rows
    assert at == [(True,)]
    assert Migrations(fresh).migrate() == [] and Migrations(fresh).pending() == []
    assert len(_recorded(fresh)) == len(want)


def test_a_new_numbered_migration_is_applied_once(fresh: ClickHouseStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file added after a store was migrated (a new index) is the one pending migration, applied once."""
    Migrations(fresh).migrate()
    base = migrations(fresh.database, fresh.table)
    index = (
        f"ALTER TABLE {fresh.database}.{fresh.table} ADD INDEX IF NOT EXISTS idx_model model TYPE set(100) "
        "GRANULARITY 4"
    )
    extra = Migration("900", "900_model_index.sql", "0" * 64, (index,))
    monkeypatch.setattr(store_module, "migrations", lambda database, table, cluster=None: [*base, extra])
    assert Migrations(fresh).pending() == [extra]
    assert Migrations(fresh).migrate() == [extra]
    assert Migrations(fresh).migrate() == []
    assert _recorded(fresh)[-1] == ("900", "900_model_index.sql", "0" * 64)
    indexes = fresh.query(
        "SELECT name FROM system.data_skipping_indices WHERE database = {d:String}", {"d": fresh.database}
    ).rows
    assert ("idx_model",) in indexes


def test_an_applied_migration_that_changed_is_refused_in_one_line(
    fresh: ClickHouseStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Editing an applied file (its checksum changes) makes migrate and the start-up check refuse, naming the file."""
    Migrations(fresh).migrate()
    edited = [
        Migration(m.version, m.name, "f" * 64, m.statements) if m.name == "001_relevancy_scores.sql" else m
        for m in migrations(fresh.database, fresh.table)
    ]
    monkeypatch.setattr(store_module, "migrations", lambda database, table, cluster=None: edited)
    for step in (Migrations(fresh).migrate, Migrations(fresh).check, Migrations(fresh).ensure):
        with pytest.raises(StoreError) as info:
            step()
        msg = str(info.value)
        assert (
            "\n" not in msg
            and "001_relevancy_scores.sql was changed after it was applied" in msg
            and "new numbered migration" in msg
        ), msg


def test_a_second_scores_table_in_the_same_database_gets_its_own_schema(fresh: ClickHouseStore) -> None:
    """Migrations are recorded per scores table: another MONITOR_CLICKHOUSE_TABLE in a migrated database is created
    too."""
    Migrations(fresh).migrate()
    other = ClickHouseStore(fresh.url, fresh.database, "other_scores")
    assert len(Migrations(other).pending()) == len(migrations(fresh.database, "other_scores"))
    assert len(Migrations(other).migrate()) == len(migrations(fresh.database, "other_scores"))
    assert "other_scores" in _tables(fresh) and Migrations(other).pending() == [] and Migrations(fresh).pending() == []


def test_the_migrate_command_reports_what_it_applied(
    clickhouse_url: str, database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`relevancy-monitor migrate` applies the pending migrations and says how many; run again, that it is up to
    date."""
    args = ["migrate", "--clickhouse-url", clickhouse_url, "--clickhouse-database", database]
    try:
        assert main(args) == 0
        err = capsys.readouterr().err
        assert (
            f"{len(ddl_files())} migration(s) applied: 000_database.sql" in err
            and f"applied at {clickhouse_url}" in err
        ), err
        assert main(args) == 0
        assert "already up to date" in capsys.readouterr().err
    finally:
        cleanup = ClickHouseStore(clickhouse_url, database, "relevancy_scores")
        cleanup.command(f"DROP DATABASE IF EXISTS {database} SYNC")


def test_asking_a_missing_embedded_store_for_its_migrations_creates_nothing(tmp_path: Path) -> None:
    """A missing embedded directory has no migration applied, and asking does not create it (chDB would)."""
    s = ClickHouseStore(f"chdb://{tmp_path / 'none'}", "relevancy", "relevancy_scores")
    assert Migrations(s).applied() == {} and not (tmp_path / "none").exists()


# ---- upgrading a store of the first release -------------------------------------------------------------------
# tests/schemas/first_release holds schemas/sql of FIRST_RELEASE (byte-for-byte, see its README). A store is made
# from those files the way that release made it, given rows in each of its tables, upgraded by today's `migrate`
# command and compared with a fresh install of today's schema.

FIRST_RELEASE = "ec1479ea58442242ae9035f8a0a3e218de09568a"
FIRST_RELEASE_DIR = Path(__file__).resolve().parent / "first_release"
# `git ls-tree ec1479e schemas/sql/`: the git blob id of each file, so an edit of a fixture cannot pass unnoticed.
FIRST_RELEASE_BLOBS = {
    "000_database.sql": "80afcac146de75c020f4b50dec6d78db312d1960",
    "001_relevancy_scores.sql": "3df1a053c51dc8357897edd8d610197bdaf0338c",
    "002_traffic_counts.sql": "9917129ebe80a3ecc638773ed3b1347e14716475",
    "010_rollup_table.per_grain.sql": "f5a4b5e3c45417e05595ecd45618ba59ef94a14e",
    "011_rollup_mv.per_grain.sql": "e9c7a0e58704ac5650399c515161f6b18bc7a72c",
    "012_rollup_view.per_grain.sql": "a59d8b4026eba693e78a3fc40deb9ea582242f8e",
    "016_alert_state.sql": "9e54e5dbf6df3d16eb5115d9137b95fe40d60b18",
    "017_alert_leases.sql": "2cb570729e60f2dd6fe7b267bb9c6b8bad5ba854",
}


class _FirstReleaseGrain(NamedTuple):
    """`schemas.ddl.RollupGrain` of the first release: what its `{grain.…}` placeholders name."""

    rollup: str
    mv: str
    view: str
    column: str
    bucket: str


_FIRST_RELEASE_GRAINS = (
    _FirstReleaseGrain(
        "relevancy_rollup_1m", "relevancy_rollup_1m_mv", "relevancy_minutely", "minute", "toStartOfMinute"
    ),
    _FirstReleaseGrain("relevancy_rollup_1h", "relevancy_rollup_1h_mv", "relevancy_hourly", "hour", "toStartOfHour"),
)
# `migrations_table_ddl` of the first release (ec1479e:schemas/ddl.py), which its `migrate` ran before the files.
_FIRST_RELEASE_MIGRATIONS_TABLE = (
    "CREATE DATABASE IF NOT EXISTS {database}",
    "CREATE TABLE IF NOT EXISTS {database}.schema_migrations\n(\n    scores_table  String,\n    version       String,\n"
    "    name          String,\n    checksum      String,\n    applied_at    DateTime64(3, 'UTC')\n)\n"
    "ENGINE = ReplacingMergeTree(applied_at)\nORDER BY (scores_table, version)",
)


def _first_release_migrations(database: str, table: str) -> list[Migration]:
    """The frozen files as the first release's `schemas.ddl.migrations` rendered them (no cluster)."""
    out = []
    for path in sorted(FIRST_RELEASE_DIR.glob("*.sql")):
        text = path.read_text(encoding="utf-8")
        body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--")).strip()
        if path.name.endswith(".per_grain.sql"):
            statements = [body.format(database=database, table=table, grain=g) for g in _FIRST_RELEASE_GRAINS]
        else:
            statements = [body.format(database=database, table=table)]
        version = path.name.split("_", 1)[0]
        out.append(Migration(version, path.name, hashlib.sha256(body.encode()).hexdigest(), tuple(statements)))
    return out


def _install_first_release(store: ClickHouseStore, *, recorded: bool) -> None:
    """The first release's `migrate` (`recorded`: records in schema_migrations) or, without, the release before it,
    which ran the same files with nothing recorded (`ensure_schema` of 1a8769d)."""
    if recorded:
        for statement in _FIRST_RELEASE_MIGRATIONS_TABLE:
            store.command(statement.format(database=store.database))
    for m in _first_release_migrations(store.database, store.table):
        for statement in m.statements:
            store.command(statement)
        if recorded:
            row = (store.table, m.version, m.name, m.checksum, datetime.now(UTC))
            store.insert_unchecked(
                MIGRATIONS_TABLE, ("scores_table", "version", "name", "checksum", "applied_at"), [row]
            )


T0 = datetime(2026, 11, 30, 9, 0, 1, 250000, tzinfo=UTC)
_BASE_SCORE: dict[str, Any] = {
    "conversation_id": "conv-1001",
    "event_time": T0,
    "app": "support-bot",
    "model": "assistant-large",
    "prompt_version": "v12",
    "metadata": {"locale": "en-GB", "channel": "web"},
    "judge": "rubric",
    "judge_model": "claude-x",
    "judge_id": "rubric:claude-x:1",
    "kafka_topic": "conversations",
    "kafka_partition": 2,
    "sample_rule": "default",
    "cached": False,
    "scored_at": T0 + timedelta(seconds=3),
}
# One row of each kind the first release wrote to the scores table: a scored one and an error row.
_OLD_SCORES: list[dict[str, Any]] = [
    {
        **_BASE_SCORE,
        "event_id": "ev-ok",
        "status": "ok",
        "error": "",
        "score": 0.25,
        "raw_score": 1.0,
        "reasoning": "one of four statements answers the question",
        "statements": ["Order A17 shipped.", "We sell shoes.", "Shoes are nice.", "Thanks!"],
        "verdicts": ["yes", "no", "no", "idk"],
        "verdict_reasons": ["answers", "off topic", "off topic", "filler"],
        "n_statements": 4,
        "question": "When did order A17 ship?",
        "response": "Order A17 shipped on 3 March. We sell shoes.",
        "sample_rate": 0.5,
        "latency_ms": 840,
        "input_tokens": 512,
        "output_tokens": 64,
        "cache_read_tokens": 128,
        "cache_write_tokens": 0,
        "cost_usd": 0.0021,
        "kafka_offset": 41,
        "version": 2,
    },
    {
        **_BASE_SCORE,
        "event_id": "ev-err",
        "status": "error",
        "error": "unavailable: rate_limited: HTTP 429",
        "score": None,
        "raw_score": None,
        "reasoning": "",
        "statements": [],
        "verdicts": [],
        "verdict_reasons": [],
        "n_statements": 0,
        "question": "Where is my refund?",
        "response": "It is on its way.",
        "sample_rate": 1.0,
        "latency_ms": 30000,
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "cost_usd": None,
        "kafka_offset": 42,
        "version": 1,
    },
]
_OLD_TRAFFIC = {
    "minute": T0.replace(second=0, microsecond=0),
    "app": "support-bot",
    "model": "assistant-large",
    "prompt_version": "v12",
    "consumed": 7,
    "sampled": 2,
    "not_sampled": 5,
    "dead_lettered": 1,
}
_OLD_ALERT = {
    "rule": "relevancy_drop",
    "segment_key": "app=support-bot",
    "segment": '[["app", "support-bot"]]',
    "state": "firing",
    "since": T0,
    "fired_at": T0 + timedelta(minutes=5),
    "resolved_at": None,
    "last_eval_at": T0 + timedelta(minutes=6),
    "last_notified_at": T0 + timedelta(minutes=5),
    "notified": {"slack": "firing"},
    "value": 0.25,
    "baseline": 0.8,
    "n_current": 40,
    "n_baseline": 900,
    "p_value": 0.001,
    "severity": "page",
    "note": "mean 0.25 against 0.80",
    "updated_at": T0 + timedelta(minutes=6),
    "writer": "host:1:abc123",
}
_OLD_LEASE = {"replica": "host:1:abc123", "joined_at": T0, "heartbeat_at": T0 + timedelta(minutes=6), "released": 0}


def _insert(store: ClickHouseStore, table: str, rows: list[dict[str, Any]]) -> None:
    store.insert_unchecked(table, tuple(rows[0]), [tuple(r.values()) for r in rows])


def _write_first_release_rows(store: ClickHouseStore) -> None:
    """A row in each table the first release wrote (the rollups get theirs through its materialised views)."""
    _insert(store, store.table, _OLD_SCORES)
    _insert(store, "traffic_counts", [_OLD_TRAFFIC])
    _insert(store, "alert_state", [_OLD_ALERT])
    _insert(store, "alert_leases", [_OLD_LEASE])


_SCHEMA_TABLES = (
    "SELECT name, engine, engine_full, partition_key, sorting_key, primary_key, sampling_key, create_table_query "
    "FROM system.tables WHERE database = {d:String} ORDER BY name"
)
_SCHEMA_COLUMNS = (
    "SELECT table, name, type, default_kind, default_expression, compression_codec, comment, is_in_partition_key, "
    "is_in_sorting_key, is_in_primary_key FROM system.columns WHERE database = {d:String} ORDER BY table, position"
)
_SCHEMA_INDICES = (
    "SELECT table, name, type_full, expr, granularity FROM system.data_skipping_indices WHERE database = {d:String} "
    "ORDER BY table, name"
)


def _table_ttl(create: str) -> str:
    """The table's TTL clause in a `create_table_query` ('' for none; column TTLs stay in the query itself)."""
    if " ORDER BY " not in create:
        return ""
    found = re.search(r" TTL (.+?)(?: SETTINGS |$)", create.split(" ORDER BY ", 1)[1])
    return found.group(1) if found else ""


def _schema(store: ClickHouseStore) -> dict[str, Any]:
    """Every table and view of the store's database as system.tables and system.columns show it, the database named
    `{db}`: engine, keys and TTL per object; name, type, default, codec, comment and key membership per column in
    order; each object's full CREATE; skipping indices; and the migrations recorded."""
    db = {"d": store.database}

    def neutral(value: Any) -> Any:
        return value.replace(f"{store.database}.", "{db}.") if isinstance(value, str) else value

    tables, creates = {}, {}
    for name, *rest in store.query(_SCHEMA_TABLES, db).rows:
        engine, engine_full, partition, sorting, primary, sampling, create = (neutral(v) for v in rest)
        tables[name] = {
            "engine": engine,
            "engine_full": engine_full,
            "partition_by": partition,
            "order_by": sorting,
            "primary_key": primary,
            "sample_by": sampling,
            "ttl": _table_ttl(create),
        }
        creates[name] = create
    columns: dict[str, list[tuple[Any, ...]]] = {}
    for table, *rest in store.query(_SCHEMA_COLUMNS, db).rows:
        columns.setdefault(str(table), []).append(tuple(neutral(v) for v in rest))
    indices = [tuple(neutral(v) for v in row) for row in store.query(_SCHEMA_INDICES, db).rows]
    return {
        "tables": tables,
        "columns": columns,
        "creates": creates,
        "indices": indices,
        "migrations": _recorded(store),
    }


def _migrate(url: str, database: str, capsys: pytest.CaptureFixture[str]) -> str:
    """Today's `relevancy-monitor migrate` on `database`; asserts it succeeded and returns what it printed."""
    capsys.readouterr()
    code = main(["migrate", "--clickhouse-url", url, "--clickhouse-database", database])
    err = capsys.readouterr().err
    assert code == 0, err
    return err


@pytest.fixture
def fresh_install(
    clickhouse_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[ClickHouseStore]:
    """A store installed from nothing by today's `migrate` command; dropped afterwards."""
    for name in list(os.environ):
        if name.startswith(("MONITOR_", "ALERTS_")):
            monkeypatch.delenv(name)  # the deployment's settings (retention, cluster) would change what is created
    database = f"t_{uuid.uuid4().hex[:12]}"
    try:
        _migrate(clickhouse_url, database, capsys)
        yield ClickHouseStore(clickhouse_url, database, "relevancy_scores")
    finally:
        ClickHouseStore(clickhouse_url, database, "relevancy_scores").command(
            f"DROP DATABASE IF EXISTS {database} SYNC"
        )


def _utc(value: Any) -> Any:
    """A datetime read back from the store, made aware in UTC (other values as they are)."""
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def _git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_the_first_release_fixtures_are_its_files_byte_for_byte() -> None:
    """tests/schemas/first_release holds exactly the first release's schemas/sql files, with their git blob ids."""
    found = {p.name: _git_blob_id(p.read_bytes()) for p in FIRST_RELEASE_DIR.glob("*.sql")}
    assert found == FIRST_RELEASE_BLOBS
    assert FIRST_RELEASE in (FIRST_RELEASE_DIR / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("recorded", [True, False], ids=["first_release", "before_records"])
def test_a_first_release_store_upgrades_to_exactly_a_fresh_install(
    fresh: ClickHouseStore, fresh_install: ClickHouseStore, recorded: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """A first-release store, upgraded by `migrate`, equals a fresh install and still reads its rows today."""
    _install_first_release(fresh, recorded=recorded)
    _write_first_release_rows(fresh)
    today = migrations(fresh.database, fresh.table)
    first = {m.version for m in _first_release_migrations(fresh.database, fresh.table)} if recorded else set()
    new = [m.name for m in today if m.version not in first]
    assert [m.name for m in Migrations(fresh).pending()] == new and new
    with pytest.raises(StoreError, match="relevancy-monitor migrate"):
        Migrations(fresh).check()

    err = _migrate(fresh.url, fresh.database, capsys)
    assert f"{len(new)} migration(s) applied: {', '.join(new)})" in err, err
    assert "repaired:" not in err and "cannot fix" not in err and "left as it is" not in err, err  # by migrations only
    store = ClickHouseStore(fresh.url, fresh.database, fresh.table)
    Migrations(store).check()  # current, and nothing differs from this release's schema

    upgraded, installed = _schema(store), _schema(fresh_install)
    assert sorted(upgraded["tables"]) == sorted(installed["tables"])  # tables, views and materialised views
    for table, want in installed["columns"].items():
        assert upgraded["columns"][table] == want, table
    for name, want in installed["tables"].items():
        assert upgraded["tables"][name] == want, name
    for name, want in installed["creates"].items():
        assert upgraded["creates"][name] == want, name
    assert upgraded == installed  # and the same skipping indices and migration records

    # The rows of the first release, read by today's code: every column as written, today's columns at their defaults.
    scores = store.query(f"SELECT {', '.join(SCORED_COLUMNS)} FROM {store.qualified_table} FINAL ORDER BY event_id")
    read = [dict(zip(scores.columns, row, strict=True)) for row in scores.rows]
    assert [r["event_id"] for r in read] == ["ev-err", "ev-ok"]
    for row, old in zip(read, sorted(_OLD_SCORES, key=lambda r: r["event_id"]), strict=True):
        assert {k: _utc(row[k]) for k in old} == old
        assert (row["redactions"], row["redactor"], row["replay_run"]) == ({}, "", "")
    hourly = store.query(
        f"SELECT hour, rows, ok_rows, error_rows, mean_score FROM {store.database}.relevancy_hourly"
    ).rows
    assert [(_utc(h), *rest) for h, *rest in hourly] == [(T0.replace(minute=0, second=0, microsecond=0), 2, 1, 1, 0.25)]
    assert fetch_no_content(store, "traffic_counts", T0 - timedelta(hours=1), T0 + timedelta(hours=1)) == {}
    [state] = StateStore(store).load().values()
    assert (state.rule, state.state, state.segment, state.notified, state.frozen) == (
        "relevancy_drop",
        "firing",
        (("app", "support-bot"),),
        {"slack": "firing"},
        None,
    )
    report = fetch_report_data(store, T0 - timedelta(hours=1), T0 + timedelta(hours=1), 3600, now=T0)
    [judge] = report.judges
    assert (judge.judge_id, judge.rows, judge.errors, judge.rate_limited) == ("rubric:claude-x:1", 2, 1, 1)
    [traffic] = report.traffic
    assert (traffic.app, traffic.consumed, traffic.sampled, traffic.no_content) == ("support-bot", 7, 2, 0)
    assert [(f.rule, f.state, f.value) for f in report.firings] == [("relevancy_drop", "firing", 0.25)]
    assert report.replays == Replays(0, 0)
    lease = store.query(f"SELECT replica, released FROM {store.database}.alert_leases FINAL").rows
    assert lease == [("host:1:abc123", 0)]
