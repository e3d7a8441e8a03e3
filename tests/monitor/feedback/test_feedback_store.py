"""Feedback rows on chDB (migrations 046-048) through `FeedbackSink`: the per-minute rollup by segment, the thumbs and
ratings histogram, a redelivered event stored and counted once, retries with the same token, acknowledgement only
after the insert returned."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from monitor.backoff import Backoff
from monitor.feedback.rows import FEEDBACK_COLUMNS, FeedbackRow, feedback_values
from monitor.feedback.sink import FeedbackSink, batch_token
from monitor.store.async_store import AsyncStore
from schemas.errors import SinkClosed
from schemas.events import KafkaPosition
from schemas.feedback import AnswerRef, FeedbackEvent, Segment, SegmentSource

FAST = Backoff(base_s=0.01, max_s=10.0)
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SHOP = Segment("shop", "m1", "v1")
DOCS = Segment("docs", "m2", "v2")


def thumbs(feedback_id: str, up: bool, at: datetime = T0, comment: str = "") -> FeedbackEvent:
    """A thumbs event on answer `a-<feedback_id>` at `at`."""
    return FeedbackEvent(
        feedback_id, AnswerRef(event_id=f"a-{feedback_id}"), at, "thumbs", 1.0 if up else 0.0, 1, not up, "json",
        comment=comment,
    )  # fmt: skip


def rating(feedback_id: str, value: float, scale: int = 5, at: datetime = T0) -> FeedbackEvent:
    """A rating event of `value` on 1..`scale`; negative at or below a quarter of the scale."""
    negative = (value - 1) / (scale - 1) <= 0.25
    return FeedbackEvent(
        feedback_id, AnswerRef(event_id=f"a-{feedback_id}"), at, "rating", value, scale, negative, "json"
    )


def row_of(
    event: FeedbackEvent,
    segment: Segment | None = SHOP,
    source: SegmentSource = "feedback",
    offset: int = 0,
    received_ms: int = 0,
) -> FeedbackRow:
    """The row of `event` read at offset `offset` of fb/0, received `received_ms` after its time."""
    received = event.feedback_time + timedelta(seconds=1, milliseconds=received_ms)
    return FeedbackRow(event, segment, source, KafkaPosition(topic="fb", partition=0, offset=offset), received)


class FaultyStore(AsyncStore):
    """The real store, with injected feedback insert failures (before the write, or after it: the ack is lost), the
    tokens it was sent, and an optional gate each insert waits on."""

    def __init__(self, inner: AsyncStore, fail_before: int = 0, fail_after: int = 0) -> None:
        """Wrap `inner`'s store, failing `fail_before` inserts before the write and `fail_after` after it."""
        super().__init__(inner.store)
        self.fail_before, self.fail_after = fail_before, fail_after
        self.tokens: list[str | None] = []
        self.inserting = asyncio.Event()
        self.gate: asyncio.Event | None = None

    async def insert_table(
        self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], dedup_token: str | None = None
    ) -> None:
        """Record the token, wait on the gate if any, then fail before or after the real insert while failures
        remain."""
        self.tokens.append(dedup_token)
        self.inserting.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_before > 0:
            self.fail_before -= 1
            raise ConnectionError("store down")
        await super().insert_table(table, columns, rows, dedup_token)
        if self.fail_after > 0:
            self.fail_after -= 1
            raise TimeoutError("acknowledgement lost")


def sink_of(store: AsyncStore, acked: list[int], **kw: Any) -> FeedbackSink[int]:
    """A sink acknowledging into `acked`, with fast retries."""
    return FeedbackSink(store, acked.extend, backoff=FAST, **{"max_seconds": 60.0, **kw})


async def rollup(store: AsyncStore, *columns: str) -> list[tuple[Any, ...]]:
    """The rollup's `columns` summed per (minute, app, model, prompt_version), in that order."""
    sums = ", ".join(f"sum({c})" for c in columns)
    result = await store.query(
        f"SELECT minute, app, model, prompt_version, {sums} FROM {store.store.database}.feedback_rollup_1m "
        "GROUP BY minute, app, model, prompt_version ORDER BY minute, app"
    )
    return [(r[0].replace(tzinfo=UTC), *r[1:]) for r in result.rows]


async def stored(store: AsyncStore, final: bool = False) -> list[tuple[Any, ...]]:
    """(feedback_id, comment, version) of the feedback rows (every physical row unless `final`), by id."""
    result = await store.query(
        f"SELECT feedback_id, comment, version FROM {store.store.database}.feedback {'FINAL' if final else ''} "
        "ORDER BY feedback_id, version"
    )
    return result.rows


