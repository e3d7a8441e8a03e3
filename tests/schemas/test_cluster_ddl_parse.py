"""Every statement a cluster install (MONITOR_CLICKHOUSE_CLUSTER) sends to ClickHouse that carries ON CLUSTER, read
by ClickHouse's own parser: `SELECT formatQuery(...)` in chDB, which raises a syntax error for a malformed statement.

The statements are taken from the code that sends them, not written out here: `Migrations.migrate()` of a store with
a cluster, over a real chDB database whose state each scenario sets (a fresh install with a retention, a retention
removed, a dropped column repaired), with the store's `command` recording instead of running (chDB has no cluster
and no Keeper); the lightweight DELETE of `erase_rows`; and `add_column` for every column of this release's schema."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from monitor.store.connection import ClickHouseStore
from monitor.store.erasure import MATCH
from monitor.store.migrations import Migrations
from schemas.ddl import MIGRATIONS_TABLE, REPLICA_NAME, REPLICA_PATH, migrations_table_ddl, render_ddl
from schemas.errors import StoreError
from schemas.schema_check import SchemaDifference, add_column, expected_schema
from tests.store_template import StoreTemplate

CLUSTER = "prod_cluster"


class RecordingStore(ClickHouseStore):
    """A store with a cluster over a real (cluster-less) chDB database: queries read the database, statements and the
    migrations' own records are kept in `sent` and not run."""

    def __init__(self, real: ClickHouseStore) -> None:
        super().__init__(real.url, real.database, real.table, cluster=CLUSTER)
        self.sent: list[str] = []

    def command(
        self, sql: str, parameters: dict[str, Any] | None = None, settings: dict[str, Any] | None = None
    ) -> None:
        """Record `sql` instead of running it."""
        self.sent.append(sql)

    def insert_unchecked(self, table: str, columns: Any, rows: Any) -> None:
        """Skip the migrations' records (the recorded statements were not run)."""


def cluster_statements(real: ClickHouseStore) -> list[str]:
    """What the code sends for a cluster, in order and without repeats, over the migrated database of `real`."""
    store = RecordingStore(real)
    db = real.database
    # A fresh install that sets a retention: every migration is pending, then the TTLs are added.
    real.command(f"TRUNCATE TABLE {db}.{MIGRATIONS_TABLE}")
    Migrations(store, retention_days=30, text_retention_days=7).migrate()
    # An upgrade that removes it: REMOVE TTL on the tables and on the text columns.
    Migrations(real, retention_days=30, text_retention_days=7).apply_retention()
    Migrations(store, retention_days=0, text_retention_days=0).migrate()
    # A column dropped by hand, re-added by `migrate`'s repair.
    real.command(f"ALTER TABLE {db}.alert_state DROP COLUMN detector")
    Migrations(store).migrate()
    # `forget`: the lightweight DELETE of a conversation's rows.
    store.schema_ready = True
    store.erase_rows(real.table, MATCH, {"conversation_ids": ["c1"], "event_ids": []})
    # The repair's ALTER for every column of this release's tables.
    for name, obj in expected_schema(real.table).items():
        if obj.kind == "table":
            for column in obj.columns:
                difference = SchemaDifference(f"{db}.{name}", f"column {column[0]} is missing", True, column=column)
                store.sent.append(add_column(difference, CLUSTER) or "")
    return list(dict.fromkeys(store.sent))


@pytest.fixture(scope="module")
def real(store_template: StoreTemplate) -> Iterator[ClickHouseStore]:
    """A migrated chDB database of this module's own (the scenarios change it), dropped afterwards."""
    database = f"t_{uuid.uuid4().hex[:12]}"
    store = store_template.copy(database)
    yield store
    store.command(f"DROP DATABASE IF EXISTS {database} SYNC")


@pytest.fixture(scope="module")
def sent(real: ClickHouseStore) -> list[str]:
    """The statements of a cluster install (see `cluster_statements`)."""
    return cluster_statements(real)


def format_query(store: ClickHouseStore, statement: str) -> str:
    """`statement` as ClickHouse's parser reads it and formats it back; raises `StoreError` when it does not parse."""
    return str(store.query("SELECT formatQuery({statement:String})", {"statement": statement}).rows[0][0])


def engines(formatted: str) -> list[str]:
    """The table engines of a formatted CREATE TABLE, with their arguments (`ReplicatedMergeTree('…', '…')`)."""
    return [part.split("\n")[0].strip() for part in formatted.split("ENGINE = ")[1:]]


def test_clickhouse_parses_every_cluster_statement(real: ClickHouseStore, sent: list[str]) -> None:
    """ClickHouse's parser reads every cluster statement, with ON CLUSTER and Replicated engines on the macros."""
    failures: dict[str, str] = {}
    for statement in sent:
        try:
            formatted = format_query(real, statement)
        except StoreError as e:
            failures[statement] = str(e).splitlines()[0]
            continue
        assert f" ON CLUSTER {CLUSTER}" in formatted, formatted
        assert format_query(real, formatted) == formatted, formatted
        if statement.startswith("CREATE TABLE"):
            found = engines(formatted)
            assert found, formatted
            for engine in found:
                assert engine.startswith("Replicated"), formatted
                assert engine.partition("(")[2].startswith(f"'{REPLICA_PATH}', '{REPLICA_NAME}'"), formatted
    assert not failures, "\n".join(f"{error}\n  in: {' '.join(st.split())[:200]}" for st, error in failures.items())


def test_the_statements_are_every_kind_a_cluster_install_sends(real: ClickHouseStore, sent: list[str]) -> None:
    """The statements checked are all a cluster install sends: migrations, TTLs both ways, repair, erasure."""
    assert set(render_ddl(real.database, real.table, CLUSTER)) <= set(sent)
    assert set(migrations_table_ddl(real.database, CLUSTER)) <= set(sent)
    heads = ("CREATE DATABASE", "CREATE TABLE", "CREATE MATERIALIZED VIEW", "CREATE VIEW", "ALTER TABLE", "DELETE FROM")
    assert {h for h in heads if any(s.startswith(h) for s in sent)} == set(heads)
    for command in ("MODIFY TTL", "REMOVE TTL", "MODIFY COLUMN", "ADD COLUMN IF NOT EXISTS detector"):
        assert any(command in s for s in sent), command
    assert all(f"ON CLUSTER {CLUSTER}" in s for s in sent)


@pytest.mark.parametrize(
    "broken",
    [
        # ON CLUSTER after the commands, where ClickHouse's grammar does not have it
        f"ALTER TABLE db.relevancy_scores REMOVE TTL ON CLUSTER {CLUSTER}",
        # a Replicated engine whose arguments are not closed
        f"CREATE TABLE IF NOT EXISTS db.t ON CLUSTER {CLUSTER} (x UInt8) ENGINE = "
        f"ReplicatedMergeTree('{REPLICA_PATH}', '{REPLICA_NAME}' ORDER BY x",
        # a column list that is not closed
        f"CREATE TABLE IF NOT EXISTS db.t ON CLUSTER {CLUSTER} (x UInt8 ENGINE = ReplicatedMergeTree ORDER BY x",
        # ON CLUSTER before the object's name
        f"CREATE VIEW IF NOT EXISTS ON CLUSTER {CLUSTER} db.v AS SELECT 1",
    ],
)
def test_a_malformed_statement_fails_the_check(real: ClickHouseStore, broken: str) -> None:
    """formatQuery raises a syntax error for a misplaced ON CLUSTER or an unbalanced bracket."""
    with pytest.raises(StoreError, match="Syntax error"):
        format_query(real, broken)
