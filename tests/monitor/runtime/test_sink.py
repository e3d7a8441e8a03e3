"""ClickHouseSink: size/time batching, retries with the same token, acknowledgement only after durability."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from monitor.backoff import Backoff
from monitor.runtime.metrics import Metrics
from monitor.runtime.sink import INSERT_BACKOFF, ClickHouseSink, batch_token
from monitor.store.async_store import AsyncStore
from schemas.errors import SinkClosed, StoreError
from schemas.scored import ScoredRow
from tests.harness import count_rows
from tests.monitor.test_backoff import Recording

# The sink's own cap with a base small enough that retry tests take milliseconds.
FAST = Backoff(base_s=0.01, max_s=10.0)


class FaultyStore(AsyncStore):
    """The real store, with injected insert failures: before the write, or after it (the ack is lost)."""

    def __init__(self, inner: AsyncStore, fail_before: int = 0, fail_after: int = 0) -> None:
        """Wrap `inner`'s store, failing `fail_before` inserts before the write and `fail_after` after it."""
        super().__init__(inner.store)
        self.fail_before = fail_before
        self.fail_after = fail_after
        self.tokens: list[str] = []

    async def insert_rows(self, rows: Sequence[ScoredRow], dedup_token: str) -> None:
        """Record the token, then fail before or after the real insert while failures remain."""
        self.tokens.append(dedup_token)
        if self.fail_before > 0:
            self.fail_before -= 1
            raise ConnectionError("store down")
        await super().insert_rows(rows, dedup_token)
        if self.fail_after > 0:
            self.fail_after -= 1
            raise TimeoutError("acknowledgement lost")


def rows(n: int, prefix: str = "e") -> list[ScoredRow]:
    """`n` ok rows with event ids `prefix`0.., scored now."""
    now = datetime.now(UTC)
    return [
        ScoredRow(
            event_id=f"{prefix}{i}",
            conversation_id="c",
            event_time=now,
            app="a",
            model="",
            prompt_version="",
            judge="lexical",
            judge_model="h",
            judge_id="j",
            status="ok",
            score=1.0,
            scored_at=now,
        )
        for i in range(n)
    ]


async def test_batches_by_size_and_acknowledges_after_write(async_store: AsyncStore) -> None:
    """Rows are written in batches of max_rows, each acknowledged only after it was written."""
    acked: list[int] = []
    sink: ClickHouseSink[int] = ClickHouseSink(
        async_store, lambda t, r: acked.extend(t), Metrics(), max_rows=3, max_seconds=60
    )
    for i, r in enumerate(rows(7)):
        sink.add(r, i)
    assert acked == []
    assert await sink.flush() == 3
    assert acked == [0, 1, 2]
    await sink.flush_all()
    assert acked == list(range(7))
    assert await count_rows(async_store, final=False) == 7


async def test_time_bound_flushes_a_small_batch(async_store: AsyncStore) -> None:
    """A batch smaller than max_rows is written and acknowledged once max_seconds have passed."""
    acked: list[int] = []
    sink: ClickHouseSink[int] = ClickHouseSink(
        async_store, lambda t, r: acked.extend(t), Metrics(), max_rows=1000, max_seconds=0.2
    )
    runner = asyncio.create_task(sink.run())
    try:
        sink.add(rows(1)[0], 1)
        await asyncio.sleep(0.05)
        assert acked == []
        for _ in range(50):
            if acked:
                break
            await asyncio.sleep(0.05)
        assert acked == [1]
    finally:
        runner.cancel()


async def test_store_outage_is_retried_with_the_same_token(async_store: AsyncStore) -> None:
    """Inserts failing before the write are retried with the same token until the batch is written."""
    store = FaultyStore(async_store, fail_before=3)
    acked: list[int] = []
    m = Metrics()
    sink: ClickHouseSink[int] = ClickHouseSink(store, lambda t, r: acked.extend(t), m, max_rows=10, backoff=FAST)
    for i, r in enumerate(rows(4)):
        sink.add(r, i)
    await sink.flush()
    assert acked == [0, 1, 2, 3]
    assert len(store.tokens) == 4 and len(set(store.tokens)) == 1
    assert m.insert_failures._value.get() == 3
    assert await count_rows(async_store, final=False) == 4


async def test_each_failed_insert_waits_the_next_step_of_the_sinks_backoff(async_store: AsyncStore) -> None:
    """Four failed inserts wait the injected Backoff's jittered steps, doubling to its cap; by default 0.2 s to 10 s."""
    rng = Recording()
    store = FaultyStore(async_store, fail_before=4)
    backoff = Backoff(base_s=0.01, max_s=0.04, rng=rng)
    sink: ClickHouseSink[int] = ClickHouseSink(store, lambda t, r: None, Metrics(), backoff=backoff)
    sink.add(rows(1)[0], 0)
    started = time.monotonic()
    assert await sink.flush() == 1
    assert time.monotonic() - started >= sum(rng.waits) - 0.001  # it slept the waits it drew
    assert rng.steps == [0.01, 0.02, 0.04, 0.04]
    assert INSERT_BACKOFF == Backoff(base_s=0.2, max_s=10.0)


async def test_lost_acknowledgement_does_not_duplicate_rows(async_store: AsyncStore) -> None:
    """A write whose acknowledgement was lost is retried with the same token and kept once."""
    store = FaultyStore(async_store, fail_after=2)
    acked: list[int] = []
    sink: ClickHouseSink[int] = ClickHouseSink(
        store,
        lambda t, r: acked.extend(t),
        Metrics(),
        max_rows=10,
        backoff=FAST,
    )
    for i, r in enumerate(rows(5)):
        sink.add(r, i)
    await sink.flush()
    assert acked == [0, 1, 2, 3, 4]
    assert await count_rows(async_store, final=False) == 5  # written three times, kept once (deduplication token)


