"""The async shell of a store: a `ClickHouseStore`'s calls on one dedicated thread, off the event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import structlog

from monitor.store.connection import ClickHouseStore, QueryResult
from monitor.store.embedded_reader import EmbeddedReader
from monitor.store.migrations import Migrations
from monitor.store.settings import StoreSettings
from monitor.store.urls import chdb_directory
from schemas.scored import ScoredRow

T = TypeVar("T")

log = structlog.get_logger("monitor.store.async_store")


class AsyncStore:
    """Runs a `ClickHouseStore`'s calls on one dedicated thread; `open` ensures its schema through `migrations`."""

    def __init__(self, store: ClickHouseStore, migrations: Migrations | None = None) -> None:
        self.store = store
        self.migrations = migrations or Migrations(store)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clickhouse")
        self._reader: EmbeddedReader | None = None
        self._opened = False

    @classmethod
    def from_settings(cls, s: StoreSettings) -> AsyncStore:
        """The store of the slice with its migrations (auto-migration and retention from the slice)."""
        store = ClickHouseStore.from_settings(s)
        return cls(store, Migrations.from_settings(store, s))

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def open(self) -> None:
        """Open and ensure the schema (migrating it, or checking it: see `Migrations.ensure`), and log what that
        applied or found; an embedded store is then served read-only to other processes. Once: opened again (a
        pipeline opens the store its caller opened), it neither reconnects nor checks the schema again."""
        if self._opened:
            return
        await self._run(self.store.open)
        await self._run(self.migrations.ensure)
        self._opened = True
        _log_schema(self.migrations)
        directory = chdb_directory(self.store.url)
        if directory is not None:
            self._reader = await self._run(_start_reader, directory)

    async def open_for_reads(self, *tables: str) -> None:
        """`ClickHouseStore.open_for_reads`, then `Migrations.require_current`: nothing is created, the engine refuses
        writes, and a schema behind this release is one line naming `migrate`."""
        await self._run(self.store.open_for_reads, *tables)
        await self._run(self.migrations.require_current)

    async def call(self, fn: Callable[[ClickHouseStore], T]) -> T:
        """`fn(store)` on the store's own thread: for read helpers written against the synchronous store."""
        return await self._run(fn, self.store)

    async def insert_rows(self, rows: Sequence[ScoredRow], dedup_token: str) -> None:
        """See `ClickHouseStore.insert_rows`."""
        await self._run(self.store.insert_rows, rows, dedup_token)

    async def insert_table(
        self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], dedup_token: str | None = None
    ) -> None:
        """See `ClickHouseStore.insert_table`."""
        await self._run(self.store.insert_table, table, columns, rows, dedup_token)

    async def query(self, sql: str, parameters: dict[str, Any] | None = None) -> QueryResult:
        """See `ClickHouseStore.query`."""
        return await self._run(self.store.query, sql, parameters)

    async def close(self) -> None:
        """Stop serving reads, close the store and the thread."""
        if self._reader is not None:
            await self._run(self._reader.stop)
            self._reader = None
        await self._run(self.store.close)
        self._executor.shutdown(wait=True)


def _log_schema(migrations: Migrations) -> None:
    """What `ensure` applied (migrations, retention), or the retention it found differing, not applied."""
    database = migrations.store.database
    if migrations.migrated:
        log.info("migrated", database=database, migrations=[m.name for m in migrations.migrated])
    applied, pending = migrations.retention_applied, migrations.retention_pending
    if applied:
        log.info("retention applied", database=database, retention=applied.wanted, changes=applied.describe())
    if pending:
        log.warning(
            "the store's retention differs from the settings: run `relevancy-monitor migrate` to apply it",
            database=database,
            retention=pending.wanted,
            changes=pending.describe(),
        )


def _start_reader(directory: Path) -> EmbeddedReader | None:
    """The read-only endpoint for `directory`, started; None (logged) if it cannot start: the monitor runs on
    without it, and only reads from other processes wait for it to stop."""
    try:
        return EmbeddedReader(directory).start()
    except Exception as e:  # an optional convenience must not stop the service
        detail = str(e).splitlines()[0][:300] if str(e) else type(e).__name__
        log.warning("embedded_reader_unavailable", directory=str(directory), error=detail)
        return None
