"""Reading a time range of a topic outside any group: where each partition starts and stops (pure, and on tansu)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from aiokafka.structs import OffsetAndTimestamp

from consumers.settings import KafkaSettings
from consumers.time_range import Place, TimeRange, TimeRangeReader, place, start_offset
from monitor.devtools.localbroker import LocalBroker
from tests.harness import produce_values

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_start_offset_reads_tansus_minus_one_timestamp_as_no_record() -> None:
    """Offset 0 with timestamp -1 (tansu's answer past the end) and None (Kafka's) both mean no record."""
    assert start_offset(OffsetAndTimestamp(0, -1)) is None
    assert start_offset(None) is None
    assert start_offset(OffsetAndTimestamp(7, 1_700_000_000_000)) == 7


def test_place_is_half_open() -> None:
    """The start is inside the range, the end is past it, anything older is before it."""
    span = TimeRange(T0, T0 + timedelta(minutes=1))
    assert place(span.since_ms, span) is Place.INSIDE
    assert place(span.until_ms - 1, span) is Place.INSIDE
    assert place(span.until_ms, span) is Place.PAST
    assert place(span.since_ms - 1, span) is Place.BEFORE


def test_a_range_needs_time_zones_and_an_order() -> None:
    """A naive time or an empty range is refused with a reason."""
    with pytest.raises(ValueError, match="time zones"):
        TimeRange(datetime(2026, 1, 1), datetime(2026, 1, 2))
    with pytest.raises(ValueError, match="empty"):
        TimeRange(T0, T0)


async def _read(broker: LocalBroker, topic: str, span: TimeRange) -> tuple[list[bytes], TimeRangeReader]:
    kafka = KafkaSettings(kafka_bootstrap_servers=broker.bootstrap, kafka_topics=(topic,))
    out: list[bytes] = []
    async with TimeRangeReader(kafka, (topic,), span) as reader:
        async for batch in reader.batches(asyncio.Event()):
            out.extend(r.value for r in batch)
    return out, reader


async def test_the_reader_takes_exactly_the_records_of_the_range(broker: LocalBroker, topic: str) -> None:
    """Records before, inside and after the range on three partitions: only those inside are read, every partition
    ends."""
    for minute, tag in ((0, b"before"), (10, b"inside"), (20, b"after")):
        stamp = int((T0 + timedelta(minutes=minute)).timestamp() * 1000)
        await produce_values(
            broker.bootstrap,
            topic,
            [tag + str(i).encode() for i in range(6)],
            key=lambda i: str(i).encode(),
            timestamp_ms=stamp,
        )

    values, reader = await _read(broker, topic, TimeRange(T0 + timedelta(minutes=5), T0 + timedelta(minutes=15)))

    assert sorted(values) == sorted(b"inside" + str(i).encode() for i in range(6))
    assert reader.progress.done == set(reader.consumer.assignment())


async def test_a_range_past_the_end_fetches_nothing(broker: LocalBroker, topic: str) -> None:
    """A range after the newest record fetches no record at all: the partition is not read from its start."""
    await produce_values(broker.bootstrap, topic, [b"x%d" % i for i in range(9)], key=lambda i: str(i).encode())
    now = datetime.now(UTC)

    values, reader = await _read(broker, topic, TimeRange(now + timedelta(minutes=1), now + timedelta(minutes=2)))

    assert values == []
    assert reader.progress.before_start == 0
    assert reader.progress.expected == 0


async def test_an_unknown_topic_is_a_one_line_error(broker: LocalBroker) -> None:
    """Replaying a topic the brokers do not have says which."""
    from schemas.errors import UsageError

    with pytest.raises(UsageError, match="no such topic on the brokers: nowhere"):
        await _read(broker, "nowhere", TimeRange(T0, T0 + timedelta(minutes=1)))
