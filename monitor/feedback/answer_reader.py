"""Reading one answer's record back from Kafka, for feedback on an answer that sampling skipped: the topic is the
buffer, so no unsampled event is kept in memory.

Where to look: the partition and offset the feedback carries, when it does; else the partition Kafka's default
partitioner gives the key `conversation_id` (murmur2, as the Java clients and aiokafka's `DefaultPartitioner` place
keyed records). That assumes producers key conversation events by `conversation_id`; librdkafka-based producers
(confluent-kafka) do the same only with `partitioner=murmur2_random` (their default, `consistent_random`, hashes
with CRC32), and unkeyed producers spread records anywhere, so when the key's partition does not hold the answer the
other partitions are read too, within the same record budget (and `answer_off_key_partition` is logged). Without a
conversation id, every partition of the topics is read.

When: from `offsets_for_times` a few seconds before the answer's time when the feedback gives it, reading forward
until a minute past the later of the answer's and the feedback's times (then the rest of the minute before it); else
around the feedback's time, widening to older windows newest first (the last minute, then back to 2, 4, 8, ...
minutes, up to MONITOR_FEEDBACK_LOOKBACK_S), each read forward until it reaches the window's end or what a newer
window already read, so the common case (an answer minutes old) reads little. Every find stops at
`read_max_records`.

What: each record is decoded with the injected decoder (the pipeline's, by topic format); the event whose
`event_id` is the reference's, or whose conversation and turn are, or whose `otel.trace_id`/`otel.span_id` metadata
are, is the answer. A record that does not decode is skipped and counted.

Aged out: the answer was not found and the partition no longer holds all the search asked for: records were
deleted from its start and the oldest one kept is newer than a window's start, or the carried offset is gone
(deleted, or compacted away). A failure of the brokers is `NotFound` saying so, never raised.

One consumer in no group (assigned partitions, nothing committed) serves every find; finds take turns on it under a
lock. A consumer per find would cost a bootstrap and a metadata round-trip each (and a connection per broker), more
than the short read itself; finds are rare (feedback events whose answer the store does not have), so taking turns
costs little."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord

from consumers.client_start import start_client
from consumers.clients import client_kwargs
from consumers.decode import DecodedEvent
from consumers.settings import KafkaSettings
from consumers.time_range import start_offset
from monitor.feedback.answer_search import Window, is_answer, key_partition, search_windows, window_aged_out
from schemas.errors import DecodeError
from schemas.events import KafkaPosition
from schemas.feedback import AnswerRef

log = structlog.get_logger("monitor.feedback.answer_reader")

Decode = Callable[[TopicPartition, ConsumerRecord[Any, Any]], list[DecodedEvent]]

_POLL_MS = 200
# A broker answers a connection's requests in order, so an offsets request waits behind a fetch long-polling at the
# end of a partition: keep that poll short (aiokafka's default is 500 ms), and pause a partition once it is read.
_FETCH_MAX_WAIT_MS = 50
_EMPTY_POLLS = 25  # a partition whose fetches keep coming back empty with no watermark is taken as ended


@dataclass(frozen=True, slots=True)
class Found:
    """The answer's event and where its record is."""

    event: DecodedEvent
    position: KafkaPosition
    records_read: int = 0


@dataclass(frozen=True, slots=True)
class AgedOut:
    """The answer's record is gone from `topic`/`partition`: deleted by retention or compacted away. `earliest` is
    the time of the oldest record the partition still holds (None if unknown or empty)."""

    topic: str
    partition: int
    earliest: datetime | None


@dataclass(frozen=True, slots=True)
class NotFound:
    """The records read did not hold the answer (it may not be in Kafka yet); `why` says what was read, in words."""

    records_read: int
    why: str
    undecodable: int = 0


ReadOutcome = Found | AgedOut | NotFound


@dataclass(slots=True)
class _Tally:
    """What one find read, against its budget, and the partitions found to have lost records it asked for."""

    budget: int
    read: int = 0
    undecodable: int = 0
    aged: list[TopicPartition] = field(default_factory=list)
    capped: bool = False

    @property
    def left(self) -> int:
        return self.budget - self.read


