"""What every sink of the monitor shares: a buffer of rows with their tickets, flushed on a size bound (`max_rows`), a
time bound (`max_seconds`) or a request, by one flush at a time. A subclass writes a batch (`flush`), taking it with
`_take` and giving it back with `_put_back` when the write is abandoned (cancelled, or closed), so that a row is
never lost and a ticket never left unacknowledged (an unacknowledged ticket would hold its partition's commits back
forever)."""

from __future__ import annotations

import asyncio
import time
from typing import Generic, TypeVar

from monitor.backoff import Backoff

R = TypeVar("R")
T = TypeVar("T")

# Waits between attempts at one batch: 0.2 s doubling to 10 s, with the monitor's one jitter.
INSERT_BACKOFF = Backoff(base_s=0.2, max_s=10.0)


class BatchingSink(Generic[R, T]):
    """Two verbs: `add` a row with its ticket, `flush` the batch (the subclass's). `run()` flushes on the bounds."""

    def __init__(self, *, max_rows: int, max_seconds: float, backoff: Backoff) -> None:
        self.max_rows = max_rows
        self.max_seconds = max_seconds
        self._backoff = backoff
        self._rows: list[R] = []
        self._tickets: list[T] = []
        self._oldest: float | None = None
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._closing = False
        self._flush_requested = False

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, row: R, ticket: T) -> None:
        """Buffer one row; it is acknowledged (its ticket handed on) after its batch is written."""
        if not self._rows:
            self._oldest = time.monotonic()
        self._rows.append(row)
        self._tickets.append(ticket)
        if len(self._rows) >= self.max_rows:
            self._wake.set()

    def request_flush(self) -> None:
        """Flush what is buffered now, without waiting for a bound (e.g. consumption paused: no more rows come)."""
        if self._rows:
            self._flush_requested = True
            self._wake.set()

    def _due(self) -> bool:
        if not self._rows:
            return False
        if self._flush_requested:
            return True
        return len(self._rows) >= self.max_rows or time.monotonic() - (self._oldest or 0) >= self.max_seconds

    def _take(self) -> tuple[list[R], list[T]]:
        """The next batch (at most `max_rows`), out of the buffer; call under `_lock`."""
        self._flush_requested = False
        rows, tickets = self._rows[: self.max_rows], self._tickets[: self.max_rows]
        del self._rows[: self.max_rows], self._tickets[: self.max_rows]
        self._oldest = time.monotonic() if self._rows else None
        return rows, tickets

    def _put_back(self, rows: list[R], tickets: list[T]) -> None:
        """A batch whose write was abandoned, back at the front of the buffer."""
        self._rows[:0], self._tickets[:0] = rows, tickets
        self._oldest = time.monotonic()

    async def flush(self) -> int:
        """Write one batch, retrying until durable; returns the rows written (the subclass's)."""
        raise NotImplementedError

    async def flush_all(self) -> None:
        """Flush until the buffer is empty and no flush is under way (a batch being written by `run` is not yet
        durable)."""
        while self._rows or self._lock.locked():
            await self.flush()

    async def run(self) -> None:
        """Flush whenever a bound is reached; runs until cancelled."""
        while True:
            try:
                # Not `asyncio.wait_for`: on Python 3.11 it swallows a cancel that comes as the wake-up arrives.
                async with asyncio.timeout(self.max_seconds / 4):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            while self._due():
                await self.flush()

    def close(self) -> None:
        """From now on a failing insert is given up instead of retried (used when the grace period ends)."""
        self._closing = True
