"""A broken schema is found and repaired: the snapshot matches the migrations, `migrate --check` reports a dropped
table, `migrate` re-creates it, `run` refuses to start before, and two writers on a fresh store never half-see it."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path

import pytest

from monitor.cli.main import main
from monitor.devtools.schema_snapshot import render
from monitor.store.connection import ClickHouseStore
from monitor.store.migrations import Migrations
from schemas.errors import StoreError
from schemas.schema_check import SNAPSHOT_FILE, SchemaObject, expected_schema, schema_differences, snapshot_document
from tests.harness import cli, monitor_env
from tests.monitor.runtime.test_sink import rows


def test_the_snapshot_is_what_the_migrations_create(store: ClickHouseStore) -> None:
    """The committed expected_schema.json equals a fresh store's schema (else: python -m
    monitor.devtools.schema_snapshot)."""
    committed = (Path(__file__).parents[3] / "schemas" / "sql" / SNAPSHOT_FILE).read_text(encoding="utf-8")
    document = snapshot_document(Migrations(store).found(), store.table)
    document["generated_by"] = "python -m monitor.devtools.schema_snapshot"
    assert render(document) == committed, (
        "stale schemas/sql/expected_schema.json: run python -m monitor.devtools.schema_snapshot"
    )


def test_differences_name_what_is_missing_and_what_cannot_be_fixed() -> None:
    """Missing objects and table columns are fixable; another type, another kind and unknown columns are not; objects
    the release does not name are not judged."""
    expected = {
        "t": SchemaObject("table", (("a", "String"), ("b", "UInt8"))),
        "v": SchemaObject("view", (("a", "String"),)),
        "gone": SchemaObject("table", (("a", "String"),)),
    }
    found = {
        "t": SchemaObject("table", (("a", "Nullable(String)"), ("extra", "UInt8"))),
        "v": SchemaObject("table", (("a", "String"),)),
        "someone_elses": SchemaObject("table", ()),
    }
    got = [(str(d), d.fixable) for d in schema_differences("db", expected, found)]
    assert got == [
        ("db.t: column a is Nullable(String), this release has String", False),
        ("db.t: column b is missing", True),
        ("db.t: column extra (UInt8) is not in this release's schema", False),
        ("db.v: is a table, this release has a view", False),
        ("db.gone: table is missing", True),
    ]
    assert set(expected_schema("my_scores")) >= {
        "my_scores",
        "traffic_counts",
        "relevancy_rollup_1m_mv",
        "schema_migrations",
    }


def _migrate(store: ClickHouseStore, *extra: str) -> int:
    return main(["migrate", *extra, "--clickhouse-url", store.url, "--clickhouse-database", store.database])


def test_a_dropped_table_is_reported_refused_repaired_and_its_rollup_fills_again(
    store: ClickHouseStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """After DROP TABLE and DROP COLUMN: `migrate --check` exits 1 naming both, a writer (what `run` does at start)
    refuses in one line naming migrate, `migrate` re-creates them, and rows written then reach the minute rollup."""
    store.insert_rows(rows(3), dedup_token="before")
    store.command(f"DROP TABLE {store.qualified_table}")
    store.command(f"ALTER TABLE {store.database}.traffic_counts DROP COLUMN dead_lettered")

    assert _migrate(store, "--check") == 1
    err = capsys.readouterr().err
    assert (
        f"{store.qualified_table}: table is missing" in err
        and f"{store.database}.traffic_counts: column dead_lettered is missing" in err
    )

    writer = ClickHouseStore(store.url, store.database, store.table)
    with pytest.raises(
        StoreError, match=r"is incomplete: .*table is missing.*run `relevancy-monitor migrate` to re-create it"
    ):
        Migrations(writer).ensure()  # embedded: it would migrate, and still refuses to paper over a lost table
    writer.close()

    assert _migrate(store) == 0
    err = capsys.readouterr().err
    assert "repaired: " in err and "re-created empty" in err and "re-added" in err
    assert _migrate(store, "--check") == 0
    assert "is current" in capsys.readouterr().err

    writer = ClickHouseStore(store.url, store.database, store.table)
    Migrations(writer).ensure()
    writer.insert_rows(rows(2, prefix="after"), dedup_token="after")
    assert store.query(f"SELECT sum(n_rows) FROM {store.database}.relevancy_rollup_1m").rows == [(3 + 2,)]  # kept + new
    writer.close()


def test_a_type_it_cannot_fix_fails_migrate_and_changes_nothing(
    store: ClickHouseStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """A column of another type is reported by `migrate` (exit 1, 'cannot fix') and left as it is."""
    store.command(f"ALTER TABLE {store.database}.alert_state MODIFY COLUMN segment Nullable(String)")
    assert _migrate(store) == 1
    assert "cannot fix: " in capsys.readouterr().err
    assert store.query(
        f"SELECT type FROM system.columns WHERE database = '{store.database}' AND table = 'alert_state' AND name = "
        "'segment'"
    ).rows == [("Nullable(String)",)]


def test_two_writers_started_at_once_on_a_fresh_store_both_find_it_whole(clickhouse_url: str, database: str) -> None:
    """Two writers opening one fresh store at the same moment (one migrating, one not) never write into a half-made
    schema: the migrating one finishes under the schema lock, the other waits for it or refuses in one line."""
    barrier = threading.Barrier(2)
    outcomes: dict[str, str] = {}

    def open_and_write(name: str, migrate: bool) -> None:
        s = ClickHouseStore(clickhouse_url, database, "relevancy_scores")
        barrier.wait()
        try:
            Migrations(s).ensure(migrate=migrate)
            s.insert_rows(rows(5, prefix=name), dedup_token=name)
            outcomes[name] = "wrote"
        except StoreError as e:
            outcomes[name] = f"refused: {e}"

    try:
        threads = [threading.Thread(target=open_and_write, args=(f"w{i}", m)) for i, m in enumerate((True, False))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert outcomes["w0"] == "wrote"
        assert outcomes["w1"] == "wrote" or (
            outcomes["w1"].startswith("refused: the schema of") and "\n" not in outcomes["w1"]
        )
        check = ClickHouseStore(clickhouse_url, database, "relevancy_scores")
        check.open_for_reads()
        assert Migrations(check).differences() == []
        check.close()
    finally:
        cleanup = ClickHouseStore(clickhouse_url, database, "relevancy_scores")
        cleanup.open()
        cleanup.command(f"DROP DATABASE IF EXISTS {database} SYNC")


def test_no_row_is_written_before_the_schema_is_checked(clickhouse_url: str, database: str) -> None:
    """A store that was only opened refuses to insert: a writer cannot skip `Migrations.ensure`."""
    s = ClickHouseStore(clickhouse_url, database, "relevancy_scores")
    s.open()
    with pytest.raises(StoreError, match="before its schema was checked"):
        s.insert_rows(rows(1), dedup_token="early")
    s.close()


@pytest.mark.long(seconds=19)
async def test_run_refuses_a_store_missing_a_table_before_any_kafka_client(tmp_path: Path) -> None:
    """`run` on an embedded store that lost its scores table stops with one line naming it and `migrate` (before
    reaching for Kafka, which is not there), and after `migrate` the store is whole again."""
    url = f"chdb://{tmp_path / 'store'}"
    env = monitor_env(
        MONITOR_CLICKHOUSE_URL=url, MONITOR_KAFKA_BOOTSTRAP_SERVERS="127.0.0.1:1", MONITOR_METRICS_PORT="0"
    )
    assert (await cli("migrate", env=env))[0] == 0
    drop = (
        f"import clickhouse_connect; clickhouse_connect.get_client(dsn={url!r}).command('DROP TABLE "
        "relevancy.relevancy_scores')"
    )
    dropped = await asyncio.create_subprocess_exec(sys.executable, "-c", drop)
    assert await asyncio.wait_for(dropped.wait(), 120) == 0
    code, _out, err = await cli("run", env=env)
    last = err.strip().splitlines()[-1]
    assert code == 1 and last.startswith("relevancy-monitor: error: the store relevancy at ") and "Traceback" not in err
    assert "relevancy.relevancy_scores: table is missing: run `relevancy-monitor migrate` to re-create it" in last
    assert (await cli("migrate", "--check", env=env))[0] == 1
    assert (await cli("migrate", env=env))[0] == 0
    assert (await cli("migrate", "--check", env=env))[0] == 0


def test_a_column_of_the_operators_own_is_reported_and_blocks_no_writer(
    store: ClickHouseStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """An extra column (an analyst's own) makes `migrate --check` exit 1 naming it, yet `migrate` exits 0 leaving it,
    and a writer still opens and writes."""
    store.command(f"ALTER TABLE {store.qualified_table} ADD COLUMN team_note String")
    assert _migrate(store, "--check") == 1
    assert "column team_note (String) is not in this release's schema" in capsys.readouterr().err
    assert _migrate(store) == 0
    assert "left as it is: " in capsys.readouterr().err
    writer = ClickHouseStore(store.url, store.database, store.table)
    Migrations(writer).ensure()
    writer.insert_rows(rows(1), dedup_token="own-column")
    writer.close()