async def test_the_rollup_counts_per_minute_and_segment(async_store: AsyncStore) -> None:
    """Per minute of feedback_time and segment: every event, the negative ones, thumbs and thumbs down, ratings with
    their 0..1 sum and 1..5 histogram (a 10-point rating lands in its nearest bucket)."""
    acked: list[int] = []
    sink = sink_of(async_store, acked)
    later = T0 + timedelta(minutes=1, seconds=30)
    events = [
        (thumbs("f1", up=True), SHOP), (thumbs("f2", up=False), SHOP), (thumbs("f3", up=False), SHOP),
        (rating("f4", 1), SHOP), (rating("f5", 5), SHOP), (rating("f6", 10, scale=10), SHOP),
        (thumbs("f7", up=False, at=T0 + timedelta(seconds=59)), DOCS),
        (rating("f8", 3, at=later), SHOP), (rating("f9", 2, at=later), SHOP),
    ]  # fmt: skip
    for i, (event, segment) in enumerate(events):
        sink.add(row_of(event, segment, offset=i), i)
    assert await sink.flush() == 9
    assert acked == list(range(9))
    got = await rollup(
        async_store, "n_feedback", "n_negative", "n_thumbs", "n_thumbs_down", "n_ratings", "rating_unit_sum",
        "n_rating_1", "n_rating_2", "n_rating_3", "n_rating_4", "n_rating_5", "n_unresolved",
    )  # fmt: skip
    minute2 = T0 + timedelta(minutes=1)
    assert got == [
        (T0, "docs", "m2", "v2", 1, 1, 1, 1, 0, 0.0, 0, 0, 0, 0, 0, 0),
        (T0, "shop", "m1", "v1", 6, 3, 3, 2, 3, 2.0, 1, 0, 0, 0, 2, 0),
        (minute2, "shop", "m1", "v1", 2, 1, 0, 0, 2, 0.75, 0, 1, 1, 0, 0, 0),
    ]


async def test_a_row_holds_the_contract_columns(async_store: AsyncStore) -> None:
    """A stored row reads back as written: answer ids, unknown turn as -1, segment, verdict, bucket, position,
    version = received_at in ms."""
    event = FeedbackEvent(
        "f1", AnswerRef(conversation_id="c1", turn=None, trace_id="t" * 32, span_id="s" * 16), T0, "rating", 4.0, 5,
        False, "otlp", comment="fine", reason="slow", answer_time=T0 - timedelta(minutes=2),
    )  # fmt: skip
    row = replace(row_of(event, offset=7), answer_event_id="a-found", segment_source="scored")
    sink = sink_of(async_store, [])
    sink.add(row, 0)
    await sink.flush()
    result = await async_store.query(
        f"SELECT {', '.join(FEEDBACK_COLUMNS)} FROM {async_store.store.database}.feedback FINAL"
    )
    (got,) = result.rows
    values = dict(zip(FEEDBACK_COLUMNS, got, strict=True))
    assert values["event_id"] == "a-found" and values["turn"] == -1 and values["conversation_id"] == "c1"
    assert (values["app"], values["model"], values["prompt_version"]) == ("shop", "m1", "v1")
    assert (values["segment_source"], values["kind"], values["value"], values["scale"]) == ("scored", "rating", 4, 5)
    assert (values["negative"], values["rating_bucket"], values["comment"], values["reason"]) == (
        False,
        4,
        "fine",
        "slow",
    )
    assert (values["source"], values["kafka_topic"], values["kafka_partition"], values["kafka_offset"]) == (
        "otlp", "fb", 0, 7,
    )  # fmt: skip
    assert values["answer_time"].replace(tzinfo=UTC) == T0 - timedelta(minutes=2)
    assert values["version"] == int((T0 + timedelta(seconds=1)).timestamp() * 1000) == feedback_values(row)[-1]


