"""A migrated database that each test's store copies, instead of applying the migrations again.

Applying the 15 migrations costs a worker's engine 0.2-0.3 CPU-s a test; copying their result costs 0.07. The copy
runs each object's own `create_table_query` with the database renamed (tables, then the materialised views that
write into them, then the plain views) and copies the migration records, so the copy is what `Migrations.ensure`
would have left. `tests/monitor/store/test_store_template.py` checks that against a store migrated the usual way."""

from __future__ import annotations

from dataclasses import dataclass

from monitor.store.connection import ClickHouseStore
from monitor.store.migrations import Migrations
from schemas.ddl import MIGRATIONS_TABLE

_OBJECTS = "SELECT name, engine, create_table_query FROM system.tables WHERE database = {database:String}"
_ORDER = {"MaterializedView": 1, "View": 2}  # a materialised view needs its target table; views come last


@dataclass(frozen=True)
class StoreTemplate:
    """The migrated database `database` at `url`, and the statements that re-create its objects."""

    url: str
    database: str
    table: str
    statements: tuple[str, ...]

    @classmethod
    def migrate(cls, url: str, database: str, table: str = "relevancy_scores") -> StoreTemplate:
        """Migrate `database` at `url` the usual way and read back how to re-create each of its objects."""
        store = ClickHouseStore(url, database, table)
        Migrations(store).ensure()
        rows = store.query(_OBJECTS, {"database": database}).rows
        ordered = sorted(rows, key=lambda r: (_ORDER.get(str(r[1]), 0), str(r[0])))
        return cls(url, database, table, tuple(str(r[2]) for r in ordered))

    def copy(self, database: str) -> ClickHouseStore:
        """A store on a new database `database` holding a copy of the template's schema and migration records, ready
        for writes (as `Migrations.ensure` leaves it)."""
        store = ClickHouseStore(self.url, database, self.table)
        store.command(f"CREATE DATABASE {database}")
        for statement in self.statements:
            store.command(statement.replace(f"{self.database}.", f"{database}.", -1))
        store.command(f"INSERT INTO {database}.{MIGRATIONS_TABLE} SELECT * FROM {self.database}.{MIGRATIONS_TABLE}")
        store.schema_ready = True
        store.use_database()
        return store
