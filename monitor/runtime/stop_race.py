"""The stop signal raced against each step of the consume loop, so that a stop begins the drain at once whatever the
loop awaits: aiokafka's fetch waits out a rebalance however long the group takes, and a commit the broker's answer."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

import structlog

from monitor.runtime.cancel_tasks import END_AFTER_CANCEL_S, cancel_tasks

log = structlog.get_logger("monitor.runtime.stop_race")

T = TypeVar("T")


class StopRace:
    """`step(work)` awaits `work` unless the stop comes first; `settle(within_s)` ends the work the stop overtook."""

    def __init__(self, stop: asyncio.Event) -> None:
        self.stop = stop
        self._stopped = asyncio.create_task(stop.wait(), name="stop-signal")
        self._overtaken: set[asyncio.Task[Any]] = set()

    def is_set(self) -> bool:
        """Whether the stop has come."""
        return self.stop.is_set()

    async def step(self, work: Awaitable[T], *, cancel: bool) -> T | None:
        """`work`'s result, or None when the stop comes first. Overtaken work is cancelled at once when `cancel`
        (what is safe to abandon: a fetch), else left running until `settle` (a commit: the traffic counts it writes
        must not be cut in half)."""
        task: asyncio.Task[T] = asyncio.ensure_future(work)
        try:
            await asyncio.wait({task, self._stopped}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if task.done():
            return task.result()
        if cancel:
            task.cancel()
        self._overtaken.add(task)
        return None

    async def settle(self, within_s: float) -> None:
        """Let the overtaken work finish for at most `within_s`, then cancel what is left (waiting at most
        `END_AFTER_CANCEL_S` more for it to end); its errors are logged (the drain that follows does the same work
        again, within its own deadline)."""
        self._stopped.cancel()
        tasks, self._overtaken = self._overtaken, set()
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=within_s)
        left = await cancel_tasks(pending, END_AFTER_CANCEL_S)  # not awaited forever: a cancel can be lost
        ended = [task for task in tasks if task not in left]
        for task, outcome in zip(ended, await asyncio.gather(*ended, return_exceptions=True), strict=True):
            if isinstance(outcome, Exception):
                log.warning("overtaken_step_failed", step=task.get_name(), error=type(outcome).__name__)
        if pending:
            log.warning("overtaken_step_cut_short", steps=len(pending))
