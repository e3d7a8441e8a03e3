"""The store source of `replay` blames `--where` only for what the filter did: a filter the store refuses is a usage
error naming `--where`; a store that cannot be reached is a store error saying so, whatever the filter; both keep
their cause."""

from __future__ import annotations

import socket

import pytest

from consumers.time_range import TimeRange
from monitor.replay.sources import StoreHistory
from monitor.store.async_store import AsyncStore
from monitor.store.connection import ClickHouseStore
from schemas.errors import StoreError, UsageError
from tests.monitor.replay.conftest import minutes_ago


def _span() -> TimeRange:
    return TimeRange(minutes_ago(60), minutes_ago(0))


async def test_a_filter_the_store_refuses_is_blamed_on_where_with_its_cause(async_store: AsyncStore) -> None:
    """`app = = 'x'`: a UsageError naming --where and ClickHouse's reason, the StoreError as its cause."""
    with pytest.raises(
        UsageError, match=r"--where: the store refused the filter: Code: 62\. DB::Exception: Syntax error"
    ) as caught:
        await StoreHistory(async_store, _span(), "app = = 'x'").counts()
    assert isinstance(caught.value.__cause__, StoreError)


@pytest.mark.parametrize("where", [None, "app = 'support-bot'"])
async def test_an_unreachable_store_is_a_store_error_not_the_filter_s(where: str | None) -> None:
    """A server that refuses connections: with or without a filter, a StoreError saying the count failed because the
    store cannot be reached (the driver's error kept as the cause), never a complaint about --where."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = int(s.getsockname()[1])
    store = AsyncStore(ClickHouseStore(f"http://127.0.0.1:{closed}", "relevancy", "relevancy_scores"))
    try:
        with pytest.raises(StoreError) as caught:
            await StoreHistory(store, _span(), where).counts()
    finally:
        await store.close()
    assert not isinstance(caught.value, UsageError)
    message = str(caught.value)
    assert message.startswith("replay: counting the stored events of the range failed: "), message
    assert "connection refused" in message and "--where" not in message, message
    assert caught.value.__cause__ is not None
