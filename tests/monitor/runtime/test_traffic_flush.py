"""Traffic counts that cannot be written hold every commit back: each failure is counted by reason (a store outage,
or a bug of the monitor, which is logged as a bug with its traceback), and once commits have been held back longer
than the threshold, readiness says so and why, instead of the pods looking healthy while the group stalls."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import structlog

from monitor.config import Settings
from monitor.devtools.localbroker import LocalBroker
from monitor.devtools.traffic import generate_events
from monitor.judging.cost_control import CostControl
from monitor.judging.settings import BudgetSettings
from monitor.runtime.health import Health
from monitor.runtime.metrics import Metrics
from monitor.runtime.traffic_flush import TrafficFlush
from monitor.store.async_store import AsyncStore
from schemas.errors import StoreError
from tests.harness import RunningPipeline, all_committed, committed_offsets, produce_values, wait_for

EVENTS = 12


class TrafficFaults(AsyncStore):
    """The test's store, whose traffic-count writes raise `fault` while it is set; other calls go to the store."""

    def __init__(self, inner: AsyncStore) -> None:
        """Wrap `inner` (its executor thread and engine stay the only ones used)."""
        super().__init__(inner.store)
        self.inner = inner
        self.fault: Exception | None = None

    async def insert_table(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Raise the fault, if any, else write through the wrapped store."""
        if self.fault is not None:
            raise self.fault
        await self.inner.insert_table(table, columns, rows)


async def test_a_bug_is_counted_logged_as_a_bug_and_turns_readiness_off_after_the_threshold(
    async_store: AsyncStore,
) -> None:
    """A TypeError from the write: counted as `bug`, logged at error level with its traceback, and `commits` goes
    down only past `unready_after_s`, saying it is a bug; a StoreError is counted as `store_outage`; a write that
    succeeds brings commits back and stores the counts kept meanwhile."""
    faults, metrics = TrafficFaults(async_store), Metrics()
    health = Health(joined=True, store_answered=True, unready_after_s=30.0)
    cost = CostControl(BudgetSettings(), faults, metrics)
    flush = TrafficFlush(cost, metrics, health)
    cost.traffic.add(1_800_000_000.0, "app", "model", "v1", "consumed")

    faults.fault = TypeError("unsupported operand type(s) for +: 'int' and 'str'")
    with structlog.testing.capture_logs() as logs:
        assert await flush.flush() is False
    assert metrics.traffic_write_failures.labels("bug")._value.get() == 1
    assert metrics.traffic_write_failures.labels("store_outage")._value.get() == 0
    [line] = [e for e in logs if e["event"].startswith("traffic_counts_write")]
    assert line["event"] == "traffic_counts_write_bug" and line["log_level"] == "error"
    assert line["exc_info"] is True and line["error"] == "TypeError"
    since = health.commits_held_since
    assert since is not None
    assert health.component_up("commits", now=since + 29.0) and health.reason("commits", now=since + 29.0) == ""
    assert not health.component_up("commits", now=since + 31.0)
    reason = health.reason("commits", now=since + 31.0)
    assert reason.startswith("offsets not committed for 31 s") and "bug in the monitor" in reason, reason
    assert "TypeError" in reason and "store outage" not in reason
    assert health.component_up("store", now=since + 31.0)  # a bug is not the store's outage

    faults.fault = StoreError("ClickHouse unreachable: connection refused (check MONITOR_CLICKHOUSE_URL)")
    with structlog.testing.capture_logs() as logs:
        assert await flush.flush() is False
    assert metrics.traffic_write_failures.labels("store_outage")._value.get() == 1
    assert metrics.traffic_write_failures.labels("bug")._value.get() == 1
    assert [(e["event"], e["log_level"]) for e in logs] == [("traffic_counts_write_failed", "warning")]
    assert health.commits_held_since == since  # held back since the first failure
    assert "store outage: StoreError: ClickHouse unreachable" in health.reason("commits", now=since + 31.0)

    faults.fault = None
    assert await flush.flush() is True
    assert health.component_up("commits", now=since + 1e6) and health.reason("commits", now=since + 1e6) == ""
    written = await async_store.query(f"SELECT sum(consumed) FROM {async_store.store.database}.traffic_counts")
    assert written.rows[0][0] == 1


async def test_a_pipeline_whose_counts_write_raises_a_bug_commits_nothing_and_says_so(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """Through the broker and chDB: while the traffic write raises a TypeError nothing is committed, the bug is
    counted and readiness names `commits` with the bug; once it is fixed every offset is committed."""
    settings = make_settings()
    topic = settings.kafka.topics[0]
    faults = TrafficFaults(async_store)
    faults.fault = TypeError("unsupported operand type(s) for +: 'int' and 'str'")
    await produce_values(broker.bootstrap, topic, list(generate_events(EVENTS, seed=3, malformed_share=0.0)))
    async with RunningPipeline(settings, async_store) as run:
        run.pipeline.cost.store = faults
        health = run.pipeline.health
        health.unready_after_s = 0.5

        async def unready() -> bool:
            return not health.report()["components"]["commits"]["up"]

        await wait_for(unready, 60, "readiness off for commits")
        report = health.report()
        assert report["ready"] is False and "bug in the monitor" in report["components"]["commits"]["reason"]
        assert report["components"]["store"]["up"] is True
        assert run.counter("relevancy_monitor_traffic_counts_write_failures", reason="bug") >= 1
        assert run.counter("relevancy_monitor_traffic_counts_write_failures", reason="store_outage") == 0
        offsets = await committed_offsets(broker.bootstrap, settings.kafka.group_id, topic)
        assert all(not v for v in offsets.values()), offsets

        faults.fault = None

        async def committed() -> bool:
            return await all_committed(broker.bootstrap, settings.kafka.group_id, topic, EVENTS)

        await wait_for(committed, 60, "every offset committed once the counts are written")
        assert health.report()["components"]["commits"] == {"up": True, "reason": ""}