async def test_cancel_mid_write_puts_the_batch_back(async_store: AsyncStore) -> None:
    """Cancelling a flush mid-retry puts the batch back unacknowledged for a later flush."""
    store = FaultyStore(async_store, fail_before=1000)
    acked: list[int] = []
    slow = Backoff(base_s=0.05, max_s=10.0)
    sink: ClickHouseSink[int] = ClickHouseSink(
        store,
        lambda t, r: acked.extend(t),
        Metrics(),
        max_rows=10,
        backoff=slow,
    )
    for i, r in enumerate(rows(3)):
        sink.add(r, i)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(sink.flush(), timeout=0.2)
    assert len(sink) == 3 and acked == []
    store.fail_before = 0
    await sink.flush_all()
    assert acked == [0, 1, 2]


async def test_closed_sink_gives_up_and_keeps_rows_unacknowledged(async_store: AsyncStore) -> None:
    """A closed sink stops retrying with SinkClosed and keeps its rows unacknowledged."""
    store = FaultyStore(async_store, fail_before=1000)
    acked: list[int] = []
    sink: ClickHouseSink[int] = ClickHouseSink(store, lambda t, r: acked.extend(t), Metrics(), backoff=FAST)
    sink.add(rows(1)[0], 1)
    sink.close()
    with pytest.raises(SinkClosed):
        await sink.flush()
    assert acked == [] and len(sink) == 1


def test_token_depends_on_content() -> None:
    """The batch token is the same for equal rows and differs for different rows."""
    a, b = rows(2), rows(2, prefix="x")
    assert batch_token(a) == batch_token(list(a))
    assert batch_token(a) != batch_token(b)


class RefusingStore(AsyncStore):
    """The real store, but the driver refuses rows whose event id starts with `bad` (as it does a value out of
    a column's range), and, for `worse`, their error-row replacement too."""

    def __init__(self, inner: AsyncStore) -> None:
        """Wrap `inner`'s store."""
        super().__init__(inner.store)

    async def insert_rows(self, rows: Sequence[ScoredRow], dedup_token: str) -> None:
        """Raise what the store raises when the driver refuses a batch holding a refused row (its DataError, wrapped
        in `StoreError` as `ClickHouseStore.insert_rows` does), else insert it."""
        from clickhouse_connect.driver.exceptions import DataError

        if any((r.event_id.startswith("bad") and r.status == "ok") or r.event_id.startswith("worse") for r in rows):
            try:
                raise DataError("Unable to create native array for column `n_statements`")
            except DataError as e:
                raise StoreError(f"ClickHouse error: {e}") from e
        await super().insert_rows(rows, dedup_token)


async def test_a_row_the_driver_refuses_cannot_hold_back_its_batch(async_store: AsyncStore) -> None:
    """A refused row is written as an error row, or dropped and counted, so its batch still goes through."""
    acked: list[int] = []
    m = Metrics()
    sink: ClickHouseSink[int] = ClickHouseSink(
        RefusingStore(async_store),
        lambda t, r: acked.extend(t),
        m,
        backoff=FAST,
    )
    for i, r in enumerate([*rows(3), *rows(1, prefix="bad"), *rows(1, prefix="worse")]):
        sink.add(r, i)
    await asyncio.wait_for(sink.flush(), 10)
    assert acked == [0, 1, 2, 3, 4]  # everything acknowledged: nothing retried forever
    got = (
        await async_store.query(
            f"SELECT event_id, status, score, error FROM {async_store.store.qualified_table} ORDER BY event_id"
        )
    ).rows
    assert [(g[0], g[1]) for g in got] == [("bad0", "error"), ("e0", "ok"), ("e1", "ok"), ("e2", "ok")]
    assert got[0][2] is None and got[0][3].startswith("internal: row refused by the store")
    assert m.rows_dropped._value.get() == 1  # `worse0`: refused even as an error row, counted


def test_rows_outside_column_ranges_are_refused_at_construction() -> None:
    """A row whose n_statements does not fit its column fails validation when built."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        ScoredRow.model_validate({**rows(1)[0].model_dump(exclude={"version"}), "n_statements": 2**32})


class SlowStore(AsyncStore):
    """The real store, with every insert held until `release` is set."""

    def __init__(self, inner: AsyncStore) -> None:
        """Wrap `inner`'s store; inserts wait for `release`."""
        super().__init__(inner.store)
        self.release = asyncio.Event()
        self.started = asyncio.Event()

    async def insert_rows(self, rows: Sequence[ScoredRow], dedup_token: str) -> None:
        """Signal the start of an insert, wait for `release`, then insert."""
        self.started.set()
        await self.release.wait()
        await super().insert_rows(rows, dedup_token)


async def test_flush_all_waits_for_a_flush_under_way(async_store: AsyncStore) -> None:
    """`flush_all` returns only once a batch another flush took from the buffer is written and acknowledged."""
    store = SlowStore(async_store)
    acked: list[ScoredRow] = []
    sink: ClickHouseSink[int] = ClickHouseSink(store, lambda _t, r: acked.extend(r), Metrics(), max_rows=10)
    for i, row in enumerate(rows(3)):
        sink.add(row, i)
    background = asyncio.create_task(sink.flush())
    await store.started.wait()  # the batch has left the buffer: len(sink) == 0 while it is written

    everything = asyncio.create_task(sink.flush_all())
    await asyncio.sleep(0.05)
    assert not everything.done()
    store.release.set()
    await everything
    assert len(acked) == 3
    await background
