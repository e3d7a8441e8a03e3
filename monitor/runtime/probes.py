"""The pipeline's watch, as a task of its own: is Kafka reachable, does the store answer, how far behind are we,
and a progress line now and then. Readiness (`Health`), the lag gauges and the freshness factor follow from it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

import structlog
from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from consumers.offsets import OffsetTracker
from consumers.source import KafkaSource
from monitor.judging.cost_control import CostControl
from monitor.judging.guarded_judge import GuardedJudge
from monitor.judging.settings import FlowSettings
from monitor.runtime.health import Health, HealthGauges
from monitor.runtime.metrics import Metrics
from monitor.store.async_store import AsyncStore

log = structlog.get_logger("monitor.runtime.probes")

PROBE_TIMEOUT_S = 5.0
# Each probe is bounded with `asyncio.timeout`, not `asyncio.wait_for`: on Python 3.11 `wait_for` returns the probe's
# answer instead of raising when the cancel comes in the iteration in which that answer arrived, and these probes
# then went on forever while a stop waited for them to end (a stop sent right after readiness turned).


class Probes:
    """Every `flow.lag_check_s`: probe the brokers and the store, refresh the lag; every `flow.progress_log_s`: log
    progress. `lag` is the last known total lag of owned partitions."""

    def __init__(
        self,
        *,
        source: KafkaSource,
        bootstrap: str,
        store: AsyncStore,
        guard: GuardedJudge,
        cost: CostControl,
        tracker: OffsetTracker,
        metrics: Metrics,
        health: Health,
        flow: FlowSettings,
        with_shadow: bool,
    ) -> None:
        self.source, self.bootstrap, self.store, self.guard, self.cost = source, bootstrap, store, guard, cost
        self.tracker, self.metrics, self.health, self.flow, self.with_shadow = (
            tracker,
            metrics,
            health,
            flow,
            with_shadow,
        )
        self._gauges = HealthGauges(metrics.registry)
        self.lag = 0

    async def run(self) -> None:
        """Probe and log on their intervals until cancelled."""
        last_probe = last_progress = time.monotonic()
        while True:
            await asyncio.sleep(min(self.flow.lag_check_s, self.flow.progress_log_s, 1.0))
            now = time.monotonic()
            if now - last_probe >= self.flow.lag_check_s:
                await self.probe()
                last_probe = now
            if now - last_progress >= self.flow.progress_log_s:
                self.log_progress()
                last_progress = now

    async def probe(self) -> None:
        """One round: the brokers, the store, the circuit, the lag (and the freshness factor it drives)."""
        await self._probe_kafka()
        await self._probe_store()
        self.health.info["judge_circuit"] = self.guard.breaker.state.value
        self.lag = await self._update_lag()
        self.cost.on_lag(self.lag, throttled=self.guard.throttled_since_last_asked())
        self._gauges.update(self.health)

    async def _probe_kafka(self) -> None:
        """Ask the brokers for metadata: the readiness of the Kafka side, logged when it changes."""
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_S):
                await self.source.consumer.topics()
        except (TimeoutError, KafkaError) as e:
            problem = (str(e) or type(e).__name__)[:200]  # aiokafka puts the class name in the message already
            if self.health.mark("kafka", False, problem):
                log.error(
                    "kafka_unreachable",
                    bootstrap=self.bootstrap,
                    error=problem,
                    in_flight=self.tracker.in_flight(),
                    note="unfinished events are kept and retried; progress lines report while this lasts",
                )
            return
        if self.health.mark("kafka", True):
            log.info("kafka_reachable", bootstrap=self.bootstrap)

    async def _probe_store(self) -> None:
        """A trivial query: readiness turns false when the store stops answering, even while nothing is written."""
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_S):
                await self.store.query("SELECT 1")
        except Exception as e:  # StoreError, a timeout, or the driver's own connection errors
            if self.health.mark("store", False, (str(e) or type(e).__name__)[:200]):
                log.error("store_unreachable", error=type(e).__name__, detail=str(e)[:200])
            return
        if self.health.mark("store", True):
            log.info("store_reachable")

    async def _update_lag(self) -> int:
        """Refresh the per-partition lag gauges; returns the total lag of owned partitions (the last known lag
        while the brokers do not answer)."""
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_S):
                lags = await self.source.lag()
        except (TimeoutError, KafkaError) as e:
            log.debug("lag_unavailable", error=type(e).__name__)
            return self.lag
        for tp, lag in lags.items():
            self.metrics.lag.labels(tp.topic, str(tp.partition)).set(lag)
        return sum(lags.values())

    def forget(self, tps: Iterable[TopicPartition]) -> None:
        """Drop the lag gauges of partitions no longer owned."""
        for tp in tps:
            try:
                self.metrics.lag.remove(tp.topic, str(tp.partition))
            except KeyError:
                pass

    def log_progress(self) -> None:
        """One line: what was consumed, judged, written and dead-lettered, and the state of the flow."""
        total = self.metrics.total
        log.info(
            "progress",
            consumed=int(total("relevancy_monitor_events_consumed")),
            judged=int(total("relevancy_monitor_events_judged")),
            **({"shadow_judged": int(total("relevancy_monitor_shadow_rows"))} if self.with_shadow else {}),
            written=int(total("relevancy_monitor_rows_written")),
            dead_lettered=int(total("relevancy_monitor_events_dead_lettered")),
            in_flight=self.tracker.in_flight(),
            lag=self.lag,
            sampling_factor=round(self.cost.factor, 3),
            circuit=self.guard.breaker.state.value,
            ready=self.health.ready,
            down=sorted(c for c, up in self.health.up.items() if not up),
        )
