"""The consuming shell around aiokafka: subscription, rebalance hooks, pause with hysteresis, safe commits."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError
from aiokafka.structs import ConsumerRecord

log = structlog.get_logger("consumers.source")

PartitionsCallback = Callable[[set[TopicPartition]], Awaitable[None]]


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

    async def _call(self, what: str, callback: PartitionsCallback, tps: set[TopicPartition]) -> None:
        # aiokafka logs and swallows listener exceptions; log them ourselves with context.
        try:
            await callback(set(tps))
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