class AnswerReader:
    """Finds one answer's record in the topics; `start()` before the first find, `close()` at the end."""

    def __init__(
        self,
        kafka: KafkaSettings,
        topics: Sequence[str],
        decode: Decode,
        *,
        read_max_records: int,
        lookback_s: float,
    ) -> None:
        self.kafka = kafka
        self.topics = tuple(topics)
        self.decode = decode
        self.read_max_records = read_max_records
        self.lookback_s = lookback_s
        # No group: partitions are assigned, nothing is committed, the live group's offsets never move. Isolation is
        # aiokafka's default, as for the service's consumer (consumers.clients.make_consumer sets none).
        self.consumer = AIOKafkaConsumer(
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_records=kafka.max_poll_records,
            fetch_max_wait_ms=_FETCH_MAX_WAIT_MS,
            **client_kwargs(kafka),
        )
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        """Connect (within the connect timeout; `KafkaUnavailable` in one line if the brokers cannot be reached)."""
        await start_client(self.consumer, self.kafka)
        known = await self.consumer.topics()
        missing = [t for t in self.topics if t not in known]
        if missing:
            log.warning("answer_topics_missing", topics=missing, note="answers on them cannot be read back yet")

    async def close(self) -> None:
        """Disconnect."""
        await self.consumer.stop()

    async def find(self, ref: AnswerRef, feedback_time: datetime, answer_time: datetime | None) -> ReadOutcome:
        """The answer `ref` names, read back from Kafka around its time; finds take turns on the one consumer. A
        failure of the brokers is `NotFound` saying so (the caller looks again later, as for an answer not written
        yet)."""
        async with self._lock:
            tally = _Tally(self.read_max_records)
            try:
                outcome = await self._find(ref, feedback_time, answer_time, tally)
            except KafkaError as e:
                log.warning(
                    "answer_read_failed", answer=ref.describe(), error=type(e).__name__, records_read=tally.read
                )
                outcome = NotFound(tally.read, f"reading Kafka failed: {type(e).__name__}", tally.undecodable)
        log.info(
            "answer_read",
            answer=ref.describe(),
            outcome=type(outcome).__name__,
            records_read=tally.read,
            undecodable=tally.undecodable,
            capped=tally.capped,
            **(_where(outcome.position) if isinstance(outcome, Found) else {}),
            **({"why": outcome.why} if isinstance(outcome, NotFound) else {}),
            **({"topic": outcome.topic, "partition": outcome.partition} if isinstance(outcome, AgedOut) else {}),
        )
        return outcome

    async def _find(
        self, ref: AnswerRef, feedback_time: datetime, answer_time: datetime | None, tally: _Tally
    ) -> ReadOutcome:
        carried = await self._carried(ref)
        if carried is not None and ref.offset is not None:
            outcome = await self._read_at(carried[0], ref.offset, ref, tally)
            if outcome is not None:
                return outcome
        windows = search_windows(feedback_time, answer_time, self.lookback_s)
        first, rest = await self._partitions(ref, carried)
        for fallback, partitions in enumerate((first, rest)):
            if not partitions:
                continue
            found = await self._search(partitions, windows, ref, tally)
            if found is not None:
                if fallback:
                    log.info("answer_off_key_partition", answer=ref.describe(), **_where(found.position),
                             note="its producer does not key records by conversation_id with murmur2")  # fmt: skip
                return found
        if tally.aged:
            return await self._aged_out(tally.aged[0])
        span = f"{windows[-1].since.isoformat()} to {windows[0].until.isoformat()}"
        why = f"not in {len(first) + len(rest)} partition(s) from {span}"
        if tally.capped:
            why = f"not in the first {tally.read} records (MONITOR_FEEDBACK_READ_MAX_RECORDS) from {span}"
        if tally.undecodable:
            why += f"; {tally.undecodable} record(s) did not decode"
        return NotFound(tally.read, why, tally.undecodable)

    async def _partition_count(self, topic: str) -> int:
        """The topic's partitions (0 if the brokers do not know it), from metadata refreshed when unknown."""
        found = self.consumer.partitions_for_topic(topic)
        if found is None:
            await self.consumer.topics()
            found = self.consumer.partitions_for_topic(topic)
        return len(found) if found else 0

    async def _carried(self, ref: AnswerRef) -> list[TopicPartition] | None:
        """The partitions the feedback names (its topic's, or that partition of each topic), or None if it names
        none, or none that exists among the topics read."""
        if ref.partition is None:
            return None
        if ref.topic and ref.topic not in self.topics:
            log.warning("answer_topic_not_read", topic=ref.topic, partition=ref.partition, answer=ref.describe())
            return None
        named = [ref.topic] if ref.topic else list(self.topics)
        out = [TopicPartition(t, ref.partition) for t in named if 0 <= ref.partition < await self._partition_count(t)]
        if not out:
            log.warning("answer_partition_unknown", topic=ref.topic, partition=ref.partition, answer=ref.describe())
        return out or None

    async def _partitions(
        self, ref: AnswerRef, carried: list[TopicPartition] | None
    ) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """The partitions to read first, and those read if the first do not hold the answer."""
        if carried is not None:
            return carried, []
        counts = {
            t: await self._partition_count(t) for t in ((ref.topic,) if ref.topic in self.topics else self.topics)
        }
        every = [TopicPartition(t, p) for t, n in counts.items() for p in range(n)]
        if not ref.conversation_id:
            return every, []
        keyed = [TopicPartition(t, key_partition(ref.conversation_id, n)) for t, n in counts.items() if n > 0]
        return keyed, [tp for tp in every if tp not in keyed]

    async def _read_at(self, tp: TopicPartition, offset: int, ref: AnswerRef, tally: _Tally) -> ReadOutcome | None:
        """The record at the carried offset: the answer, `AgedOut` when it was deleted, or None (look by time) when
        it does not hold the answer, was compacted away (remembered as aged) or is not written yet."""
        log_start = (await self.consumer.beginning_offsets([tp]))[tp]
        if offset < log_start:
            return await self._aged_out(tp)
        self.consumer.assign([tp])
        self.consumer.seek(tp, offset)
        async with self._reading(tp), contextlib.aclosing(self._records(tp, tally, limit=1)) as records:
            async for record in records:
                if record.offset > offset:  # the offset is gone while later ones remain: compacted away
                    tally.aged.append(tp)
                    log.info("answer_offset_gone", topic=tp.topic, partition=tp.partition, offset=offset,
                             next_offset=record.offset)  # fmt: skip
                    return None
                found = self._match(tp, record, ref, tally)
                if found is not None:
                    return found
        log.info("answer_not_at_offset", topic=tp.topic, partition=tp.partition, offset=offset, answer=ref.describe())
        return None

    async def _search(
        self, partitions: list[TopicPartition], windows: Sequence[Window], ref: AnswerRef, tally: _Tally
    ) -> Found | None:
        """Read `partitions` window by window (newest first) until the answer is found or the budget is spent."""
        # Every offset asked before any read: then no fetch is in flight for them to wait behind.
        log_starts: dict[TopicPartition, int] = await self.consumer.beginning_offsets(partitions)
        trimmed = [tp for tp in partitions if log_starts[tp] > 0]  # records were deleted from these
        log_ends: dict[TopicPartition, int] = await self.consumer.end_offsets(trimmed) if trimmed else {}
        starts = [await self.consumer.offsets_for_times({tp: w.since_ms for tp in partitions}) for w in windows]
        read_from: dict[TopicPartition, int] = {}  # per partition, where a newer window's read started
        for window, asked in zip(windows, starts, strict=True):
            for tp in partitions:
                if tally.left <= 0:
                    tally.capped = True
                    return None
                start, newer = start_offset(asked.get(tp)), read_from.get(tp)
                if start is None or (newer is not None and start >= newer):
                    continue  # no record that late, or all read already by a newer window
                found = await self._read_window(tp, start, newer, window, ref, tally)
                read_from[tp] = start
                if found is not None:
                    return found
            for tp in partitions:
                lost = window_aged_out(log_starts[tp], log_ends.get(tp), asked.get(tp), window.since_ms)
                if lost and tp not in tally.aged:
                    tally.aged.append(tp)
        return None

    async def _read_window(
        self, tp: TopicPartition, start: int, stop_at: int | None, window: Window, ref: AnswerRef, tally: _Tally
    ) -> Found | None:
        """Read `tp` from `start` until a record at or past the window's end, `stop_at` (read already), or the end
        of the partition."""
        self.consumer.assign([tp])
        self.consumer.seek(tp, start)
        first = tally.read
        async with self._reading(tp), contextlib.aclosing(self._records(tp, tally)) as records:
            async for record in records:
                if stop_at is not None and record.offset >= stop_at:
                    break
                found = self._match(tp, record, ref, tally)
                if found is not None:
                    return found
                if record.timestamp >= window.until_ms:
                    break
        log.debug(
            "answer_window_read", topic=tp.topic, partition=tp.partition, from_offset=start,
            since=window.since.isoformat(), until=window.until.isoformat(), records_read=tally.read - first,
        )  # fmt: skip
        return None

    @contextlib.asynccontextmanager
    async def _reading(self, tp: TopicPartition) -> AsyncGenerator[None, None]:
        """While `tp` is read; paused afterwards, so no fetch of it is in flight when offsets are asked next."""
        try:
            yield
        finally:
            self.consumer.pause(tp)

    async def _records(
        self, tp: TopicPartition, tally: _Tally, limit: int | None = None
    ) -> AsyncGenerator[ConsumerRecord[Any, Any], None]:
        """The records of `tp` from its position, each counted, until the budget or `limit` is spent or the end
        of the partition (its high-watermark) is reached."""
        empty, taken = 0, 0
        while True:
            if tally.left <= 0:
                tally.capped = True
                return
            left = tally.left if limit is None else min(tally.left, limit - taken)
            if left <= 0:
                return
            batch = await self.consumer.getmany(
                tp, timeout_ms=_POLL_MS, max_records=min(left, self.kafka.max_poll_records)
            )
            records = batch.get(tp, [])
            if not records:
                high = self.consumer.highwater(tp)
                if high is not None and await self.consumer.position(tp) >= high:
                    return
                empty += 1
                if high is None and empty >= _EMPTY_POLLS:
                    log.warning("answer_read_no_watermark", topic=tp.topic, partition=tp.partition)
                    return
                continue
            empty = 0
            for record in records:
                tally.read += 1
                taken += 1
                yield record
            high = self.consumer.highwater(tp)
            if high is not None and records[-1].offset + 1 >= high:
                return  # the end as of this fetch: no need to wait for an empty one to say so

    def _match(
        self, tp: TopicPartition, record: ConsumerRecord[Any, Any], ref: AnswerRef, tally: _Tally
    ) -> Found | None:
        """The answer if `record` holds it; a record that does not decode is counted and skipped."""
        try:
            events = self.decode(tp, record)
        except DecodeError as e:
            tally.undecodable += 1
            log.debug("answer_read_undecodable", topic=tp.topic, partition=tp.partition, offset=record.offset,
                      reason=e.reason)  # fmt: skip
            return None
        for event in events:
            if is_answer(event, ref):
                position = KafkaPosition(topic=tp.topic, partition=tp.partition, offset=record.offset)
                return Found(event, position, tally.read)
        return None

    async def _aged_out(self, tp: TopicPartition) -> AgedOut:
        """`AgedOut` for `tp`, with the time of the oldest record it still holds."""
        oldest = (await self.consumer.offsets_for_times({tp: 0})).get(tp)
        if oldest is None or start_offset(oldest) is None:
            return AgedOut(tp.topic, tp.partition, None)
        return AgedOut(tp.topic, tp.partition, datetime.fromtimestamp(oldest.timestamp / 1000, UTC))


def _where(position: KafkaPosition) -> dict[str, object]:
    return {"topic": position.topic, "partition": position.partition, "offset": position.offset}
