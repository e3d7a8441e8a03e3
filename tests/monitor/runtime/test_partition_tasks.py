"""Per-partition task bookkeeping: drain under a shared deadline, cancel what is left, forget revoked partitions."""

from __future__ import annotations

import asyncio

from aiokafka import TopicPartition

from monitor.runtime.partition_tasks import Deadline, PartitionTasks

P0, P1 = TopicPartition("t", 0), TopicPartition("t", 1)


async def test_drain_waits_for_quick_tasks_and_cancels_the_rest_at_the_deadline() -> None:
    """Draining a partition lets its quick tasks finish, cancels its slow ones at the deadline and leaves others
    alone."""
    tasks = PartitionTasks()
    quick = tasks.spawn(P0, asyncio.sleep(0.01))
    slow = tasks.spawn(P0, asyncio.sleep(3600))
    other = tasks.spawn(P1, asyncio.sleep(3600))
    abandoned = await tasks.drain({P0}, Deadline(0.2))
    assert abandoned == 1 and quick.done() and not quick.cancelled() and slow.cancelled()
    assert not other.done() and tasks.of({P0}) == set() and tasks.of() == {other}
    other.cancel()


async def test_a_passed_deadline_leaves_no_time_for_later_steps() -> None:
    """A deadline shared by several steps gives each only what is left, and nothing once it has passed."""
    clock = iter([100.0, 100.5, 102.0]).__next__
    deadline = Deadline(1.0, clock=clock)
    assert deadline.remaining() == 0.5
    assert deadline.remaining() == 0.0


async def test_forget_drops_a_partition_and_finished_tasks_leave_by_themselves() -> None:
    """A finished task leaves its partition's set; forgetting a partition drops its bookkeeping."""
    tasks = PartitionTasks()
    done = tasks.spawn(P0, asyncio.sleep(0))
    await done
    await asyncio.sleep(0)
    assert tasks.of({P0}) == set() and tasks.partitions() == {P0}
    tasks.forget({P0})
    assert tasks.partitions() == set()
