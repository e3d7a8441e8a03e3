"""Where a replay's events come from: the topics' records in a time range, or the text already in the store.

Both yield pages of `Item`s in the order they are read: a decoded event, or a record that is not one (`Malformed`,
with the decoder's reason code: the live consumer dead-lettered it already, so a replay only counts it)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog
from aiokafka.structs import ConsumerRecord

from consumers.decode import decode_event
from consumers.settings import KafkaSettings
from consumers.time_range import RangeProgress, TimeRange, TimeRangeReader
from monitor.store.async_store import AsyncStore
from schemas.errors import DecodeError, StoreError, UsageError
from schemas.events import ConversationEvent, KafkaPosition, Turn

PAGE_ROWS = 1000
log = structlog.get_logger("monitor.replay.sources")


@dataclass(frozen=True, slots=True)
class Malformed:
    """A record of the range that is not a judgeable event."""

    reason: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class StoredRedaction:
    """What redaction had removed from a stored event's text (kept on its new rows: the text is the redacted one)."""

    redactions: dict[str, int]
    redactor: str


Item = ConversationEvent | Malformed


def decode_record(record: ConsumerRecord[Any, Any], kafka: KafkaSettings) -> Item:
    """One record as the live consumer decodes it."""
    try:
        return decode_event(
            record.value,
            position=KafkaPosition(topic=record.topic, partition=record.partition, offset=record.offset),
            record_timestamp_ms=record.timestamp,
            max_bytes=kafka.max_event_bytes,
            max_future_skew_s=kafka.max_future_skew_s,
        )
    except DecodeError as e:
        return Malformed(e.reason, record.partition, record.offset)


class KafkaHistory:
    """The records of the configured topics in a time range, decoded; `progress` says how far reading got."""

    def __init__(self, kafka: KafkaSettings, span: TimeRange) -> None:
        self.kafka = kafka
        self.span = span
        self.progress = RangeProgress()

    async def pages(self, stop: asyncio.Event) -> AsyncIterator[list[Item]]:
        """Pages of decoded records until the range is read or `stop` is set."""
        async with TimeRangeReader(self.kafka, self.kafka.topics, self.span) as reader:
            self.progress = reader.progress
            async for batch in reader.batches(stop):
                if batch:
                    yield [decode_record(r, self.kafka) for r in batch]


# One row per event with stored text: the newest scoring of it by any judge (they all stored the same text). The
# conversation's columns (migration 043) are read where the table has them: the turn, the context and the system
# instructions, as stored (redacted, or full: '' under MONITOR_STORE_TEXT=none, where the question is '' too). The
# filter is a column of the inner query, not a clause of the outer one: whatever it says (`1) OR (1` included), it is
# one boolean expression, so it can never undo the range or the keyset that pages through it.
_PAGE = """
SELECT event_id, conversation_id, event_time, app, model, prompt_version, metadata, question, response,
       kafka_topic, kafka_partition, kafka_offset, redactions, redactor, {conversation}
FROM (
  SELECT *, ({where}) AS replay_filter_keeps FROM {table} FINAL
  WHERE event_time >= {{since:DateTime64(3, 'UTC')}} AND event_time < {{until:DateTime64(3, 'UTC')}} AND question != ''
    AND (event_time, event_id) > ({{after_time:DateTime64(3, 'UTC')}}, {{after_id:String}})
)
WHERE replay_filter_keeps
ORDER BY event_time, event_id, scored_at DESC
LIMIT 1 BY event_id
LIMIT {limit}
"""
_CONVERSATION = "turn, context, system_instructions"
_NO_CONVERSATION = "toUInt32(0), '', ''"  # a table from before migration 043
_HAS_TURN = "SELECT count() FROM system.columns WHERE database = {db:String} AND table = {t:String} AND name = 'turn'"
_COUNT = """
SELECT uniqExact(event_id), uniqExactIf(event_id, question != '')
FROM (
  SELECT *, ({where}) AS replay_filter_keeps FROM {table} FINAL
  WHERE event_time >= {{since:DateTime64(3, 'UTC')}} AND event_time < {{until:DateTime64(3, 'UTC')}}
)
WHERE replay_filter_keeps
"""


@dataclass(frozen=True, slots=True)
class StoredCounts:
    """Events of the range in the store (matching the filter), and how many of them have their text."""

    events: int
    with_text: int


