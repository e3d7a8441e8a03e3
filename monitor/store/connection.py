"""One connection to a ClickHouse database through clickhouse-connect: embedded chDB (`chdb:///dir`) or a server.

All calls are synchronous; async callers go through `monitor.store.async_store.AsyncStore`, which runs them on one
dedicated thread (chDB has no async client and one engine per process, so calls are serialised there).

Two ways in, and nothing else writes:
1. `open_for_reads` (`sql`, `report`, `alerts check|backtest`, `compare`, the dry runs) creates nothing, issues no DDL
   and opens a session with ClickHouse's `readonly = 1`, so the engine itself refuses writes, DDL and setting changes
   on every path: the embedded engine, a running monitor's read-only endpoint (`monitor.store.embedded_reader`,
   used while a monitor holds the directory: chDB allows one process per directory) and a server.
2. `Migrations.ensure` (`monitor.store.migrations`) opens for writes: it checks (or migrates) the schema and only then
   marks the connection `schema_ready`; every write refuses until it is."""

from __future__ import annotations

import logging
import os
import socket
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import clickhouse_connect
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError, DataError

from monitor.store.embedded_engine import engine_options
from monitor.store.embedded_reader import READER_FILE, READER_USER, ReaderAddress, reader_address
from monitor.store.settings import StoreSettings
from monitor.store.urls import chdb_directory, client_options, normalize_url, safe_url
from schemas.ddl import on_cluster
from schemas.errors import StoreError
from schemas.scored import SCORED_COLUMNS, ScoredRow

MIGRATE_HINT = "run the monitor (relevancy-monitor run) or `relevancy-monitor migrate` first"
EXISTING_TABLES = (
    "SELECT name FROM system.tables WHERE database = {database:String} AND has({tables:Array(String)}, name)"
)
_READONLY_REFUSAL = "(READONLY)"  # the name of ClickHouse's error 164, at the end of its message
# Enforced by the engine for every query of the session: writes, DDL and setting changes are refused (code 164).
READ_ONLY_SETTINGS = {"readonly": "1"}


