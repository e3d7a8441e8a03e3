"""`ClickHouseSink`: batches scored rows and writes them durably and idempotently.

Commit order, per row:
  1. `add(row, ticket)` buffers the row; nothing is acknowledged yet.
  2. A flush (size bound `max_rows` or time bound `max_seconds`) inserts the whole batch with a deduplication
     token derived from its contents, retrying the *same* batch with the *same* token on failure, so an insert
     whose acknowledgement was lost is not written twice.
  3. Only after the insert returns are the batch's tickets (and rows) passed to `on_durable`, which marks
     their offsets done; the consumer then commits the contiguous low-water mark.
A crash between 2 and 3 re-delivers the events; the table's replacing key collapses the re-scored rows.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import time
from collections.abc import Callable
from typing import TypeVar

import structlog

from monitor.backoff import Backoff
from monitor.runtime.health import Health
from monitor.runtime.metrics import Metrics
from monitor.store.async_store import AsyncStore
from monitor.store.batching import INSERT_BACKOFF, BatchingSink
from monitor.store.connection import refused_by_driver
from schemas.errors import SinkClosed
from schemas.scored import ScoredRow

T = TypeVar("T")
log = structlog.get_logger("monitor.runtime.sink")


def batch_token(rows: list[ScoredRow]) -> str:
    """Deduplication token for a batch: a hash of its (judge_id, event_id, version) triples."""
    h = hashlib.sha256()
    for row in rows:
        h.update(f"{row.judge_id}\x00{row.event_id}\x00{row.version}\x01".encode())
    return h.hexdigest()


class ClickHouseSink(BatchingSink[ScoredRow, T]):
    """Two verbs: `add` a row with its ticket, `flush` the batch. `run()` flushes on the size and time bounds."""

    def __init__(
        self,
        store: AsyncStore,
        on_durable: Callable[[list[T], list[ScoredRow]], None],
        metrics: Metrics,
        health: Health | None = None,
        *,
        max_rows: int = 1000,
        max_seconds: float = 1.0,
        backoff: Backoff = INSERT_BACKOFF,
    ) -> None:
        super().__init__(max_rows=max_rows, max_seconds=max_seconds, backoff=backoff)
        self._store = store
        self._on_durable = on_durable
        self._metrics = metrics
        self._health = health or Health()

    async def flush(self) -> int:
        """Write what is buffered, retrying until durable; returns rows written. Raises `SinkClosed` if closed
        meanwhile."""
        async with self._lock:
            if not self._rows:
                return 0
            rows, tickets = self._take()
            token = batch_token(rows)
            started = time.monotonic()
            try:
                for retry in itertools.count():
                    try:
                        rows = await self._insert(rows, token)
                        break
                    except Exception as e:  # any driver or network error: the batch stays in memory and is retried
                        self._metrics.insert_failures.inc()
                        self._health.write_failed(
                            f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
                        )
                        delay = self._backoff.delay(retry)
                        log.warning(
                            "insert_failed",
                            rows=len(rows),
                            error=type(e).__name__,
                            detail=str(e)[:300],
                            retry_in_s=round(delay, 2),
                        )
                        if self._closing:
                            raise SinkClosed(f"gave up a batch of {len(rows)} rows on shutdown") from e
                        await asyncio.sleep(delay)
            except BaseException:
                self._put_back(rows, tickets)  # cancelled or closed mid-write: neither lost nor left unacknowledged
                raise
            self._metrics.flush_seconds.observe(time.monotonic() - started)
            self._health.write_succeeded()
            self._metrics.rows_written.inc(len(rows))
            self._on_durable(tickets, rows)
            return len(rows)

    async def _insert(self, rows: list[ScoredRow], token: str) -> list[ScoredRow]:
        """Insert a batch; returns the rows as written. A batch the driver refuses to serialise (a property of
        the data, not a transient fault) is written row by row, so one bad row cannot hold back the rest: a
        refused row is replaced by an error row, and if even that is refused it is counted and logged."""
        try:
            await self._store.insert_rows(rows, token)
            return rows
        except Exception as e:  # what the driver cannot encode is a property of the row; the rest is retried
            if not refused_by_driver(e):
                raise
            log.error("batch_refused_by_driver", rows=len(rows), detail=str(e).splitlines()[0][:300])
        written: list[ScoredRow] = []
        for i, row in enumerate(rows):
            try:
                await self._store.insert_rows([row], f"{token}-{i}")
                written.append(row)
                continue
            except Exception as e:
                if not refused_by_driver(e):
                    raise
                reason = f"internal: row refused by the store: {str(e).splitlines()[0][:200]}"
                log.error("row_refused_by_driver", event_id=row.event_id, detail=reason)
            fallback = row.as_error(reason)
            try:
                await self._store.insert_rows([fallback], f"{token}-{i}-error")
                written.append(fallback)
            except Exception as e:
                if not refused_by_driver(e):
                    raise
                log.error("row_dropped", event_id=row.event_id, detail=str(e).splitlines()[0][:300])
                self._metrics.rows_dropped.inc()
        return written
