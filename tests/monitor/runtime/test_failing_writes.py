"""A store whose inserts fail while it still answers (its scores table dropped under a running monitor): readiness
says so with the reason, the stop ends within its grace period and counts the unwritten events once, and the next
start re-reads them from the committed offset."""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog

from monitor.config import Settings
from monitor.devtools.localbroker import LocalBroker
from monitor.devtools.traffic import generate_events
from monitor.runtime.backpressure import IN_FLIGHT_CAP
from monitor.store.async_store import AsyncStore
from monitor.store.migrations import Migrations
from tests.harness import RunningPipeline, count_rows, produce_values, wait_for

GRACE_S = 4.0
EVENTS = 60


async def test_failing_inserts_turn_readiness_off_and_the_stop_tells_the_truth(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """Readiness turns 503 naming the failing insert and consumption pauses at the in-flight cap; the stop takes at
    most the grace period and its lines agree (the events in flight, counted once); after `migrate` the next start
    writes a row for every event."""
    settings = make_settings(shutdown_grace_s=GRACE_S, lag_check_s=0.2, max_in_flight=8, kafka_max_poll_records=5)
    topic = settings.kafka.topics[0]
    store = async_store.store
    with structlog.testing.capture_logs() as logs:
        async with RunningPipeline(settings, async_store) as run:
            health = run.pipeline.health
            health.unready_after_s = 1.0
            await wait_for(lambda: _now(health.joined), 60, "the consumer joined")
            await async_store.call(lambda s: s.command(f"DROP TABLE {s.qualified_table}"))
            await produce_values(broker.bootstrap, topic, list(generate_events(EVENTS, seed=5, malformed_share=0.0)))
            await wait_for(lambda: _now(health.writes_failing_s() > 1.5), 60, "inserts failing for over a second")
            report = health.report()
            assert report["ready"] is False and report["components"]["store"]["up"] is False
            reason = report["components"]["store"]["reason"]
            assert reason.startswith("inserts failing for ") and "does not exist" in reason, reason
            await wait_for(
                lambda: _now(IN_FLIGHT_CAP in run.pipeline.pausing.backpressure.reasons),
                30,
                "consumption paused at the in-flight cap",
            )
            in_flight = run.pipeline.tracker.in_flight()
            assert 8 <= in_flight < EVENTS
            started = time.monotonic()
            await run.shutdown()
            took = time.monotonic() - started
    assert took <= GRACE_S + 0.5, f"the stop took {took:.1f} s with a {GRACE_S:g} s grace period"
    stopped = [e for e in logs if e["event"] == "stopped"]
    assert [e["unfinished_events"] for e in stopped] == [in_flight]
    assert all("rows_not_written" not in e for e in logs)

    await async_store.call(lambda s: Migrations(s).migrate())  # the operator's repair: the table comes back, empty
    async with RunningPipeline(settings, async_store):
        await wait_for(lambda: _rows_at_least(async_store, EVENTS), 60, "every event re-read and written")
    assert await count_rows(async_store) == EVENTS
    assert Migrations(store).differences() == []


async def _now(value: bool) -> bool:
    return value


async def _rows_at_least(store: AsyncStore, n: int) -> bool:
    return await count_rows(store) >= n
