"""Schema migrations (issue 11): each versioned DDL file is applied once, in order, and recorded with its checksum in
`{database}.schema_migrations`; an applied file that changed is refused; a store of the previous release (tables, no
record) upgrades cleanly; with a cluster the DDL is ON CLUSTER with Replicated engines, without one it is unchanged."""

from __future__ import annotations

import re
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

import monitor.store.migrations as store_module
from monitor.cli.main import main
from monitor.store.connection import ClickHouseStore
from monitor.store.migrations import Migrations
from schemas.ddl import (
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


def test_a_store_of_the_previous_release_upgrades_cleanly(fresh: ClickHouseStore) -> None:
    """Tables made by the previous release (its DDL, no schema_migrations) keep their rows; migrate records every
    version."""
    for statement in _previous_render(fresh.database, fresh.table):
        fresh.command(statement)
    fresh.command(f"INSERT INTO {fresh.database}.traffic_counts (minute, app, consumed) VALUES (now(), 'a', 7)")
    assert "schema_migrations" not in _tables(fresh)
    assert [m.version for m in Migrations(fresh).pending()] == [
        m.version for m in migrations(fresh.database, fresh.table)
    ]
    with pytest.raises(StoreError, match="relevancy-monitor migrate"):
        Migrations(fresh).check()
    applied = Migrations(fresh).migrate()
    assert len(applied) == len(migrations(fresh.database, fresh.table)) and len(_recorded(fresh)) == len(applied)
    assert fresh.query(f"SELECT sum(consumed) FROM {fresh.database}.traffic_counts").rows == [(7,)]
    Migrations(fresh).check()  # current now


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
