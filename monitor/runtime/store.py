"""The ClickHouse store through clickhouse-connect: embedded chDB (`chdb:///dir`) or a server (`http(s)://`).

All calls are synchronous; async callers go through `AsyncStore`, which runs them on one dedicated thread
(chDB has no async client and one engine per process, so calls are serialised there).

Two ways in, and nothing else writes:
1. `open_for_reads` (`sql`, `report`, `alerts check|backtest`, `compare`, the dry runs) creates nothing, issues no DDL
   and opens a session with ClickHouse's `readonly = 1`, so the engine itself refuses writes, DDL and setting changes
   on every path: the embedded engine, a running monitor's read-only endpoint (`monitor.runtime.embedded_reader`,
   used while a monitor holds the directory: chDB allows one process per directory) and a server.
2. `ensure_schema` (`run`, `migrate`, the demo, replay, forget, the alert and canary services) opens for writes. Under
   the process's schema lock it applies the pending migrations (or refuses a schema that is behind) and then compares
   the store with what this release's migrations create (`schemas.schema_check`): a dropped table or column is refused
   in one line naming `migrate`. No row is written before it returns.

The DDL is applied as versioned migrations (`schemas.ddl.migrations`), each once, recorded in
`{database}.schema_migrations` with its checksum. `migrate` applies the pending ones and then re-creates what the
store lacks (every statement is idempotent, so it re-runs them all), reporting what differs that it cannot fix.

Retention (MONITOR_RETENTION_DAYS, MONITOR_TEXT_RETENTION_DAYS) is applied as TTLs at the end of `migrate`, only where
the tables differ (`monitor.runtime.retention`); `check_schema` only finds the difference (`retention_pending`)."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

import clickhouse_connect
import structlog
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError

from monitor.runtime.budget import Spend
from monitor.runtime.embedded_reader import READER_USER, EmbeddedReader, ReaderAddress, reader_address
from monitor.runtime.retention import ALTER_SETTINGS, RetentionPlan, plan_retention, retention_tables
from schemas.ddl import MIGRATIONS_TABLE, Migration, migrations, migrations_table_ddl, on_cluster
from schemas.errors import StoreError
from schemas.schema_check import Schema, SchemaDifference, SchemaObject, add_column, expected_schema, object_kind, schema_differences
from schemas.scored import SCORED_COLUMNS, ScoredRow

T = TypeVar("T")

log = structlog.get_logger("monitor.runtime.store")


def migrates_itself(url: str, auto_migrate: bool | None) -> bool:
    """`auto_migrate` if set, else true for the embedded store (nobody else would migrate it) and false for a server."""
    return url.startswith("chdb:") if auto_migrate is None else auto_migrate


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """The store slice of the settings: where rows go, how to connect and authenticate (servers), whether rows
    carry the conversation text, the cluster of the DDL and whether `run` migrates the schema itself."""

    url: str
    database: str = "relevancy"
    table: str = "relevancy_scores"
    store_text: Literal["redacted", "none", "full"] = "redacted"
    retention_days: int | None = None  # rows of the scores, traffic, rollup tables, by event time; 0: forever; None: TTLs untouched
    text_retention_days: int = 0  # the text columns of the scores table only; 0: as long as the row
    user: str | None = None  # over a user in the URL
    password: str | None = field(default=None, repr=False)  # over a password in the URL
    ca_file: Path | None = None  # https: the CA of the server's certificate (default: the system's)
    verify: bool = True  # https: verify the server's certificate
    cluster: str | None = None  # DDL ON CLUSTER with Replicated engines
    auto_migrate: bool | None = None  # None: true for the embedded store (chdb:), false for a server

    @property
    def auto_migrates(self) -> bool:
        """Whether `run` applies pending migrations itself: `auto_migrate`, by default only for the embedded store."""
        return migrates_itself(self.url, self.auto_migrate)


@dataclass(frozen=True, slots=True)
class QueryResult:
    """Column names and rows of a query."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]


