"""Reading the records of a time range of the topics, outside any consumer group: what a replay reads.

Partitions are assigned explicitly and the consumer has no group, so nothing is ever committed and the live group's
offsets cannot move. Each partition starts at the first offset whose record timestamp is at or after the range's
start (`offsets_for_times`) and stops at the first record at or past its end, or at the end of the partition as it
was when reading got there. Timestamps are the records' own (CreateTime or LogAppendTime, as the topic keeps them).
The start offset is only where reading begins: a broker's time index can be coarser than the records' timestamps
(Kafka's is by batch; tansu's is by append time, so it answers offset 0 for any time before the last append), so a
record older than the start found past it is left out by its own timestamp, and counted.

The decisions are pure functions (`start_offset`, `place`); `TimeRangeReader` is the thin shell around aiokafka."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import ConsumerRecord, OffsetAndTimestamp

from consumers.client_start import start_client
from consumers.clients import client_kwargs
from consumers.settings import KafkaSettings
from schemas.errors import UsageError

log = structlog.get_logger("consumers.time_range")

_POLL_MS = 200
# A partition whose fetches keep coming back empty without a high-watermark is taken as ended after this many
# polls (the watermark arrives with the first fetch response, so this only guards against a broker that never sends it).
_EMPTY_POLLS_WITHOUT_WATERMARK = 25


@dataclass(frozen=True, slots=True)
class TimeRange:
    """A half-open range of record timestamps, [since, until), in UTC."""

    since: datetime
    until: datetime

    def __post_init__(self) -> None:
        if self.since.tzinfo is None or self.until.tzinfo is None:
            raise ValueError("a time range needs time zones (UTC: a trailing Z)")
        if self.since >= self.until:
            raise ValueError(
                f"the range is empty: --since {self.since.isoformat()} is not before --until {self.until.isoformat()}"
            )

    @property
    def since_ms(self) -> int:
        """The start, in epoch milliseconds (Kafka's timestamp unit)."""
        return int(self.since.timestamp() * 1000)

    @property
    def until_ms(self) -> int:
        """The end (excluded), in epoch milliseconds."""
        return int(self.until.timestamp() * 1000)


def start_offset(found: OffsetAndTimestamp | None) -> int | None:
    """The first offset to read from `offsets_for_times`' answer; None: no record at or after the time. Kafka answers
    None there; tansu answers offset 0 with timestamp -1, which would otherwise read the partition from the start."""
    if found is None or found.timestamp < 0:
        return None
    return int(found.offset)


class Place(Enum):
    """Where a record's timestamp falls against the range."""

    BEFORE = "before"  # older than the start, found past the start offset: left out
    INSIDE = "inside"
    PAST = "past"  # at or after the end: the partition is done


def place(timestamp_ms: int, span: TimeRange) -> Place:
    """Where a record with this timestamp falls."""
    if timestamp_ms >= span.until_ms:
        return Place.PAST
    if timestamp_ms < span.since_ms:
        return Place.BEFORE
    return Place.INSIDE


@dataclass(slots=True)
class RangeProgress:
    """How far reading got: records read in range, records left out as older than the start, partitions done, and
    the approximate number of records in range (from the offsets at both ends: producers' batching makes it rough)."""

    expected: int = 0
    read: int = 0
    before_start: int = 0
    partitions: int = 0
    done: set[TopicPartition] = field(default_factory=set)


def make_range_consumer(kafka: KafkaSettings) -> AIOKafkaConsumer:
    """A consumer in no group (`group_id=None`): it can only be assigned partitions and commits nothing."""
    return AIOKafkaConsumer(
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=kafka.max_poll_records,
        **client_kwargs(kafka),
    )


class TimeRangeReader:
    """Yields batches of the records of `topics` in `span`, partition by partition as fetched; use `async with`."""

    def __init__(
        self, kafka: KafkaSettings, topics: Iterable[str], span: TimeRange, consumer: AIOKafkaConsumer | None = None
    ) -> None:
        self.kafka = kafka
        self.topics = tuple(topics)
        self.span = span
        self.consumer = consumer or make_range_consumer(kafka)
        self.progress = RangeProgress()
        self._active: set[TopicPartition] = set()
        self._empty_polls: dict[TopicPartition, int] = {}

    async def __aenter__(self) -> TimeRangeReader:
        """Connect, assign every partition of the topics and seek each to the start of the range."""
        await start_client(self.consumer, self.kafka)
        try:
            await self._seek_to_start()
        except BaseException:
            await self.consumer.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Close the consumer (there is nothing to commit)."""
        await self.consumer.stop()

    async def _partitions(self) -> list[TopicPartition]:
        known = await self.consumer.topics()
        missing = [t for t in self.topics if t not in known]
        if missing:
            raise UsageError(f"no such topic on the brokers: {', '.join(missing)} (MONITOR_KAFKA_TOPICS)")
        return [TopicPartition(t, p) for t in self.topics for p in sorted(self.consumer.partitions_for_topic(t) or ())]

    async def _seek_to_start(self) -> None:
        tps = await self._partitions()
        self.consumer.assign(tps)
        starts = await self.consumer.offsets_for_times({tp: self.span.since_ms for tp in tps})
        ends = await self.consumer.offsets_for_times({tp: self.span.until_ms for tp in tps})
        last = await self.consumer.end_offsets(tps)
        self.progress.partitions = len(tps)
        for tp in tps:
            start = start_offset(starts.get(tp))
            if start is None:
                self.progress.done.add(tp)
                continue
            self.consumer.seek(tp, start)
            self._active.add(tp)
            end = start_offset(ends.get(tp))
            self.progress.expected += max(0, (end if end is not None else int(last.get(tp, start))) - start)
        if self.progress.done:
            self.consumer.pause(*self.progress.done)
        log.info(
            "time_range_start",
            topics=list(self.topics),
            since=self.span.since.isoformat(),
            until=self.span.until.isoformat(),
            partitions=len(tps),
            partitions_with_records=len(self._active),
            expected_records=self.progress.expected,
        )

    def _finish(self, tp: TopicPartition) -> None:
        self._active.discard(tp)
        self.progress.done.add(tp)
        self.consumer.pause(tp)  # whatever was fetched past the end is dropped, and nothing more is fetched

    async def batches(self, stop: asyncio.Event) -> AsyncIterator[list[ConsumerRecord[Any, Any]]]:
        """Batches of records in the range (possibly empty while fetching), until every partition is done or `stop`."""
        while self._active and not stop.is_set():
            fetched = await self.consumer.getmany(
                *self._active, timeout_ms=_POLL_MS, max_records=self.kafka.max_poll_records
            )
            out: list[ConsumerRecord[Any, Any]] = []
            for tp, records in fetched.items():
                if tp not in self._active:
                    continue
                self._empty_polls.pop(tp, None)
                for record in records:
                    where = place(record.timestamp, self.span)
                    if where is Place.PAST:
                        self._finish(tp)
                        break
                    if where is Place.BEFORE:
                        self.progress.before_start += 1
                        continue
                    out.append(record)
            for tp in self._active - set(fetched):
                await self._check_end(tp)
            self.progress.read += len(out)
            yield out

    async def _check_end(self, tp: TopicPartition) -> None:
        """Done when the position reached the high-watermark (the end as of the last fetch response)."""
        high = self.consumer.highwater(tp)
        if high is None:
            self._empty_polls[tp] = self._empty_polls.get(tp, 0) + 1
            if self._empty_polls[tp] >= _EMPTY_POLLS_WITHOUT_WATERMARK:
                log.warning("time_range_no_watermark", topic=tp.topic, partition=tp.partition, note="taken as ended")
                self._finish(tp)
            return
        if await self.consumer.position(tp) >= high:
            self._finish(tp)
