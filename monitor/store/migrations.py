"""The schema of a store: versioned migrations, the check against this release's schema, repair and retention.

The DDL is applied as versioned migrations (`schemas.ddl.migrations`), each once, recorded in
`{database}.schema_migrations` with its checksum. `migrate` applies the pending ones and then re-creates what the
store lacks (every statement is idempotent, so it re-runs them all), reporting what differs that it cannot fix.

`ensure` is what every writer does first: under the process's schema lock it applies the pending migrations (or
refuses a schema that is behind) and then compares the store with what this release's migrations create
(`schemas.schema_check`): a dropped table or column is refused in one line naming `migrate`. No row is written
before it returns.

Retention (MONITOR_RETENTION_DAYS, MONITOR_TEXT_RETENTION_DAYS) is applied as TTLs at the end of `migrate`, only where
the tables differ (`monitor.store.retention`); `check` only finds the difference (`retention_pending`)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

from monitor.store.connection import EXISTING_TABLES, MIGRATE_HINT, ClickHouseStore
from monitor.store.retention import ALTER_SETTINGS, RetentionPlan, plan_retention, retention_tables
from monitor.store.settings import StoreSettings
from monitor.store.urls import chdb_directory, migrates_itself, normalize_url
from schemas.ddl import MIGRATIONS_TABLE, Migration, migrations, migrations_table_ddl
from schemas.errors import StoreError
from schemas.schema_check import Schema, SchemaDifference, SchemaObject, add_column, expected_schema, object_kind
from schemas.schema_check import schema_differences as differences_between

_TABLES = "SELECT name, engine FROM system.tables WHERE database = {database:String}"
_COLUMNS = "SELECT table, name, type FROM system.columns WHERE database = {database:String} ORDER BY table, position"
_TABLE_QUERIES = (
    "SELECT name, create_table_query FROM system.tables WHERE database = {database:String} AND "
    "has({tables:Array(String)}, name)"
)

# One schema lock per store in this process: the service, the demo's history and the alert state may open the same
# embedded engine from several threads, and none of them may write while another is half-way through a migration.
_SCHEMA_LOCKS: dict[tuple[str, str], threading.RLock] = {}
_SCHEMA_LOCKS_GUARD = threading.Lock()


def schema_lock(url: str, database: str) -> threading.RLock:
    """The process's lock on the schema of `database` at `url` (re-entrant: `migrate` runs inside `ensure`)."""
    with _SCHEMA_LOCKS_GUARD:
        return _SCHEMA_LOCKS.setdefault((normalize_url(url), database), threading.RLock())