# chdb:// locations clickhouse-connect keeps in memory rather than on disk.
_MEMORY_LOCATIONS = frozenset({"", "memory", ":memory:"})
_MIGRATE_HINT = "run the monitor (relevancy-monitor run) or `relevancy-monitor migrate` first"


def chdb_directory(url: str) -> Path | None:
    """The absolute directory of an embedded `chdb:` URL, relative paths resolved against the working directory;
    None for a server URL or an in-memory engine."""
    if not url.startswith("chdb:"):
        return None
    location = url.removeprefix("chdb:").partition("?")[0]
    # `chdb:///abs/dir` leaves `/abs/dir`; `chdb://relative/dir` and `chdb:relative` leave a relative path (the
    # driver would read `relative` as the location and `dir` as a database, then fail and leave `relative/` behind).
    location = location.removeprefix("//")
    if location in _MEMORY_LOCATIONS:
        return None
    return Path(os.path.abspath(os.path.expanduser(location)))


def normalize_url(url: str) -> str:
    """`url` with an embedded store's directory made absolute (`chdb:///abs/dir?options`); other URLs unchanged."""
    directory = chdb_directory(url)
    if directory is None:
        return url
    _, sep, options = url.partition("?")
    return f"chdb://{directory}{sep}{options}"


def open_client(url: str, **client_options: Any) -> Client:
    """A clickhouse-connect client for `url`; raises `StoreError` with a readable reason."""
    try:
        return clickhouse_connect.get_client(dsn=url, **client_options)
    except ImportError as e:  # clickhouse-connect imports chDB only for a chdb:// URL; the core install leaves it out
        if url.startswith("chdb:"):
            raise StoreError("the embedded ClickHouse (chdb://) needs the chDB extra: pip install 'relevancy-monitor[embedded]'") from None
        raise StoreError(f"cannot open ClickHouse at {_safe(url)}: {str(e).splitlines()[0][:300] if str(e) else type(e).__name__}") from None
    except Exception as e:  # the driver raises several unrelated types for "cannot open"
        text = str(e)
        if "Cannot lock file" in text or "already running" in text:
            directory = chdb_directory(url)
            holder = reader_address(directory) if directory else None
            if holder is not None:
                raise StoreError(
                    f"the embedded ClickHouse at {url} is held by a running monitor (pid {holder.pid}): reads (sql, alerts, "
                    "report) reach it while it runs, writes need it stopped; or point MONITOR_CLICKHOUSE_URL at a ClickHouse server"
                ) from None
            raise StoreError(
                f"the embedded ClickHouse at {url} is in use by another process (a running monitor?): "
                "stop it first, or point MONITOR_CLICKHOUSE_URL at a ClickHouse server"
            ) from None
        if "already initialized with path" in text:
            raise StoreError(f"this process already uses another embedded ClickHouse path; chDB allows one per process ({url})") from None
        raise StoreError(f"cannot open ClickHouse at {_safe(url)}: {text.splitlines()[0][:300] if text else type(e).__name__}") from None


def _now() -> datetime:
    return datetime.now(UTC)


