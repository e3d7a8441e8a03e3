"""Per-partition task bookkeeping: every task working on a record belongs to its partition, so revoking a
partition drains exactly its work, under one deadline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

import structlog
from aiokafka import TopicPartition

log = structlog.get_logger("monitor.runtime.partition_tasks")


class Deadline:
    """A point in time that several steps share: each step gets what is left, never more."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.at = clock() + max(0.0, seconds)

    def remaining(self) -> float:
        """Seconds left (0 once passed)."""
        return max(0.0, self.at - self._clock())


class PartitionTasks:
    """Tasks per partition: `spawn` one, `drain` some before a deadline, `forget` a partition."""

    def __init__(self) -> None:
        self._tasks: dict[TopicPartition, set[asyncio.Task[Any]]] = {}

    def spawn(self, tp: TopicPartition, coro: Coroutine[Any, Any, Any], name: str | None = None) -> asyncio.Task[Any]:
        """Run `coro` as a task of partition `tp`; a failure is logged (with the task's name)."""
        task = asyncio.create_task(coro, name=name)
        bucket = self._tasks.setdefault(tp, set())
        bucket.add(task)
        task.add_done_callback(bucket.discard)
        task.add_done_callback(_log_task_failure)
        return task

    def partitions(self) -> set[TopicPartition]:
        """Partitions with bookkeeping (some may have no task running)."""
        return set(self._tasks)

    def of(self, tps: Iterable[TopicPartition] | None = None) -> set[asyncio.Task[Any]]:
        """The unfinished tasks of `tps` (default: every partition)."""
        chosen = self._tasks.values() if tps is None else (self._tasks.get(tp, set()) for tp in tps)
        return set().union(*chosen)

    async def drain(
        self,
        tps: Iterable[TopicPartition] | None,
        deadline: Deadline,
        *,
        stop_now: Callable[[asyncio.Task[Any]], bool] = lambda _: False,
    ) -> int:
        """Cancel at once the tasks of `tps` for which `stop_now` holds, let the others finish until the deadline,
        then cancel the rest (the offsets of cancelled work stay uncommitted); returns how many were abandoned."""
        tasks = self.of(tps)
        stopped = {t for t in tasks if stop_now(t)}
        for task in stopped:
            task.cancel()
        if stopped:
            await asyncio.gather(*stopped, return_exceptions=True)
            log.info("stopped_before_judging", events=len(stopped), note="not started: redelivered to the next owner")
        tasks -= stopped
        if not tasks:
            return len(stopped)
        _, pending = await asyncio.wait(tasks, timeout=deadline.remaining())
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
            log.warning("abandoned_in_flight", events=len(pending))
        return len(stopped) + len(pending)

    def forget(self, tps: Iterable[TopicPartition]) -> None:
        """Drop the bookkeeping of partitions that are no longer ours."""
        for tp in tps:
            self._tasks.pop(tp, None)


def _log_task_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("task_failed", task=task.get_name(), error=repr(task.exception()))
