"""Cancelling tasks on a stop and waiting for them to end, within a bound, even when a cancel is lost.

On Python 3.11, `asyncio.wait_for` returns the awaited result instead of raising when the cancel arrives in the loop
iteration in which that result came in: a task that loops around such a call goes on as if never cancelled, and a
stop that awaits it waits forever. A task still running after a short while is therefore cancelled again, and one
that still does not end by the bound is left behind (named in the log) rather than holding the stop."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import structlog

from monitor.runtime.partition_tasks import Deadline

log = structlog.get_logger("monitor.runtime.cancel_tasks")

RECANCEL_AFTER_S = 0.05  # a task that honours its cancel ends within a few loop iterations
END_AFTER_CANCEL_S = 1.0  # what a stop gives cancelled tasks to end, where it has no deadline of its own


async def cancel_tasks(tasks: Iterable[asyncio.Task[Any]], within_s: float) -> set[asyncio.Task[Any]]:
    """Cancel `tasks` and wait at most `within_s` for them to end, cancelling again those that go on; returns the
    tasks still running at the bound. The outcomes of the tasks that ended are theirs to read (`gather`)."""
    deadline = Deadline(within_s)
    pending = {task for task in tasks if not task.done()}
    ignored: set[str] = set()
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=min(RECANCEL_AFTER_S, deadline.remaining()))
        if not pending or deadline.remaining() <= 0:
            break
        ignored |= {task.get_name() for task in pending}
    if ignored:
        log.warning("cancel_ignored", tasks=sorted(ignored), note="cancelled again")
    if pending:
        log.warning("tasks_left_running", tasks=sorted(task.get_name() for task in pending), within_s=within_s)
    return pending