class Migrations:
    """The schema of one store's database: what is applied, what is pending, how it differs, and the TTLs."""

    def __init__(
        self,
        store: ClickHouseStore,
        *,
        auto_migrate: bool | None = None,
        retention_days: int | None = None,
        text_retention_days: int = 0,
    ) -> None:
        self.store = store
        self.auto_migrate = auto_migrate
        self.retention_days = retention_days  # scores, traffic and rollup rows; 0: forever; None: unmanaged
        self.text_retention_days = text_retention_days  # the scores table's text columns; 0: as long as the row
        self.retention_applied: RetentionPlan | None = None  # what the last `migrate` changed (empty: nothing)
        self.retention_pending: RetentionPlan | None = None  # what the last `check` found differing (not applied)
        self.migrated: list[Migration] = []  # what the last `ensure` applied (migrating)
        self.repaired: list[SchemaDifference] = []  # what the last `migrate` re-created
        self.unfixed: list[SchemaDifference] = []  # what differs after the last `migrate` and it cannot fix

    @classmethod
    def from_settings(cls, store: ClickHouseStore, s: StoreSettings) -> Migrations:
        """The migrations of `store` with the slice's auto-migration and retention."""
        return cls(
            store,
            auto_migrate=s.auto_migrate,
            retention_days=s.retention_days,
            text_retention_days=s.text_retention_days,
        )

    @property
    def auto_migrates(self) -> bool:
        """Whether `ensure` applies pending migrations (else it only checks): `auto_migrate`, by default true for the
        embedded store and false for a server (whose operator runs `relevancy-monitor migrate`)."""
        return migrates_itself(self.store.url, self.auto_migrate)

    def ensure(self, *, migrate: bool | None = None) -> None:
        """Open for writes: under the process's schema lock, apply the pending migrations if `migrate` (default
        `auto_migrates`; the embedded store is created if need be), else refuse a schema that is behind; then refuse,
        in one line naming `migrate`, a store that lacks or differs from what this release's migrations create.
        Raises `StoreError`; rows may be written once it returns."""
        store = self.store
        migrating = self.auto_migrates if migrate is None else migrate
        if not migrating:  # a writer that does not migrate finds a missing store in one line, never creates one
            store.existing_directory()
        store.open()
        with schema_lock(store.url, store.database):
            if migrating:
                # A lost table is the operator's to see and repair, not the service's.
                self.migrated = self.migrate(repair=False)
                found = self.unfixed
            else:
                self._refuse_pending("run `relevancy-monitor migrate` first, or set MONITOR_AUTO_MIGRATE=true")
                found = self.differences()
            problems = [d for d in found if d.blocking]
            if problems:
                raise StoreError(_broken_schema(store, problems))
            if not migrating:
                self.retention_pending = self.retention_plan() if self.retention_days is not None else None
            store.schema_ready = True
        store.use_database()

    def check(self) -> None:
        """Refuse, in one line, a store whose schema is behind this release, whose applied migrations changed or that
        lacks what they create: what `run` does at start when it does not migrate. A retention that differs from the
        settings is not refused: it is left in `retention_pending` (empty when none differs)."""
        self.ensure(migrate=False)

    def require_current(self) -> None:
        """Refuse, in one line, a store whose schema is behind this release (`check` without the retention check):
        for read paths whose queries use the newer tables."""
        self._refuse_pending(
            "run `relevancy-monitor migrate` (or the monitor, which migrates an embedded store itself)"
        )
        self.store.use_database()

    def found(self) -> Schema:
        """The tables and views of the database, with their kinds and columns, as `system.tables` and `system.columns`
        have them (empty when the database does not exist)."""
        database = self.store.database
        engines = {str(n): str(e) for n, e in self.store.query(_TABLES, {"database": database}).rows}
        columns: dict[str, list[tuple[str, str]]] = {}
        for table, name, type_ in self.store.query(_COLUMNS, {"database": database}).rows:
            columns.setdefault(str(table), []).append((str(name), str(type_)))
        return {
            name: SchemaObject(object_kind(engine), tuple(columns.get(name, ()))) for name, engine in engines.items()
        }

    def differences(self) -> list[SchemaDifference]:
        """How the store differs from what this release's migrations create (see `schemas.schema_check`)."""
        return differences_between(self.store.database, expected_schema(self.store.table), self.found())

    def check_report(self) -> tuple[list[Migration], list[SchemaDifference]]:
        """`migrate --check`: the pending migrations and the differences, read on a read-only session that creates
        nothing; raises `StoreError` for a store that does not exist at all. The TTLs that differ from the retention
        settings are left in `retention_pending` (None when unmanaged, or while a migration is pending or a table is
        missing: `migrate` applies those first)."""
        self.store.open_read_session()
        pending, differences = self.pending(), self.differences()
        complete = not pending and not any(d.blocking for d in differences)
        self.retention_pending = self.retention_plan() if self.retention_days is not None and complete else None
        return pending, differences

    def _migrations(self) -> list[Migration]:
        return migrations(self.store.database, self.store.table, self.store.cluster)

    def applied(self) -> dict[str, tuple[str, str, Any]]:
        """{version: (file name, checksum, applied_at)} of the migrations recorded in the store; empty when the
        store, its database or its `schema_migrations` table does not exist yet (a store of an earlier release)."""
        store = self.store
        directory = chdb_directory(store.url)
        if directory is not None and not (directory.is_dir() and any(directory.iterdir())):
            return {}  # opening chDB here would create the store; a missing one has applied nothing
        if not store.query(EXISTING_TABLES, {"database": store.database, "tables": [MIGRATIONS_TABLE]}).rows:
            return {}
        rows = store.query(
            f"SELECT version, argMax(name, applied_at), argMax(checksum, applied_at), max(applied_at)"
            f" FROM {store.database}.{MIGRATIONS_TABLE} WHERE scores_table = {{table:String}} GROUP BY version",
            {"table": store.table},
        ).rows
        return {str(v): (str(name), str(checksum), at) for v, name, checksum, at in rows}

    def pending(self) -> list[Migration]:
        """The migrations not yet applied, in order; raises `StoreError` (one line) if an applied one has changed
        since: a changed column or index must be a new numbered migration, never an edit of an applied file."""
        applied = self.applied()
        pending = []
        for m in self._migrations():
            if m.version not in applied:
                pending.append(m)
                continue
            name, checksum, at = applied[m.version]
            if checksum != m.checksum:
                raise StoreError(
                    f"schema migration {m.name} was changed after it was applied to {self.store.database} at "
                    f"{self.store.safe_url} (as {name} on {at}; checksum {checksum[:12]} recorded, {m.checksum[:12]} "
                    "now): restore it and put the change in a new numbered migration in schemas/sql"
                )
        return pending

    def _refuse_pending(self, remedy: str) -> None:
        pending = self.pending()
        if pending:
            names = ", ".join(m.name for m in pending)
            raise StoreError(
                f"the schema of {self.store.database} at {self.store.safe_url} is behind this release "
                f"({len(pending)} pending migration(s): {names}): {remedy}"
            )

    def migrate(self, *, repair: bool = True) -> list[Migration]:
        """Apply the pending migrations in order, each once, recording each (version, name, checksum, applied_at)
        in `{database}.schema_migrations` (for this scores table) once its statements succeeded; returns those
        applied. A store of an earlier release (tables, no record) gets every version recorded: all statements are
        IF NOT EXISTS.

        Then, if `repair`, what the store lacks of this release's schema (a dropped table, view or column) is
        re-created by running every migration's statements again (all idempotent), left in `repaired`; what still
        differs is left in `unfixed`. Last the retention: the TTLs that differ from `retention_days` and
        `text_retention_days` are altered, and what changed is left in `retention_applied` (empty when nothing
        differed; skipped while `unfixed` is not empty)."""
        store = self.store
        with schema_lock(store.url, store.database):
            pending = self.pending()
            for statement in migrations_table_ddl(store.database, store.cluster):
                store.command(statement)
            for m in pending:
                for statement in m.statements:
                    store.command(statement)
                row = (store.table, m.version, m.name, m.checksum, datetime.now(UTC))
                store.insert_unchecked(
                    MIGRATIONS_TABLE, ("scores_table", "version", "name", "checksum", "applied_at"), [row]
                )
            self._repair(fix=repair)
            # Unset MONITOR_RETENTION_DAYS leaves the TTLs alone: a `migrate` from a laptop without the deployment's
            # settings must not remove a retention (or shorten it).
            blocked = any(d.blocking for d in self.unfixed)
            self.retention_applied = self.apply_retention() if self.retention_days is not None and not blocked else None
            store.schema_ready = not blocked
        store.use_database()
        return pending

    def _repair(self, *, fix: bool) -> None:
        before = self.differences()
        if fix and any(d.fixable for d in before):
            for m in self._migrations():
                for statement in m.statements:
                    self.store.command(statement)
            for difference in self.differences():
                added = add_column(difference, self.store.cluster)
                if added is not None:
                    self.store.command(added)
        after = self.differences() if before else []
        self.repaired = [d for d in before if d not in after]
        self.unfixed = after

    def retention_plan(self) -> RetentionPlan:
        """What it takes to bring the tables' TTLs to `retention_days` and `text_retention_days` (see
        `monitor.store.retention`), from their `create_table_query`; raises `StoreError` if a table is missing."""
        store = self.store
        tables = list(retention_tables(store.table))
        rows = store.query(_TABLE_QUERIES, {"database": store.database, "tables": tables}).rows
        current = {str(name): str(query) for name, query in rows}
        try:
            return plan_retention(
                store.database, store.table, self.retention_days or 0, self.text_retention_days, current, store.cluster
            )
        except ValueError as e:
            raise StoreError(
                f"cannot plan the retention of {store.database} at {store.safe_url}: {e}: {MIGRATE_HINT}"
            ) from None

    def apply_retention(self) -> RetentionPlan:
        """Alter the TTLs that differ from the settings, one ALTER per table (see `retention.ALTER_SETTINGS` on the
        rewrite of existing parts); returns the plan applied (empty: nothing differed). Raises `StoreError`."""
        plan = self.retention_plan()
        for statement in plan.statements:
            self.store.command(statement, settings=dict(ALTER_SETTINGS))
        return plan


def _broken_schema(store: ClickHouseStore, problems: list[SchemaDifference]) -> str:
    """One line: what the store lacks or has otherwise, and the command that repairs or lists it."""
    first = "; ".join(str(p) for p in problems[:3]) + (f" (and {len(problems) - 3} more)" if len(problems) > 3 else "")
    where = f"the store {store.database} at {store.safe_url}"
    if all(p.fixable for p in problems):
        return f"{where} is incomplete: {first}: run `relevancy-monitor migrate` to re-create it"
    return (
        f"{where} differs from this release's schema: {first}: `relevancy-monitor migrate --check` lists every "
        "difference; `migrate` re-creates what is missing and changes nothing else"
    )
