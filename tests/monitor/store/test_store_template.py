"""The suite's `store` fixture copies a migrated template: the copy must be what the migrations create."""

from __future__ import annotations

import uuid
from datetime import timedelta

from monitor.store.connection import ClickHouseStore
from monitor.store.migrations import Migrations
from tests.monitor.alerts.conftest import T0, insert, make_row
from tests.store_template import StoreTemplate

_DDL = "SELECT name, create_table_query FROM system.tables WHERE database = {database:String} ORDER BY name"


def _ddl(store: ClickHouseStore) -> dict[str, str]:
    rows = store.query(_DDL, {"database": store.database}).rows
    return {str(name): str(query).replace(f"{store.database}.", "DB.") for name, query in rows}


def test_a_copy_of_the_template_is_the_migrated_schema_and_writes_into_itself(
    store_template: StoreTemplate, store: ClickHouseStore
) -> None:
    """The copy has the DDL and migration records of a store migrated the usual way, and its materialised views fill
    its own rollups, not the template's."""
    migrated = ClickHouseStore(store.url, f"t_{uuid.uuid4().hex[:12]}", "relevancy_scores")
    Migrations(migrated).ensure()
    try:
        assert _ddl(store) == _ddl(migrated)
        copied, usual = Migrations(store), Migrations(migrated)
        assert copied.differences() == [] and copied.pending() == []
        assert {v: (f, c) for v, (f, c, _) in copied.applied().items()} == {
            v: (f, c) for v, (f, c, _) in usual.applied().items()
        }
        insert(store, [make_row(T0 + timedelta(seconds=s)) for s in range(5)])
        rollup = "SELECT sum(n_rows) FROM {db}.relevancy_rollup_1m"
        assert store.query(rollup.format(db=store.database)).rows == [(5,)]
        assert store.query(rollup.format(db=store_template.database)).rows == [(0,)]
    finally:
        migrated.command(f"DROP DATABASE IF EXISTS {migrated.database} SYNC")
