"""Writing the per-segment traffic counts, before each commit and on their own timer, so that a write that keeps
failing cannot stall the group's commits unseen: every failure is counted by reason (store_outage, or bug), and once
commits have been held back longer than the store's threshold readiness says so, and why."""

from __future__ import annotations

import asyncio

from monitor.judging.cost_control import CostControl
from monitor.runtime.health import Health
from monitor.runtime.metrics import Metrics

_NAMES = {"store_outage": "store outage", "bug": "bug in the monitor (see the error log)"}


class TrafficFlush:
    """`flush()` writes the counted traffic and records the outcome in the metrics and readiness; `run(every_s)`
    flushes on a timer until cancelled."""

    def __init__(self, cost: CostControl, metrics: Metrics, health: Health) -> None:
        self.cost, self.metrics, self.health = cost, metrics, health

    async def flush(self) -> bool:
        """Write the counted traffic; False if it was not written (nothing may be committed until it is)."""
        failed = await self.cost.flush_traffic()
        if failed is None:
            self.health.commits_flowing()
            return True
        self.metrics.traffic_write_failures.labels(failed.reason).inc()
        self.health.commits_held(f"the traffic counts are not written: {_NAMES[failed.reason]}: {failed.problem}")
        return False

    async def run(self, every_s: float) -> None:
        """Flush every `every_s` until cancelled."""
        while True:
            await asyncio.sleep(every_s)
            await self.flush()
