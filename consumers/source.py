"""The consuming shell around aiokafka: subscription, rebalance hooks, pause with hysteresis, safe commits."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError
from aiokafka.structs import ConsumerRecord

log = structlog.get_logger("consumers.source")

PartitionsCallback = Callable[[set[TopicPartition]], Awaitable[None]]

_COORDINATION_END_S = 1.0  # a cancelled coordination task ends at its next await; this only guards the stop


class PauseGate:
    """Pause above a high mark, resume at or below a low mark: never toggle per message (a paused partition's
    prefetched records are dropped and fetched again)."""

    def __init__(self, high: int, low: int) -> None:
        if not 0 <= low < high:
            raise ValueError(f"need 0 <= resume mark < pause mark, got {low} and {high}")
        self.high = high
        self.low = low
        self.paused = False

    def update(self, in_flight: int) -> bool | None:
        """True to pause, False to resume, None to leave things as they are."""
        if not self.paused and in_flight >= self.high:
            self.paused = True
            return True
        if self.paused and in_flight <= self.low:
            self.paused = False
            return False
        return None


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, source: KafkaSource) -> None:
        self._source = source

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._source._call("revoked", self._source.on_revoked, revoked)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        if self._source.paused:  # aiokafka drops pause state on every rebalance
            self._source.consumer.pause(*assigned)
        await self._source._call("assigned", self._source.on_assigned, assigned)


def _coordination(consumer: AIOKafkaConsumer) -> asyncio.Task[None] | None:
    """aiokafka's group coordination task (private in aiokafka 0.14, pinned below 0.15): it runs the rebalances,
    with our callbacks inside them, and the joins; None if this aiokafka has none."""
    task = getattr(getattr(consumer, "_coordinator", None), "_coordination_task", None)
    return task if isinstance(task, asyncio.Task) else None


class KafkaSource:
    """Owns one `AIOKafkaConsumer` in a group, with manual commits of explicit offsets only."""

    def __init__(
        self,
        consumer: AIOKafkaConsumer,
        topics: Iterable[str],
        *,
        on_assigned: PartitionsCallback,
        on_revoked: PartitionsCallback,
    ) -> None:
        self.consumer = consumer
        self.topics = list(topics)
        self.on_assigned = on_assigned
        self.on_revoked = on_revoked
        self.paused = False
        self.commit_failures = 0
        self._callback: asyncio.Task[None] | None = None  # the last rebalance callback (revoke or assign)

    async def _call(self, what: str, callback: PartitionsCallback, tps: set[TopicPartition]) -> None:
        # In a task of its own, shielded: a stop ends aiokafka's coordination at once (`stop_rebalancing`) without
        # cutting this work short; the stop then bounds it by its own deadline.
        task = asyncio.create_task(self._run_callback(what, callback, set(tps)), name=f"rebalance-{what}")
        self._callback = task
        await asyncio.shield(task)

    @staticmethod
    async def _run_callback(what: str, callback: PartitionsCallback, tps: set[TopicPartition]) -> None:
        # aiokafka logs and swallows listener exceptions; log them ourselves with context.
        try:
            await callback(tps)
        except Exception:
            log.exception("rebalance_callback_failed", phase=what, partitions=sorted(str(tp) for tp in tps))
            raise

    async def start(self) -> None:
        """Connect and subscribe."""
        await self.consumer.start()
        self.consumer.subscribe(self.topics, listener=_Listener(self))

    async def stop(self) -> None:
        """Leave the group and close. Does not commit: callers commit what is done first."""
        await self.consumer.stop()

    async def stop_rebalancing(self, within_s: float) -> bool:
        """Take no further part in the group's rebalances, for a stop: end aiokafka's coordination at once (no join,
        no callback starts, a join under way is abandoned; heartbeats and commits go on), then let a callback under
        way finish for at most `within_s` before cancelling it. True if none was cut short.

        Without this, a stop that lands in a rebalance waits for the group's join to end, and while the pipeline
        drains it revokes, joins and is assigned partitions again, and closing waits for a join in flight."""
        coordination = _coordination(self.consumer)
        if coordination is not None and not coordination.done():
            coordination.cancel()
            await asyncio.wait({coordination}, timeout=_COORDINATION_END_S)
        callback = self._callback
        if callback is None or callback.done():
            return True
        log.info("waiting_for_rebalance_callback", within_s=round(within_s, 2))
        done, _ = await asyncio.wait({callback}, timeout=within_s)
        if done:
            return True
        callback.cancel()
        await asyncio.gather(callback, return_exceptions=True)
        log.warning("rebalance_callback_cut_short", note="its partitions are finished with the rest by the stop")
        return False

    async def getmany(self, timeout_ms: int, max_records: int) -> dict[TopicPartition, list[ConsumerRecord[Any, Any]]]:
        """Fetch a batch; keep calling it while paused so the member stays in its group."""
        batch: dict[TopicPartition, list[ConsumerRecord[Any, Any]]] = await self.consumer.getmany(
            timeout_ms=timeout_ms, max_records=max_records
        )
        return batch

    def assignment(self) -> set[TopicPartition]:
        """Partitions this member owns right now."""
        return set(self.consumer.assignment())

    def pause(self) -> None:
        """Stop fetching from every assigned partition."""
        self.paused = True
        self.consumer.pause(*self.consumer.assignment())

    def resume(self) -> None:
        """Fetch again from every assigned partition."""
        self.paused = False
        self.consumer.resume(*self.consumer.assignment())

    async def commit(self, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Commit explicit offsets for partitions still owned; returns what was committed ({} on failure)."""
        owned = self.consumer.assignment()
        offsets = {tp: off for tp, off in offsets.items() if tp in owned}
        if not offsets:
            return {}
        try:
            await self.consumer.commit(offsets)
        except (CommitFailedError, IllegalStateError, KafkaError) as e:
            # The group moved under us; the new owner re-reads from the last good commit (at-least-once).
            self.commit_failures += 1
            log.warning("commit_failed", error=type(e).__name__, detail=str(e)[:200])
            return {}
        return offsets

    async def lag(self) -> dict[TopicPartition, int]:
        """Records between the committed position and the fetch high-watermark, per owned partition."""
        out = {}
        for tp in self.consumer.assignment():
            high = self.consumer.highwater(tp)
            if high is None:
                continue
            out[tp] = max(0, high - await self.consumer.position(tp))
        return out