def _safe(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    return f"{scheme}://{rest.rpartition('@')[2]}" if sep else url


_EXISTING_TABLES = "SELECT name FROM system.tables WHERE database = {database:String} AND has({tables:Array(String)}, name)"
_TABLES = "SELECT name, engine FROM system.tables WHERE database = {database:String}"
_COLUMNS = "SELECT table, name, type FROM system.columns WHERE database = {database:String} ORDER BY table, position"
_READONLY_REFUSAL = "(READONLY)"  # the name of ClickHouse's error 164, at the end of its message
# Enforced by the engine for every query of the session: writes, DDL and setting changes are refused (code 164).
READ_ONLY_SETTINGS = {"readonly": "1"}

# One schema lock per store in this process: the service, the demo's history and the alert state may open the same
# embedded engine from several threads, and none of them may write while another is half-way through a migration.
_SCHEMA_LOCKS: dict[tuple[str, str], threading.RLock] = {}
_SCHEMA_LOCKS_GUARD = threading.Lock()


def schema_lock(url: str, database: str) -> threading.RLock:
    """The process's lock on the schema of `database` at `url` (re-entrant: `migrate` runs inside `ensure_schema`)."""
    with _SCHEMA_LOCKS_GUARD:
        return _SCHEMA_LOCKS.setdefault((normalize_url(url), database), threading.RLock())


def client_options(
    url: str, user: str | None = None, password: str | None = None, ca_file: Path | None = None, verify: bool = True
) -> dict[str, Any]:
    """The keyword arguments of `clickhouse_connect.get_client` for a server URL: the interface its scheme names
    (clickhouse-connect reads only host, port, user and password from the URL: https://host:8123 would be plain
    http), credentials (over those in the URL) and, for https, certificate verification and the CA; none for chdb."""
    if url.startswith("chdb:"):
        return {}
    options: dict[str, Any] = {"interface": "https" if url.startswith("https://") else "http"}
    if user is not None:
        options["username"] = user
    if password is not None:
        options["password"] = password
    if url.startswith("https://"):
        options["verify"] = verify
        if ca_file is not None and verify:
            options["ca_cert"] = str(ca_file)
    return options


class ClickHouseStore:
    """Schema creation, idempotent batch inserts and queries against one database and table."""

    def __init__(
        self,
        url: str,
        database: str,
        table: str,
        *,
        user: str | None = None,
        password: str | None = None,
        ca_file: Path | None = None,
        verify: bool = True,
        cluster: str | None = None,
        auto_migrate: bool | None = None,
        retention_days: int | None = None,
        text_retention_days: int = 0,
    ) -> None:
        self.url = normalize_url(url)
        self.database = database
        self.table = table
        self.cluster = cluster
        self.auto_migrate = auto_migrate
        self.retention_days = retention_days  # rows of the scores, traffic and rollup tables; 0: forever; None: unmanaged
        self.text_retention_days = text_retention_days  # the scores table's text columns; 0: as long as the row
        self.retention_applied: RetentionPlan | None = None  # what the last `migrate` changed (empty: nothing)
        self.retention_pending: RetentionPlan | None = None  # what the last `check_schema` found differing (not applied)
        self.schema_repaired: list[SchemaDifference] = []  # what the last `migrate` re-created
        self.schema_unfixed: list[SchemaDifference] = []  # what differs after the last `migrate` and it cannot fix
        self._client_options = client_options(self.url, user, password, ca_file, verify)
        self._client: Client | None = None
        self.via_reader: ReaderAddress | None = None  # reads go to the running monitor that holds the directory
        self._read_only = False  # opened by `open_for_reads`: the session has readonly = 1
        self._schema_ready = False  # `ensure_schema` (or `migrate`) found the schema current: rows may be written

    @classmethod
    def from_settings(cls, s: StoreSettings) -> ClickHouseStore:
        """A store from the store slice of the settings (URL, names, credentials, TLS, cluster, retention)."""
        return cls(
            s.url,
            s.database,
            s.table,
            user=s.user,
            password=s.password,
            ca_file=s.ca_file,
            verify=s.verify,
            cluster=s.cluster,
            auto_migrate=s.auto_migrate,
            retention_days=s.retention_days,
            text_retention_days=s.text_retention_days,
        )

    @property
    def auto_migrates(self) -> bool:
        """Whether `ensure_schema` applies pending migrations (else it only checks): `auto_migrate`, by default true
        for the embedded store and false for a server (whose operator runs `relevancy-monitor migrate`)."""
        return migrates_itself(self.url, self.auto_migrate)

    @property
    def qualified_table(self) -> str:
        """`database.table`."""
        return f"{self.database}.{self.table}"

    def open(self) -> None:
        """Connect (or open the embedded engine); refuses, in one line, an embedded directory another live monitor holds."""
        if self._client is None:
            directory = chdb_directory(self.url)
            holder = reader_address(directory) if directory else None
            if holder is not None and holder.pid != os.getpid():  # chDB would print its lock error and fail anyway
                self.via_reader = holder
                self._writable()
            options = {**self._client_options, "settings": dict(READ_ONLY_SETTINGS)} if self._read_only else self._client_options
            self._client = open_client(self.url, **options)

    @property
    def client(self) -> Client:
        """The open client; opens on first use."""
        self.open()
        assert self._client is not None
        return self._client

    def open_for_reads(self, *tables: str) -> None:
        """Open a store that must exist already for reads only: the read paths' way in. It creates nothing (no
        directory, no DDL) and its session has `readonly = 1`, so the engine refuses any write, DDL or setting change.

        The scores table and `tables` (other tables of the database) must exist; raises `StoreError` naming the
        missing directory or tables and how to create them."""
        self._open_read_session()
        wanted = [self.table, *tables]
        found = {row[0] for row in self.query(_EXISTING_TABLES, {"database": self.database, "tables": wanted}).rows}
        missing = [f"{self.database}.{t}" for t in wanted if t not in found]
        if missing:
            kind = "table" if len(missing) == 1 else "tables"
            raise StoreError(f"{kind} {', '.join(missing)} not found at {_safe(self.url)}: {_MIGRATE_HINT}")
        self._use_database()

    def _open_read_session(self) -> None:
        if self._client is not None and not self._read_only:
            raise StoreError("internal: a store opened for writes cannot be reopened for reads only")
        self._read_only = True
        directory = self._existing_directory()
        if self._client is None and directory is not None:
            self._open_reader(directory)
        self.open()

    def _existing_directory(self) -> Path | None:
        """The embedded store's directory, refused in one line when missing or empty (opening chDB there would create
        an empty store and answer from it); None for a server."""
        directory = chdb_directory(self.url)
        if directory is not None and not (directory.is_dir() and any(directory.iterdir())):
            raise StoreError(f"no embedded ClickHouse store at {directory}: {_MIGRATE_HINT}")
        return directory

    def _open_reader(self, directory: Path) -> None:
        """Connect to the read-only endpoint of another live process that holds `directory`, if there is one."""
        address = reader_address(directory)
        if address is None or address.pid == os.getpid():  # in the holding process itself, chDB shares its engine
            return
        try:
            self._client = clickhouse_connect.get_client(dsn=address.url, username=READER_USER, password=address.password)
        except Exception:  # a stale address (the pid reused): the directory's lock decides below
            return
        self.via_reader = address

    def _writable(self) -> None:
        if self._read_only:
            raise StoreError(f"{self.qualified_table} at {_safe(self.url)} is open for reads only: this command never writes")
        if self.via_reader is not None:
            raise StoreError(
                f"the embedded ClickHouse at {self.url} is held by a running monitor (pid {self.via_reader.pid}), which serves "
                "reads only: stop it to write here, or point MONITOR_CLICKHOUSE_URL at a ClickHouse server"
            )

    def ensure_schema(self, *, migrate: bool | None = None) -> None:
        """Open for writes (what every writer does first): under the process's schema lock, apply the pending
        migrations if `migrate` (default `auto_migrates`; the embedded store is created if need be), else refuse a
        schema that is behind; then refuse, in one line naming `migrate`, a store that lacks or differs from what
        this release's migrations create. Raises `StoreError`; rows may be written once it returns."""
        migrating = self.auto_migrates if migrate is None else migrate
        if not migrating:  # a writer that does not migrate finds a missing store in one line, never creates one
            self._existing_directory()
        self.open()
        with schema_lock(self.url, self.database):
            if migrating:
                self.migrate(repair=False)  # a lost table is the operator's to see and repair, not the service's
                found = self.schema_unfixed
            else:
                self._refuse_pending("run `relevancy-monitor migrate` first, or set MONITOR_AUTO_MIGRATE=true")
                found = self.schema_differences()
            problems = [d for d in found if d.blocking]
            if problems:
                raise StoreError(_broken_schema(self.database, self.url, problems))
            if not migrating:
                self.retention_pending = self.retention_plan() if self.retention_days is not None else None
            self._schema_ready = True
        self._use_database()

    def found_schema(self) -> Schema:
        """The tables and views of the database, with their kinds and columns, as `system.tables` and `system.columns`
        have them (empty when the database does not exist)."""
        engines = {str(n): str(e) for n, e in self.query(_TABLES, {"database": self.database}).rows}
        columns: dict[str, list[tuple[str, str]]] = {}
        for table, name, type_ in self.query(_COLUMNS, {"database": self.database}).rows:
            columns.setdefault(str(table), []).append((str(name), str(type_)))
        return {name: SchemaObject(object_kind(engine), tuple(columns.get(name, ()))) for name, engine in engines.items()}

    def schema_differences(self) -> list[SchemaDifference]:
        """How the store differs from what this release's migrations create (see `schemas.schema_check`)."""
        return schema_differences(self.database, expected_schema(self.table), self.found_schema())

    def check_report(self) -> tuple[list[Migration], list[SchemaDifference]]:
        """`migrate --check`: the pending migrations and the differences, read on a read-only session that creates
        nothing; raises `StoreError` for a store that does not exist at all."""
        self._open_read_session()
        return self.pending_migrations(), self.schema_differences()

    def _migrations(self) -> list[Migration]:
        return migrations(self.database, self.table, self.cluster)

    def applied_migrations(self) -> dict[str, tuple[str, str, Any]]:
        """{version: (file name, checksum, applied_at)} of the migrations recorded in the store; empty when the
        store, its database or its `schema_migrations` table does not exist yet (a store of an earlier release)."""
        directory = chdb_directory(self.url)
        if directory is not None and not (directory.is_dir() and any(directory.iterdir())):
            return {}  # opening chDB here would create the store; a missing one has applied nothing
        found = self.query(_EXISTING_TABLES, {"database": self.database, "tables": [MIGRATIONS_TABLE]}).rows
        if not found:
            return {}
        rows = self.query(
            f"SELECT version, argMax(name, applied_at), argMax(checksum, applied_at), max(applied_at)"
            f" FROM {self.database}.{MIGRATIONS_TABLE} WHERE scores_table = {{table:String}} GROUP BY version",
            {"table": self.table},
        ).rows
        return {str(v): (str(name), str(checksum), at) for v, name, checksum, at in rows}

    def pending_migrations(self) -> list[Migration]:
        """The migrations not yet applied, in order; raises `StoreError` (one line) if an applied one has changed
        since: a changed column or index must be a new numbered migration, never an edit of an applied file."""
        applied = self.applied_migrations()
        pending = []
        for m in self._migrations():
            if m.version not in applied:
                pending.append(m)
                continue
            name, checksum, at = applied[m.version]
            if checksum != m.checksum:
                raise StoreError(
                    f"schema migration {m.name} was changed after it was applied to {self.database} at {_safe(self.url)} "
                    f"(as {name} on {at}; checksum {checksum[:12]} recorded, {m.checksum[:12]} now): restore it and put the "
                    "change in a new numbered migration in schemas/sql"
                )
        return pending

    def _refuse_pending(self, remedy: str) -> None:
        pending = self.pending_migrations()
        if pending:
            names = ", ".join(m.name for m in pending)
            raise StoreError(
                f"the schema of {self.database} at {_safe(self.url)} is behind this release ({len(pending)} pending migration(s): {names}): {remedy}"
            )

    def require_current_schema(self) -> None:
        """Refuse, in one line, a store whose schema is behind this release (`check_schema` without the retention
        check): for read paths whose queries use the newer tables."""
        self._refuse_pending("run `relevancy-monitor migrate` (or the monitor, which migrates an embedded store itself)")
        self._use_database()

    def check_schema(self) -> None:
        """Refuse, in one line, a store whose schema is behind this release, whose applied migrations changed or
        that lacks what they create: what `run` does at start when it does not migrate (a server without
        MONITOR_AUTO_MIGRATE). A retention that differs from the settings is not refused: it is left in
        `retention_pending` (empty when none differs)."""
        self.ensure_schema(migrate=False)

    def migrate(self, *, repair: bool = True) -> list[Migration]:
        """Apply the pending migrations in order, each once, recording each (version, name, checksum, applied_at)
        in `{database}.schema_migrations` (for this scores table) once its statements succeeded; returns those applied. A store of an
        earlier release (tables, no record) gets every version recorded: all statements are IF NOT EXISTS.

        Then, if `repair`, the repair: what the store lacks of this release's schema (a dropped table, view or column) is
        re-created by running every migration's statements again (all idempotent), left in `schema_repaired`; what
        still differs is left in `schema_unfixed`. Last the retention: the TTLs that differ from `retention_days` and
        `text_retention_days` are altered, and what changed is left in `retention_applied` (empty when nothing
        differed; skipped while `schema_unfixed` is not empty)."""
        with schema_lock(self.url, self.database):
            pending = self.pending_migrations()
            for statement in migrations_table_ddl(self.database, self.cluster):
                self.command(statement)
            for m in pending:
                for statement in m.statements:
                    self.command(statement)
                row = (self.table, m.version, m.name, m.checksum, _now())
                self._insert(MIGRATIONS_TABLE, ("scores_table", "version", "name", "checksum", "applied_at"), [row])
            self._repair(fix=repair)
            # Unset MONITOR_RETENTION_DAYS leaves the TTLs alone: a `migrate` from a laptop without the deployment's
            # settings must not remove a retention (or shorten it).
            retain = self.retention_days is not None and not any(d.blocking for d in self.schema_unfixed)
            self.retention_applied = self.apply_retention() if retain else None
            self._schema_ready = not any(d.blocking for d in self.schema_unfixed)
        self._use_database()
        return pending

    def _repair(self, *, fix: bool) -> None:
        before = self.schema_differences()
        if fix and any(d.fixable for d in before):
            for m in self._migrations():
                for statement in m.statements:
                    self.command(statement)
            for difference in self.schema_differences():
                added = add_column(difference, self.cluster)
                if added is not None:
                    self.command(added)
        after = self.schema_differences() if before else []
        self.schema_repaired = [d for d in before if d not in after]
        self.schema_unfixed = after

    def retention_plan(self) -> RetentionPlan:
        """What it takes to bring the tables' TTLs to `retention_days` and `text_retention_days` (see
        `monitor.runtime.retention`), from their `create_table_query`; raises `StoreError` if a table is missing."""
        tables = retention_tables(self.table)
        sql = "SELECT name, create_table_query FROM system.tables WHERE database = {database:String} AND has({tables:Array(String)}, name)"
        current = {str(name): str(query) for name, query in self.query(sql, {"database": self.database, "tables": list(tables)}).rows}
        try:
            return plan_retention(self.database, self.table, self.retention_days or 0, self.text_retention_days, current, self.cluster)
        except ValueError as e:
            raise StoreError(f"cannot plan the retention of {self.database} at {_safe(self.url)}: {e}: {_MIGRATE_HINT}") from None

    def apply_retention(self) -> RetentionPlan:
        """Alter the TTLs that differ from the settings, one ALTER per table (see `retention.ALTER_SETTINGS` on the
        rewrite of existing parts); returns the plan applied (empty: nothing differed). Raises `StoreError`."""
        plan = self.retention_plan()
        for statement in plan.statements:
            self._execute(statement, settings=dict(ALTER_SETTINGS))
        return plan

    def _use_database(self) -> None:
        # Unqualified names in queries (`FROM relevancy_scores`) resolve against the configured database. Set only
        # once the database is known to exist: a client opened on a missing database fails on its first query.
        self.client.database = self.database

    def command(self, sql: str) -> Any:
        """Run a statement that returns no rows."""
        self._writable()
        try:
            return self.client.command(sql)
        except ClickHouseError as e:
            raise StoreError(str(e).strip().splitlines()[0][:500]) from e

    def _execute(self, sql: str, parameters: dict[str, Any] | None = None, settings: dict[str, Any] | None = None) -> Any:
        self._writable()
        try:
            return self.client.command(sql, parameters=parameters, settings=settings)
        except ClickHouseError as e:
            raise StoreError(str(e).strip().splitlines()[0][:500]) from e

    def erase_rows(self, table: str, where: str, parameters: dict[str, Any]) -> None:
        """Lightweight `DELETE FROM {database}.{table} WHERE {where}` (ON CLUSTER with a cluster): the rows vanish from
        reads once it returns (ClickHouse waits for the marking by default) and from disk at later merges. `where`
        takes its values from `parameters`, bound by the server (`{name:Array(String)}`), never formatted into the SQL.
        Raises `StoreError`."""
        self._require_schema()
        statement = f"DELETE FROM {self.database}.{table} WHERE {where}"
        self._execute(on_cluster(statement, self.cluster) if self.cluster else statement, parameters=parameters)

    def _require_schema(self) -> None:
        self._writable()
        if not self._schema_ready:
            raise StoreError(f"internal: a write to {self.database} before its schema was checked (ensure_schema first)")

    def insert_rows(self, rows: Sequence[ScoredRow], dedup_token: str) -> None:
        """Insert scored rows; a retry with the same token and rows is a no-op on the server."""
        self._require_schema()
        data = [row.as_tuple() for row in rows]
        self.client.insert(
            self.qualified_table,
            data,
            column_names=list(SCORED_COLUMNS),
            settings={"insert_deduplication_token": dedup_token},
        )

    def insert_table(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Insert plain rows into another table of this database (traffic counts, alert state); raises `StoreError`."""
        self._require_schema()
        self._insert(table, columns, rows)

    def _insert(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        self._writable()
        try:
            self.client.insert(f"{self.database}.{table}", list(rows), column_names=list(columns))
        except ClickHouseError as e:
            raise StoreError(str(e).strip().splitlines()[0][:500]) from e

    def judge_spend(self, hour_start: float, day_start: float) -> tuple[Spend, Spend]:
        """What every replica spent on judge calls since `hour_start` and since `day_start` (epoch seconds),
        from the live consumer's rows written (cached verdicts cost nothing; a replay has its own cap, --max-usd)."""
        tok = "input_tokens + output_tokens + cache_read_tokens + cache_write_tokens"
        row = self.query(
            f"WITH toDateTime64({{h:Float64}}, 3, 'UTC') AS h SELECT countIf(scored_at >= h), sumIf({tok}, scored_at >= h),"
            f" sumIf(ifNull(cost_usd, 0), scored_at >= h), count(), sum({tok}), sum(ifNull(cost_usd, 0))"
            f" FROM {self.qualified_table} WHERE scored_at >= toDateTime64({{d:Float64}}, 3, 'UTC') AND NOT cached AND replay_run = ''",
            {"h": hour_start, "d": day_start},
        ).rows[0]
        return Spend(*map(float, row[0:3])), Spend(*map(float, row[3:6]))

    def query(self, sql: str, parameters: dict[str, Any] | None = None) -> QueryResult:
        """Run a query; raises `StoreError` with ClickHouse's message on failure."""
        try:
            result = self.client.query(sql, parameters=parameters)
        except ClickHouseError as e:
            message = str(e).strip().splitlines()[0][:500]
            if self._read_only and _READONLY_REFUSAL in message:
                raise StoreError(f"refused: this command only reads, and its session is read-only (readonly = 1): {message}") from e
            raise StoreError(message) from e
        return QueryResult(columns=tuple(result.column_names), rows=[tuple(r) for r in result.result_rows])

    def close(self) -> None:
        """Close the client (and the embedded engine)."""
        if self._client is not None:
            self._client.close()
            self._client = None
        self.via_reader = None
        self._read_only = self._schema_ready = False


class AsyncStore:
    """Runs a `ClickHouseStore`'s calls on one dedicated thread, off the event loop."""

    def __init__(self, store: ClickHouseStore) -> None:
        self.store = store
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clickhouse")
        self._reader: EmbeddedReader | None = None

    async def _run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def open(self) -> None:
        """Open and create the schema; an embedded store is then served read-only to other processes."""
        await self._run(self.store.open)
        await self._run(self.store.ensure_schema)
        directory = chdb_directory(self.store.url)
        # Opened again (a pipeline opens the store its caller opened): a second reader would leak its chDB
        # session, and an engine shut down with a session still open crashes the process at exit.
        if directory is not None and self._reader is None:
            self._reader = await self._run(_start_reader, directory)

    async def open_for_reads(self, *tables: str) -> None:
        """`ClickHouseStore.open_for_reads`, then `require_current_schema`: nothing is created, the engine refuses
        writes, and a schema behind this release is one line naming `migrate`."""
        await self._run(self.store.open_for_reads, *tables)
        await self._run(self.store.require_current_schema)

    async def call(self, fn: Callable[[ClickHouseStore], T]) -> T:
        """`fn(store)` on the store's own thread: for read helpers written against the synchronous store."""
        return await self._run(fn, self.store)  # type: ignore[no-any-return]

    async def insert_rows(self, rows: Sequence[ScoredRow], dedup_token: str) -> None:
        """See `ClickHouseStore.insert_rows`."""
        await self._run(self.store.insert_rows, rows, dedup_token)

    async def insert_table(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """See `ClickHouseStore.insert_table`."""
        await self._run(self.store.insert_table, table, columns, rows)

    async def judge_spend(self, hour_start: float, day_start: float) -> tuple[Spend, Spend]:
        """See `ClickHouseStore.judge_spend`."""
        return await self._run(self.store.judge_spend, hour_start, day_start)  # type: ignore[no-any-return]

    async def query(self, sql: str, parameters: dict[str, Any] | None = None) -> QueryResult:
        """See `ClickHouseStore.query`."""
        return await self._run(self.store.query, sql, parameters)  # type: ignore[no-any-return]

    async def close(self) -> None:
        """Stop serving reads, close the store and the thread."""
        if self._reader is not None:
            await self._run(self._reader.stop)
            self._reader = None
        await self._run(self.store.close)
        self._executor.shutdown(wait=True)


def _broken_schema(database: str, url: str, problems: list[SchemaDifference]) -> str:
    """One line: what the store lacks or has otherwise, and the command that repairs or lists it."""
    first = "; ".join(str(p) for p in problems[:3]) + (f" (and {len(problems) - 3} more)" if len(problems) > 3 else "")
    if all(p.fixable for p in problems):
        return f"the store {database} at {_safe(url)} is incomplete: {first}: run `relevancy-monitor migrate` to re-create it"
    return (
        f"the store {database} at {_safe(url)} differs from this release's schema: {first}: "
        "`relevancy-monitor migrate --check` lists every difference; `migrate` re-creates what is missing and changes nothing else"
    )


def _start_reader(directory: Path) -> EmbeddedReader | None:
    """The read-only endpoint for `directory`, started; None (logged) if it cannot start: the monitor runs on
    without it, and only reads from other processes wait for it to stop."""
    try:
        return EmbeddedReader(directory).start()
    except Exception as e:  # an optional convenience must not stop the service
        log.warning("embedded_reader_unavailable", directory=str(directory), error=str(e).splitlines()[0][:300] if str(e) else type(e).__name__)
        return None