async def test_a_redelivered_batch_is_stored_and_counted_once(async_store: AsyncStore) -> None:
    """The same feedback read again (a redelivery after a crash: received later, so another version and token) is
    skipped by the writer: one row per id even before merges, counted once by the rollup; its tickets are still
    acknowledged. The batch spans two months (partitions): both are looked in."""
    acked: list[int] = []
    sink = sink_of(async_store, acked)
    events = [thumbs("f1", up=False), thumbs("f2", up=True), rating("f3", 1, at=T0 - timedelta(days=30))]
    for i, event in enumerate(events):
        sink.add(row_of(event, offset=i), i)
    assert await sink.flush() == 3
    for i, event in enumerate(events):
        sink.add(row_of(event, offset=i, received_ms=5000, segment=DOCS), 10 + i)
    assert await sink.flush() == 0
    assert acked == [0, 1, 2, 10, 11, 12]
    assert [r[0] for r in await stored(async_store)] == ["f1", "f2", "f3"]
    assert sum(r[4] for r in await rollup(async_store, "n_feedback")) == 3
    assert [r[1] for r in await rollup(async_store, "n_feedback")] == ["shop", "shop"]  # the first write's segment
    assert (sink.written, sink.skipped) == (3, 3)


async def test_a_batch_partly_stored_writes_only_the_new_rows(async_store: AsyncStore) -> None:
    """A batch mixing redelivered and new feedback inserts the new rows only, and acknowledges every ticket."""
    acked: list[int] = []
    sink = sink_of(async_store, acked)
    sink.add(row_of(thumbs("f1", up=False)), 0)
    await sink.flush()
    sink.add(row_of(thumbs("f1", up=False), received_ms=10), 1)
    sink.add(row_of(thumbs("f2", up=False)), 2)
    assert await sink.flush() == 1
    assert acked == [0, 1, 2]
    assert [r[0] for r in await stored(async_store)] == ["f1", "f2"]
    assert (await rollup(async_store, "n_thumbs_down"))[0][4] == 2


async def test_the_same_feedback_twice_in_one_batch_is_one_row(async_store: AsyncStore) -> None:
    """One feedback id added twice before a flush is written once (the later one), counted once; both tickets are
    acknowledged."""
    acked: list[int] = []
    sink = sink_of(async_store, acked)
    sink.add(row_of(thumbs("f1", up=False, comment="first")), 0)
    sink.add(row_of(thumbs("f1", up=False, comment="again"), received_ms=20), 1)
    assert await sink.flush() == 1
    assert acked == [0, 1]
    rows = await stored(async_store)
    assert [(r[0], r[1]) for r in rows] == [("f1", "again")]
    assert (await rollup(async_store, "n_feedback"))[0][4] == 1


async def test_unresolved_feedback_is_stored_without_a_segment_and_counted(async_store: AsyncStore) -> None:
    """Feedback whose answer's segment was found nowhere is stored under app = model = prompt_version = '' with
    segment_source 'unresolved', and counted in n_unresolved (and in the other counts)."""
    sink = sink_of(async_store, [])
    sink.add(row_of(thumbs("f1", up=False), segment=None, source="unresolved"), 0)
    sink.add(row_of(thumbs("f2", up=True)), 1)
    await sink.flush()
    got = await rollup(async_store, "n_feedback", "n_thumbs_down", "n_unresolved")
    assert got == [(T0, "", "", "", 1, 1, 1), (T0, "shop", "m1", "v1", 1, 0, 0)]
    result = await async_store.query(
        f"SELECT segment_source FROM {async_store.store.database}.feedback FINAL ORDER BY feedback_id"
    )
    assert [r[0] for r in result.rows] == ["unresolved", "feedback"]


def test_a_row_refuses_a_segment_that_disagrees_with_its_source() -> None:
    """A row without a segment must say 'unresolved', and an unresolved row must not carry one."""
    with pytest.raises(ValueError, match="segment_source 'scored' needs a segment"):
        row_of(thumbs("f1", up=True), segment=None, source="scored")
    with pytest.raises(ValueError, match="segment_source 'unresolved' must not have a segment"):
        row_of(thumbs("f1", up=True), segment=SHOP, source="unresolved")


async def test_an_insert_whose_acknowledgement_was_lost_is_found_written_and_not_repeated(
    async_store: AsyncStore,
) -> None:
    """The write happened but its acknowledgement was lost: the retry finds the rows stored and sends nothing, so
    neither the table nor the rollup counts the batch twice; then it is acknowledged once."""
    faulty = FaultyStore(async_store, fail_after=1)
    acked: list[int] = []
    sink = sink_of(faulty, acked)
    rows = [row_of(thumbs(f"f{i}", up=i % 2 == 0), offset=i) for i in range(4)]
    for i, row in enumerate(rows):
        sink.add(row, i)
    assert await sink.flush() == 0  # the first attempt wrote them; the sink could not know
    assert faulty.tokens == [batch_token(rows)]
    assert acked == [0, 1, 2, 3]
    assert len(await stored(async_store)) == 4
    assert (await rollup(async_store, "n_feedback", "n_thumbs_down"))[0][4:] == (4, 2)