@dataclass(frozen=True, slots=True)
class QueryResult:
    """Column names and rows of a query."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]


# The driver's warnings ("Unexpected Http Driver Exception", urllib3's "Retrying ...") precede an exception that the
# store turns into its own one-line error or `store_*` event: alone, they say less, twice.
_DRIVER_LOGGERS = ("clickhouse_connect", "urllib3")


def _quiet_driver() -> None:
    for name in _DRIVER_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)


# The driver's optional array libraries: it imports each the first time it checks whether data is one of its types.
_ARRAY_LIBRARIES = ("pd", "pd_time_test", "np", "arrow", "pl")


def _rows_only() -> None:
    """Tell clickhouse-connect that pandas, numpy, pyarrow and polars are absent, as on an install without them.

    At the first insert the driver imports pandas to ask whether the rows are a DataFrame, and numpy to ask whether
    they are an array: with pandas installed (chDB requires it) that is ~80 MB resident, numpy alone ~15 MB, in a
    process that inserts and reads tuples only (the store uses no `*_df`, `*_np` or `*_arrow` call). Libraries the
    driver has already resolved are left as they are."""
    from clickhouse_connect.driver import options as driver_options

    resolved = vars(driver_options)
    for name in _ARRAY_LIBRARIES:
        resolved.setdefault(name, None)


def open_client(url: str, **options: Any) -> Client:
    """A clickhouse-connect client for `url`; raises `StoreError` with a readable reason (and the driver's error as
    its cause)."""
    _quiet_driver()
    _rows_only()
    try:
        return clickhouse_connect.get_client(dsn=url, **options)
    except ImportError as e:  # clickhouse-connect imports chDB only for a chdb:// URL; the core install leaves it out
        if url.startswith("chdb:"):
            raise StoreError(
                "the embedded ClickHouse (chdb://) needs the chDB extra: pip install 'relevancy-monitor[embedded]'"
            ) from e
        raise StoreError(f"cannot open ClickHouse at {safe_url(url)}: {_first_line(e)}") from e
    except Exception as e:  # the driver raises several unrelated types for "cannot open"
        raise StoreError(_open_refusal(url, e)) from e


def _open_refusal(url: str, e: Exception) -> str:
    text = str(e)
    if "Cannot lock file" in text or "already running" in text:
        directory = chdb_directory(url)
        holder = reader_address(directory) if directory else None
        if holder is not None:
            return (
                f"the embedded ClickHouse at {url} is held by a running monitor (pid {holder.pid}): reads (sql, "
                "alerts, report) reach it while it runs, writes need it stopped; or point MONITOR_CLICKHOUSE_URL at "
                "a ClickHouse server"
            )
        return (
            f"the embedded ClickHouse at {url} is in use by another process (a running monitor?): "
            "stop it first, or point MONITOR_CLICKHOUSE_URL at a ClickHouse server"
        )
    if "already initialized with path" in text:
        return f"this process already uses another embedded ClickHouse path; chDB allows one per process ({url})"
    return f"cannot open ClickHouse at {safe_url(url)}: {_first_line(e)}"


def _first_line(e: BaseException) -> str:
    reason = _network_reason(e)
    if reason is not None:
        return reason
    return str(e).splitlines()[0][:300] if str(e) else type(e).__name__


def _network_reason(e: BaseException) -> str | None:
    """In words, the socket error under the driver's wrappers (clickhouse-connect wraps urllib3, which wraps the
    OSError): their messages are a long pool repr with a query id, not a reason."""
    stack: list[BaseException | None] = [e]
    seen: set[int] = set()
    while stack:
        x = stack.pop()
        if x is None or id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, ssl.SSLCertVerificationError):
            return f"TLS certificate verify failed: {x.verify_message} (check MONITOR_CLICKHOUSE_CA_FILE)"
        if isinstance(x, ConnectionRefusedError):
            return "connection refused (check MONITOR_CLICKHOUSE_URL)"
        if isinstance(x, socket.gaierror):
            return "host name not resolved (check MONITOR_CLICKHOUSE_URL)"
        if isinstance(x, TimeoutError):
            return "no answer (timed out; check MONITOR_CLICKHOUSE_URL)"
        reason = getattr(x, "reason", None)
        stack += [x.__cause__, x.__context__, reason if isinstance(reason, BaseException) else None]
    return None


def refused_by_driver(e: BaseException) -> bool:
    """Whether the driver refused to encode the rows of an insert (a property of the data, never a transient fault,
    so a retry cannot help): its `DataError`, which the store wraps in `StoreError`, or the encoding's own ValueError
    (UnicodeError) or TypeError."""
    return isinstance(e, DataError | ValueError | TypeError) or isinstance(e.__cause__, DataError)


def _store_error(e: ClickHouseError) -> StoreError:
    reason = _network_reason(e)
    return StoreError(f"ClickHouse unreachable: {reason}" if reason else str(e).strip().splitlines()[0][:500])


class ClickHouseStore:
    """A connection to one database and its scores table: sessions, queries, statements and idempotent inserts."""

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
    ) -> None:
        self.url = normalize_url(url)
        self.database = database
        self.table = table
        self.cluster = cluster
        self._client_options = client_options(self.url, user, password, ca_file, verify)
        self._client: Client | None = None
        self.via_reader: ReaderAddress | None = None  # reads go to the running monitor that holds the directory
        self._read_only = False  # opened by `open_for_reads`: the session has readonly = 1
        self._reader_failure: tuple[str, Exception] | None = None  # a running monitor's read endpoint that failed
        self.schema_ready = False  # set by `Migrations.ensure` once the schema is current: rows may be written

    @classmethod
    def from_settings(cls, s: StoreSettings) -> ClickHouseStore:
        """A store from the store slice of the settings (URL, names, credentials, TLS, cluster)."""
        return cls(
            s.url, s.database, s.table, user=s.user,
            password=s.password.get_secret_value() if s.password else None, ca_file=s.ca_file, verify=s.verify,
            cluster=s.cluster,
        )  # fmt: skip

    def sibling(self) -> ClickHouseStore:
        """A second connection to the same store, not opened yet, with the same credentials and TLS: the web UI reads
        on one (read-only) and inserts its labels on the other."""
        other = ClickHouseStore(self.url, self.database, self.table, cluster=self.cluster)
        other._client_options = self._client_options
        return other

    @property
    def qualified_table(self) -> str:
        """`database.table`."""
        return f"{self.database}.{self.table}"

    @property
    def safe_url(self) -> str:
        """The URL without credentials, for messages."""
        return safe_url(self.url)

    def open(self) -> None:
        """Connect (or open the embedded engine); refuses, in one line, an embedded directory another monitor holds."""
        if self._client is None:
            directory = chdb_directory(self.url)
            holder = reader_address(directory) if directory else None
            if holder is not None and holder.pid != os.getpid():  # chDB would print its lock error and fail anyway
                if self._reader_failure is not None:
                    failure, cause = self._reader_failure
                    raise StoreError(
                        f"the embedded ClickHouse at {self.url} is held by process {holder.pid} (a running monitor, "
                        f"by {READER_FILE} there), whose read endpoint {failure}: retry once the monitor has started; "
                        "if it has stopped, remove that file"
                    ) from cause
                self.via_reader = holder
                self.writable()
            options = self._client_options
            if self._read_only:
                options = {**options, "settings": dict(READ_ONLY_SETTINGS)}
            if self.url.startswith("chdb:"):
                with engine_options() as engine:  # the embedded engine starts here (or is running already)
                    chdb_options = {**engine, **options.get("chdb_options", {})}
                    self._client = open_client(self.url, **{**options, "chdb_options": chdb_options})
            else:
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
        self.open_read_session()
        wanted = [self.table, *tables]
        found = {row[0] for row in self.query(EXISTING_TABLES, {"database": self.database, "tables": wanted}).rows}
        missing = [f"{self.database}.{t}" for t in wanted if t not in found]
        if missing:
            kind = "table" if len(missing) == 1 else "tables"
            raise StoreError(f"{kind} {', '.join(missing)} not found at {self.safe_url}: {MIGRATE_HINT}")
        self.use_database()

    def open_read_session(self) -> None:
        """Open with `readonly = 1` (through a running monitor's reader when it holds the embedded directory)."""
        if self._client is not None and not self._read_only:
            raise StoreError("internal: a store opened for writes cannot be reopened for reads only")
        self._read_only = True
        directory = self.existing_directory()
        if self._client is None and directory is not None:
            self._open_reader(directory)
        self.open()

    def existing_directory(self) -> Path | None:
        """The embedded store's directory, refused in one line when missing or empty (opening chDB there would create
        an empty store and answer from it); None for a server."""
        directory = chdb_directory(self.url)
        if directory is not None and not (directory.is_dir() and any(directory.iterdir())):
            raise StoreError(f"no embedded ClickHouse store at {directory}: {MIGRATE_HINT}")
        return directory

    def _open_reader(self, directory: Path) -> None:
        """Connect to the read-only endpoint of another live process that holds `directory`, if there is one."""
        address = reader_address(directory)
        if address is None or address.pid == os.getpid():  # in the holding process itself, chDB shares its engine
            return
        _quiet_driver()
        try:
            self._client = clickhouse_connect.get_client(
                dsn=address.url, username=READER_USER, password=address.password
            )
        except Exception as e:  # a stale address (the pid reused), or an endpoint not (or no longer) serving
            # `open` refuses then, saying this: the one who holds the directory did not let its engine be read.
            reason = _first_line(e).partition(" (check MONITOR_CLICKHOUSE")[0]  # the endpoint is not that setting
            self._reader_failure = (f"at {address.url} did not answer ({reason})", e)
            return
        self.via_reader = address

    def writable(self) -> None:
        """Refuse, in one line, a write on a read-only session or through a running monitor's reader."""
        if self._read_only:
            raise StoreError(
                f"{self.qualified_table} at {self.safe_url} is open for reads only: this command never writes"
            )
        if self.via_reader is not None:
            raise StoreError(
                f"the embedded ClickHouse at {self.url} is held by a running monitor (pid {self.via_reader.pid}), "
                "which serves reads only: stop it to write here, or point MONITOR_CLICKHOUSE_URL at a ClickHouse server"
            )

    def use_database(self) -> None:
        """Resolve unqualified names (`FROM relevancy_scores`) against the configured database."""
        # Set only once the database is known to exist: a client opened on a missing database fails on its first query.
        self.client.database = self.database

    def command(
        self, sql: str, parameters: dict[str, Any] | None = None, settings: dict[str, Any] | None = None
    ) -> Any:
        """Run a statement that returns no rows; raises `StoreError`."""
        self.writable()
        try:
            return self.client.command(sql, parameters=parameters, settings=settings)
        except ClickHouseError as e:
            raise _store_error(e) from e

    def erase_rows(self, table: str, where: str, parameters: dict[str, Any]) -> None:
        """Lightweight `DELETE FROM {database}.{table} WHERE {where}` (ON CLUSTER with a cluster): the rows vanish from
        reads once it returns and from disk at later merges. `where` takes its values from `parameters`, bound by the
        server (`{name:Array(String)}`), never formatted into the SQL. Raises `StoreError`."""
        self._require_schema()
        statement = f"DELETE FROM {self.database}.{table} WHERE {where}"
        self.command(on_cluster(statement, self.cluster) if self.cluster else statement, parameters=parameters)

    def _require_schema(self) -> None:
        self.writable()
        if not self.schema_ready:
            raise StoreError(f"internal: a write to {self.database} before its schema was checked (ensure it first)")

    def insert_rows(self, rows: Sequence[ScoredRow], dedup_token: str) -> None:
        """Insert scored rows; a retry with the same token and rows is a no-op on the server. Raises `StoreError`."""
        self._require_schema()
        try:
            self.client.insert(
                self.qualified_table,
                [row.as_tuple() for row in rows],
                column_names=list(SCORED_COLUMNS),
                settings={"insert_deduplication_token": dedup_token},
            )
        except ClickHouseError as e:
            raise _store_error(e) from e

    def insert_table(
        self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], dedup_token: str | None = None
    ) -> None:
        """Insert plain rows into another table of this database (traffic counts, alert state, feedback); with
        `dedup_token`, a retry with the same token and rows is a no-op on the server, in the table and in the tables
        its materialized views fill that keep a deduplication window. Raises `StoreError`."""
        self._require_schema()
        settings = {"insert_deduplication_token": dedup_token, "deduplicate_blocks_in_dependent_materialized_views": 1}
        self._insert(table, columns, rows, settings if dedup_token else None)

    def insert_unchecked(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """`insert_table` before the schema is ready: for the migrations' own records only."""
        self._insert(table, columns, rows, None)

    def _insert(
        self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], settings: dict[str, Any] | None
    ) -> None:
        self.writable()
        try:
            self.client.insert(f"{self.database}.{table}", list(rows), column_names=list(columns), settings=settings)
        except ClickHouseError as e:
            raise _store_error(e) from e

    def query(self, sql: str, parameters: dict[str, Any] | None = None) -> QueryResult:
        """Run a query; raises `StoreError` with ClickHouse's message on failure."""
        try:
            result = self.client.query(sql, parameters=parameters)
        except ClickHouseError as e:
            if _network_reason(e) is not None:
                raise _store_error(e) from e
            message = str(e).strip().splitlines()[0][:500]
            if self._read_only and _READONLY_REFUSAL in message:
                raise StoreError(
                    f"refused: this command only reads, and its session is read-only (readonly = 1): {message}"
                ) from e
            raise StoreError(message) from e
        return QueryResult(columns=tuple(result.column_names), rows=[tuple(r) for r in result.result_rows])

    def close(self) -> None:
        """Close the client (and the embedded engine)."""
        if self._client is not None:
            self._client.close()
            self._client = None
        self.via_reader = None
        self._reader_failure = None
        self._read_only = self.schema_ready = False
