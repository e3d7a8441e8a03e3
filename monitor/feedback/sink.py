"""`FeedbackSink`: batches feedback rows and writes them to `{database}.feedback` durably, idempotently, and once.

Commit order, per row (as `monitor.runtime.sink.ClickHouseSink`'s for scored rows):
  1. `add(row, ticket)` buffers the row; nothing is acknowledged yet.
  2. A flush (size bound `max_rows` or time bound `max_seconds`) takes the batch, keeps one row per feedback id (the
     last added), leaves out the ids the table already holds (one query, pruned to the batch's months), and inserts
     the rest with a deduplication token derived from them. On failure the batch is retried: the stored ids are looked
     for again (an insert whose acknowledgement was lost is found written) and the same rows go with the same token,
     which the server drops if the first attempt lands after all, in the table and in the rollup.
  3. Only after the insert returns are all the batch's tickets (skipped rows' too) passed to `on_durable`.
The rollup (`feedback_rollup_1m`, a materialized view) counts inserted rows, so leaving out stored ids is what keeps a
redelivered event (a crash between 2 and 3, a rebalance) from counting twice. Two consumers writing the same feedback
at once (a record redelivered during a rebalance) could both miss the other's row; the table collapses them, the
rollup would count it twice."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
from collections.abc import Callable
from typing import TypeVar

import structlog

from monitor.backoff import Backoff
from monitor.feedback.rows import FEEDBACK_COLUMNS, FeedbackRow, feedback_values
from monitor.store.async_store import AsyncStore
from monitor.store.batching import INSERT_BACKOFF, BatchingSink
from monitor.store.connection import refused_by_driver
from schemas.errors import SinkClosed
from schemas.feedback import FEEDBACK_TABLE

T = TypeVar("T")
log = structlog.get_logger("monitor.feedback.sink")


def batch_token(rows: list[FeedbackRow]) -> str:
    """Deduplication token for a batch: a hash of its (feedback_id, version) pairs."""
    h = hashlib.sha256()
    for row in rows:
        h.update(f"{row.stored_id}\x00{row.version}\x01".encode())
    return h.hexdigest()


def one_per_id(rows: list[FeedbackRow]) -> list[FeedbackRow]:
    """The rows with one per feedback id, the last added (the latest received), in the order of first appearance."""
    last: dict[str, FeedbackRow] = {}
    for row in rows:
        last[row.stored_id] = row
    return list(last.values())


class FeedbackSink(BatchingSink[FeedbackRow, T]):
    """Two verbs: `add` a row with its ticket, `flush` the batch. `run()` flushes on the size and time bounds."""

    def __init__(
        self,
        store: AsyncStore,
        on_durable: Callable[[list[T]], None],
        *,
        max_rows: int = 500,
        max_seconds: float = 1.0,
        backoff: Backoff = INSERT_BACKOFF,
    ) -> None:
        super().__init__(max_rows=max_rows, max_seconds=max_seconds, backoff=backoff)
        self._store = store
        self._on_durable = on_durable
        self.written = 0  # rows inserted
        self.skipped = 0  # rows left out: their feedback id was stored already, or came twice in one batch
        self.dropped = 0  # rows the driver refused to encode (logged each; their tickets are acknowledged)

    async def flush(self) -> int:
        """Write one batch of what is buffered, retrying until durable, then acknowledge all its tickets; returns the
        rows inserted (those left out as already stored are not counted). Raises `SinkClosed` if closed meanwhile."""
        async with self._lock:
            if not self._rows:
                return 0
            rows, tickets = self._take()
            unique = one_per_id(rows)
            try:
                for retry in itertools.count():
                    try:
                        # Looked for again at each attempt: a write whose acknowledgement was lost is found stored.
                        fresh = await self._unstored(unique)
                        kept, written = len(fresh), await self._insert(fresh)
                        break
                    except Exception as e:  # any driver or network error: the batch stays in memory and is retried
                        delay = self._backoff.delay(retry)
                        log.warning(
                            "feedback_insert_failed",
                            rows=len(rows),
                            error=type(e).__name__,
                            detail=str(e)[:300],
                            retry_in_s=round(delay, 2),
                        )
                        if self._closing:
                            raise SinkClosed(f"gave up a batch of {len(rows)} feedback rows on shutdown") from e
                        await asyncio.sleep(delay)
            except BaseException:
                self._put_back(rows, tickets)  # cancelled or closed mid-write: neither lost nor left unacknowledged
                raise
            skipped = len(rows) - kept
            if skipped:
                log.info("feedback_duplicates_skipped", rows=len(rows), skipped=skipped)
            self.written += written
            self.skipped += skipped
            self._on_durable(tickets)
            return written

    async def _unstored(self, rows: list[FeedbackRow]) -> list[FeedbackRow]:
        """`rows` without those whose feedback id the table holds already (one query over the rows' months)."""
        sql = (
            f"SELECT feedback_id FROM {self._store.store.database}.{FEEDBACK_TABLE}"
            " WHERE toYYYYMM(feedback_time) IN {months:Array(UInt32)} AND feedback_id IN {ids:Array(String)}"
        )
        months = sorted({r.month for r in rows})
        found = await self._store.query(sql, {"months": months, "ids": [r.stored_id for r in rows]})
        stored = {str(r[0]) for r in found.rows}
        return [r for r in rows if r.stored_id not in stored]

    async def _insert(self, rows: list[FeedbackRow]) -> int:
        """Insert `rows` (nothing when empty) with their batch's token; returns the rows written. A batch the driver
        refuses to encode (a property of the data, not a transient fault) is written row by row, so one bad row
        cannot hold back the rest; a refused row is logged and counted in `dropped`."""
        if not rows:
            return 0
        token = batch_token(rows)
        try:
            await self._store.insert_table(FEEDBACK_TABLE, FEEDBACK_COLUMNS, [feedback_values(r) for r in rows], token)
            return len(rows)
        except Exception as e:
            if not refused_by_driver(e):
                raise
            log.error("feedback_batch_refused_by_driver", rows=len(rows), detail=str(e).splitlines()[0][:300])
        written = 0
        for i, row in enumerate(rows):
            try:
                await self._store.insert_table(FEEDBACK_TABLE, FEEDBACK_COLUMNS, [feedback_values(row)], f"{token}-{i}")
                written += 1
            except Exception as e:
                if not refused_by_driver(e):
                    raise
                self.dropped += 1
                log.error(
                    "feedback_row_dropped",
                    feedback_id=row.feedback_id,
                    topic=row.position.topic,
                    partition=row.position.partition,
                    offset=row.position.offset,
                    detail=str(e).splitlines()[0][:300],
                )
        return written