async def test_a_batch_sent_twice_with_its_token_is_counted_once_in_table_and_rollup(async_store: AsyncStore) -> None:
    """The retry of a write that lands after all (the first attempt still under way when the sink looked): the same
    rows with the same token are dropped by the server in `feedback` and in `feedback_rollup_1m`, while another batch
    with equal counts (another token) still counts."""
    rows = [row_of(thumbs("f1", up=False)), row_of(rating("f2", 2, at=T0 - timedelta(days=30)))]
    other = [row_of(thumbs("f3", up=False)), row_of(rating("f4", 2, at=T0 - timedelta(days=30)))]
    values = [feedback_values(r) for r in rows]
    for _ in range(2):
        await async_store.insert_table("feedback", FEEDBACK_COLUMNS, values, batch_token(rows))
    await async_store.insert_table(
        "feedback", FEEDBACK_COLUMNS, [feedback_values(r) for r in other], batch_token(other)
    )
    assert [r[0] for r in await stored(async_store)] == ["f1", "f2", "f3", "f4"]
    assert [r[4:] for r in await rollup(async_store, "n_feedback", "n_negative")] == [(2, 2), (2, 2)]


async def test_a_failing_store_is_retried_until_it_takes_the_batch(async_store: AsyncStore) -> None:
    """Two failures before the write: the same batch is tried a third time with the same token, then acknowledged."""
    faulty = FaultyStore(async_store, fail_before=2)
    acked: list[int] = []
    sink = sink_of(faulty, acked)
    sink.add(row_of(thumbs("f1", up=False)), 0)
    assert await sink.flush() == 1
    assert len(faulty.tokens) == 3 and len(set(faulty.tokens)) == 1
    assert acked == [0]


async def test_tickets_are_acknowledged_only_after_the_insert_returned(async_store: AsyncStore) -> None:
    """While the insert is under way nothing is acknowledged; once it returns, every ticket of the batch is."""
    faulty = FaultyStore(async_store)
    faulty.gate = asyncio.Event()
    acked: list[int] = []
    sink = sink_of(faulty, acked)
    sink.add(row_of(thumbs("f1", up=False)), 0)
    sink.add(row_of(thumbs("f2", up=True)), 1)
    flushing = asyncio.create_task(sink.flush())
    await asyncio.wait_for(faulty.inserting.wait(), timeout=10)
    assert acked == []
    faulty.gate.set()
    assert await flushing == 2
    assert acked == [0, 1]


async def test_a_batch_given_up_on_shutdown_is_kept_unacknowledged(async_store: AsyncStore) -> None:
    """Closed while the store fails: the flush raises `SinkClosed`, nothing is acknowledged, and the rows stay
    buffered (a later flush against a working store writes them)."""
    faulty = FaultyStore(async_store, fail_before=1)
    acked: list[int] = []
    sink = sink_of(faulty, acked)
    sink.add(row_of(thumbs("f1", up=False)), 0)
    sink.close()
    with pytest.raises(SinkClosed, match="gave up a batch of 1 feedback rows"):
        await sink.flush()
    assert acked == [] and len(sink) == 1
    assert await sink.flush() == 1
    assert acked == [0]


async def test_the_sink_flushes_on_its_size_and_time_bounds(async_store: AsyncStore) -> None:
    """A flush takes at most max_rows rows; `run` writes a partial batch once max_seconds have passed."""
    acked: list[int] = []
    sink = sink_of(async_store, acked, max_rows=2)
    for i in range(3):
        sink.add(row_of(thumbs(f"f{i}", up=True), offset=i), i)
    assert await sink.flush() == 2
    assert acked == [0, 1]
    durable = asyncio.Event()

    def on_durable(tickets: list[int]) -> None:
        acked.extend(tickets)
        durable.set()

    timed = FeedbackSink[int](async_store, on_durable, max_rows=100, max_seconds=0.05, backoff=FAST)
    timed.add(row_of(thumbs("f9", up=True)), 9)
    runner = asyncio.create_task(timed.run())
    try:
        await asyncio.wait_for(durable.wait(), timeout=10)
    finally:
        runner.cancel()
    await sink.flush_all()
    assert sorted(acked) == [0, 1, 2, 9]
