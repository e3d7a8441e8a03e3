"""What the app's handlers share: the store on its one thread (reads through a read-only session, the one write
through `LabelWriter`), the review queue, the CSRF signer and the pages' template environment."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from typing import Any, TypeVar

from jinja2 import Environment, PackageLoader, StrictUndefined

from monitor.report.formats import count, num, pct, seconds, segment, signed, when
from monitor.review.label_rows import LabelWriter
from monitor.review.queue import QueueItem, ReviewQueue
from monitor.review.routing import RoutingRules
from monitor.store.connection import ClickHouseStore
from monitor.ui.security import CsrfSigner
from monitor.ui.settings import UiSettings

T = TypeVar("T")


@cache
def environment() -> Environment:
    """The pages' templates (`monitor/ui/templates/`): autoescape on, strict names, the report's filters."""
    env = Environment(
        loader=PackageLoader("monitor.ui", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=when, num=num, pct=pct, thousands=count, signed=signed, seconds=seconds, segment=segment)
    return env


class StoreThread:
    """The store's connections and every call on them, on one dedicated thread (chDB has one engine per process and
    clickhouse-connect's client is not for concurrent use). Opened on first use: reads with `readonly = 1`."""

    def __init__(
        self, reads: ClickHouseStore, writes: ClickHouseStore, rules: RoutingRules, now: Callable[[], datetime]
    ):
        self.reads = reads
        self._writes = writes
        self._rules = rules
        self._now = now
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ui-store")
        self._opened = False
        self._writer: LabelWriter | None = None
        self._queue: ReviewQueue | None = None

    def _open(self) -> ClickHouseStore:
        if not self._opened:
            self.reads.open_for_reads()
            self._opened = True
        return self.reads

    def writer(self) -> LabelWriter:
        """The labels' writer (on the store thread only), connected on first use."""
        if self._writer is None:
            self._open()
            self._writer = LabelWriter(self._writes)
        return self._writer

    def queue(self) -> ReviewQueue:
        """The review queue (on the store thread only)."""
        if self._queue is None:
            self._queue = ReviewQueue(self._open(), self._rules, now=self._now)
        return self._queue

    def run(self, fn: Callable[[ClickHouseStore], T]) -> T:
        """`fn(reads)` on the store thread, waiting for it (for the command's start-up check)."""
        return self._executor.submit(lambda: fn(self._open())).result()

    async def call(self, fn: Callable[[ClickHouseStore], T]) -> T:
        """`fn(reads)` on the store thread, off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, lambda: fn(self._open()))

    async def call_self(self, fn: Callable[[StoreThread], T]) -> T:
        """`fn(self)` on the store thread: for the queue and the writer."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, lambda: fn(self))

    def close(self) -> None:
        """Close both connections and the thread."""

        def closing() -> None:
            self.reads.close()
            self._writes.close()

        self._executor.submit(closing).result()
        self._executor.shutdown(wait=True)


@dataclass
class UiContext:
    """Everything a handler needs."""

    settings: UiSettings
    reviewer_flag: str | None
    signer: CsrfSigner
    store: StoreThread
    store_label: str
    served: dict[tuple[str, str], QueueItem] = field(default_factory=dict)  # (reviewer, event_id): what was served

    def now(self) -> datetime:
        """The wall clock in UTC."""
        return datetime.now(UTC)

    def render(self, template: str, **context: Any) -> str:
        """A page of the UI."""
        return environment().get_template(template).render(context)
