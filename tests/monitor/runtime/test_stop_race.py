"""The stop raced against the consume loop's steps: a fetch that would wait out a rebalance is abandoned at once, a
commit the stop overtakes is left to finish (within a bound) rather than cut in half."""

from __future__ import annotations

import asyncio

from monitor.runtime.stop_race import StopRace


async def test_a_step_that_never_ends_gives_way_to_the_stop_and_is_cancelled() -> None:
    """A fetch blocked forever (aiokafka's getmany in a rebalance) returns None as soon as the stop is set, and is
    cancelled; a step that ends first returns its result."""
    stop = asyncio.Event()
    race = StopRace(stop)
    assert await race.step(asyncio.sleep(0, result={"batch": 1}), cancel=True) == {"batch": 1}
    blocked = asyncio.get_running_loop().create_future()

    async def fetch() -> dict[str, int]:
        await blocked
        return {}

    stepping = asyncio.create_task(race.step(fetch(), cancel=True))
    await asyncio.sleep(0.01)
    assert not stepping.done()
    stop.set()
    assert await asyncio.wait_for(stepping, 1.0) is None
    await race.settle(1.0)
    assert blocked.cancelled()


async def test_an_overtaken_commit_finishes_at_settle_and_one_past_the_bound_is_cancelled() -> None:
    """A commit under way when the stop comes is not cancelled by the step: `settle` lets it finish; a step still
    running when the bound passes is cancelled there."""
    stop = asyncio.Event()
    race = StopRace(stop)
    finished: list[str] = []
    release = asyncio.Event()

    async def commit() -> bool:
        await release.wait()
        finished.append("commit")
        return True

    stepping = asyncio.create_task(race.step(commit(), cancel=False))
    await asyncio.sleep(0.01)
    stop.set()
    assert await stepping is None and finished == []
    release.set()
    await race.settle(1.0)
    assert finished == ["commit"]

    late = StopRace(stop)
    never = asyncio.Event()
    assert await late.step(never.wait(), cancel=False) is None
    await late.settle(0.05)  # returns: the step past the bound is cancelled, not awaited forever


async def test_an_overtaken_step_that_lost_its_cancel_does_not_hold_the_settle() -> None:
    """A step past the bound that goes on after its first cancel (Python 3.11's `asyncio.wait_for` swallows a cancel
    that comes with a result) is cancelled again: `settle` returns and the step has ended."""
    from tests.monitor.runtime.test_cancel_tasks import GUARD_S, deaf_to

    stop = asyncio.Event()
    race = StopRace(stop)
    stubborn = deaf_to(1)
    stepping = asyncio.create_task(race.step(stubborn, cancel=False))
    await asyncio.sleep(0)
    stop.set()
    await stepping
    assert not stubborn.done()  # overtaken by the stop, left to `settle`
    await asyncio.wait_for(race.settle(0.05), GUARD_S)  # awaited the step forever
    assert stubborn.cancelled()
