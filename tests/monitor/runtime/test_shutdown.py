"""Shutdown under a backlog: no new judge call starts once the monitor is stopping; the calls already sent
finish, their rows are written and committed, and the events never started are redelivered."""

from __future__ import annotations

import time
from collections.abc import Callable

from monitor.config import Settings
from monitor.devtools.localbroker import LocalBroker
from monitor.devtools.traffic import generate_events
from monitor.store.async_store import AsyncStore
from tests.fake_messages_api import FakeMessagesAPI, slow
from tests.harness import RunningPipeline, committed_offsets, produce_values, wait_for

JUDGE_S = 2.0


async def test_stopping_under_a_backlog_waits_for_one_judge_call_not_the_grace_period(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """With 1,500 events queued behind a 2 s judge, a stop exits in about one call plus a flush, committing only rows
    written."""
    fake_messages_api.always(slow(JUDGE_S))
    settings = make_settings(
        judge="rubric",
        judge_request_timeout_s=10.0,
        judge_concurrency=4,
        shutdown_grace_s=30.0,
        **fake_messages_api.settings_overrides(),
    )
    topic = settings.kafka.topics[0]
    await produce_values(broker.bootstrap, topic, list(generate_events(1500, seed=3, malformed_share=0.0)))
    async with RunningPipeline(settings, async_store) as run:
        await wait_for(
            lambda: _true_after(len(fake_messages_api.message_requests) >= 8), 60, "two rounds of judge calls sent"
        )
        started = time.monotonic()
        await run.shutdown()
        took = time.monotonic() - started
    print(f"stopped in {took:.2f}s with a {JUDGE_S:g}s judge and a backlog of 1,500")
    assert took < JUDGE_S + 2.0, f"took {took:.1f}s"
    committed = await committed_offsets(broker.bootstrap, settings.kafka.group_id, topic)
    table = async_store.store.qualified_table
    for partition, offset in committed.items():
        below = (
            await async_store.query(
                f"SELECT uniqExact(kafka_offset) FROM {table} WHERE kafka_partition = {partition} AND kafka_offset < "
                f"{offset or 0}"
            )
        ).rows[0][0]
        assert below == (offset or 0), f"partition {partition}: committed {offset} but only {below} rows below it"
    assert sum((v or 0) for v in committed.values()) < 1500  # the backlog was left for redelivery, not judged


async def _true_after(value: bool) -> bool:
    return value
