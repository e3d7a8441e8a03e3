"""Cancelling tasks on a stop: a task that lost its cancel (Python 3.11's `asyncio.wait_for` returns a result that
came in with the cancel) is cancelled again and ends; one that never ends is left behind at the bound, named in the
log, instead of holding the stop forever."""

from __future__ import annotations

import asyncio

from structlog.testing import capture_logs

from monitor.runtime.cancel_tasks import cancel_tasks

GUARD_S = 10.0  # only against hanging the suite: a stop that works returns at once


def deaf_to(cancels: int, release: asyncio.Event | None = None) -> asyncio.Task[None]:
    """A task that goes on after its first `cancels` cancels (as if each came in with a result), or after every one
    until `release` is set."""

    async def work() -> None:
        ignored = 0
        while True:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                ignored += 1
                if ignored > cancels and (release is None or release.is_set()):
                    raise

    return asyncio.create_task(work(), name=f"deaf-to-{cancels}")


async def test_a_task_that_lost_its_cancel_is_cancelled_again_and_ends() -> None:
    """A task that goes on after its first cancel ends by the next one; a task that honours it ends at once; the
    one that went on is named in the log."""
    stubborn, plain = deaf_to(1), deaf_to(0)
    await asyncio.sleep(0)  # both wait
    with capture_logs() as logs:
        left = await asyncio.wait_for(cancel_tasks({stubborn, plain}, within_s=5.0), GUARD_S)
    assert left == set() and stubborn.cancelled() and plain.cancelled()
    assert [(e["event"], e["tasks"]) for e in logs] == [("cancel_ignored", ["deaf-to-1"])]


async def test_a_task_that_never_ends_is_left_behind_at_the_bound() -> None:
    """A task that goes on after every cancel is returned, still running, once the bound has passed, and named."""
    release = asyncio.Event()
    never = deaf_to(1, release)
    await asyncio.sleep(0)
    with capture_logs() as logs:
        left = await asyncio.wait_for(cancel_tasks([never], within_s=0.2), GUARD_S)
    assert left == {never} and not never.done()
    assert [e["event"] for e in logs] == ["cancel_ignored", "tasks_left_running"]
    release.set()
    never.cancel()
    await asyncio.wait({never}, timeout=GUARD_S)
    assert never.cancelled()