class StoreHistory:
    """The events already stored in a time range (by event time, matching an optional SQL filter), rebuilt from
    their stored text so another judge can score them; `redaction_of` keeps what redaction had removed."""

    def __init__(self, store: AsyncStore, span: TimeRange, where: str | None) -> None:
        self.store = store
        self.span = span
        self.where = where or "1"
        self.redaction_of: dict[str, StoredRedaction] = {}
        self.progress = RangeProgress()

    def _params(self) -> dict[str, Any]:
        return {"since": self.span.since, "until": self.span.until}

    async def counts(self) -> StoredCounts:
        """How many events the range holds, and how many with text. A `--where` the store refuses is a one-line
        UsageError; any other failure of the store a StoreError saying what failed (each keeps its cause)."""
        table = self.store.store.qualified_table
        try:
            row = (await self.store.query(_COUNT.format(table=table, where=self.where), self._params())).rows[0]
        except StoreError as e:
            if self.where != "1" and await self._answers_without_filter(table):
                raise UsageError(f"--where: the store refused the filter: {str(e).splitlines()[0][:300]}") from e
            raise StoreError(f"replay: counting the stored events of the range failed: {e}") from e
        counts = StoredCounts(int(row[0]), int(row[1]))
        self.progress.expected = counts.with_text
        return counts

    async def _answers_without_filter(self, table: str) -> bool:
        """Whether the count succeeds with no filter: then the filter, and only it, made the store refuse it."""
        try:
            await self.store.query(_COUNT.format(table=table, where="1"), self._params())
        except StoreError:
            return False
        return True

    async def pages(self, stop: asyncio.Event) -> AsyncIterator[list[Item]]:
        """Pages of events, oldest first, until the range is read or `stop` is set."""
        after_time: datetime = self.span.since
        after_id = ""
        conversation = _CONVERSATION if await self._has_turns() else _NO_CONVERSATION
        table = self.store.store.qualified_table
        sql = _PAGE.format(table=table, where=self.where, limit=PAGE_ROWS, conversation=conversation)
        while not stop.is_set():
            params = {**self._params(), "after_time": after_time, "after_id": after_id}
            rows = (await self.store.query(sql, params)).rows
            if not rows:
                return
            page: list[Item] = [self._event(row) for row in rows]
            last = (_utc(rows[-1][2]), str(rows[-1][0]))
            if last <= (after_time, after_id):  # the keyset must move, or this never ends
                raise UsageError("--where: the filter made the store page through the range out of order; simplify it")
            after_time, after_id = last
            self.progress.read += len(page)
            yield page
            if len(rows) < PAGE_ROWS:
                return

    async def _has_turns(self) -> bool:
        """Whether the scores table has the conversation's columns (migration 043)."""
        db, table = self.store.store.database, self.store.store.table
        return bool((await self.store.query(_HAS_TURN, {"db": db, "t": table})).rows[0][0])

    def _event(self, row: tuple[Any, ...]) -> ConversationEvent:
        (
            event_id,
            conversation_id,
            event_time,
            app,
            model,
            prompt_version,
            metadata,
            question,
            response,
            topic,
            partition,
            offset,
            red,
            redactor,
            turn,
            context,
            system,
        ) = row
        if red or redactor:
            self.redaction_of[str(event_id)] = StoredRedaction(
                {str(k): int(v) for k, v in dict(red).items()}, str(redactor)
            )
        return ConversationEvent(
            event_id=str(event_id),
            conversation_id=str(conversation_id),
            event_time=_utc(event_time),
            app=str(app),
            model=str(model),
            prompt_version=str(prompt_version),
            metadata={str(k): str(v) for k, v in dict(metadata).items()},
            question=str(question),
            response=str(response),
            shape="flat",
            source=KafkaPosition(topic=str(topic), partition=int(partition), offset=int(offset)),
            context=stored_context(str(context), str(event_id)),
            system=str(system),
            turn=int(turn),
        )


def stored_context(text: str, event_id: str = "") -> tuple[Turn, ...]:
    """The `context` column (a JSON array of {"role", "text"}) as turns. A value that is not one is logged and read
    as none, so one damaged row cannot stop a replay (its pair is still judged, without the earlier turns)."""
    if not text:
        return ()
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if not isinstance(parsed, list) or not all(isinstance(t, dict) and {"role", "text"} <= t.keys() for t in parsed):
        log.warning("stored_context_unreadable", event_id=event_id, note="judged without its earlier turns")
        return ()
    return tuple(Turn(str(t["role"]), str(t["text"])) for t in parsed)


def _utc(value: datetime) -> datetime:
    """A stored DateTime64(3, 'UTC') as an aware datetime (the driver may hand it over naive, in UTC)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value
