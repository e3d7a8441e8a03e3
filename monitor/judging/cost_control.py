"""Cost control around the sampler: the budget and freshness factors, spend sync across replicas, and the
per-segment traffic counts. The pipeline asks it for the current factor and tells it what was spent."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import structlog

from monitor.judging.budget import FreshnessGovernor, Limits, Spend, SpendBudget
from monitor.judging.metrics import JudgingMetrics
from monitor.judging.settings import BudgetSettings
from monitor.judging.traffic_counts import COLUMNS as TRAFFIC_COLUMNS
from monitor.judging.traffic_counts import TrafficCounter
from monitor.store.async_store import AsyncStore
from monitor.store.connection import ClickHouseStore
from schemas.errors import StoreError
from schemas.scored import ScoredRow
from schemas.usage import Usage

log = structlog.get_logger("monitor.judging.cost_control")


_TOKENS = "input_tokens + output_tokens + cache_read_tokens + cache_write_tokens"
_SPEND = (
    "WITH toDateTime64({h:Float64}, 3, 'UTC') AS h"
    f" SELECT countIf(scored_at >= h), sumIf({_TOKENS}, scored_at >= h), sumIf(ifNull(cost_usd, 0), scored_at >= h),"
    f" count(), sum({_TOKENS}), sum(ifNull(cost_usd, 0)) FROM {{table}}"
    " WHERE scored_at >= toDateTime64({d:Float64}, 3, 'UTC') AND NOT cached AND replay_run = ''"
)


def judge_spend(store: ClickHouseStore, hour_start: float, day_start: float) -> tuple[Spend, Spend]:
    """What every replica spent on judge calls since `hour_start` and since `day_start` (epoch seconds), from the
    live consumer's rows written (cached verdicts cost nothing; a replay has its own cap, --max-usd)."""
    sql = _SPEND.replace("{table}", store.qualified_table)
    row = store.query(sql, {"h": hour_start, "d": day_start}).rows[0]
    return Spend(*map(float, row[0:3])), Spend(*map(float, row[3:6]))


@dataclass(frozen=True, slots=True)
class TrafficNotWritten:
    """Why the traffic counts were not written: the store's outage, or a bug of the monitor; `problem` is the
    exception's type and first line."""

    reason: Literal["store_outage", "bug"]
    problem: str


def _one_line(e: Exception) -> str:
    first = str(e).splitlines()[0][:200] if str(e) else ""
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


def _tokens(u: Usage | ScoredRow) -> int:
    return u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens


class CostControl:
    """Owns the spend budget, the freshness governor and the traffic counter; `factor`/`reason` are what the
    sampler multiplies rates by and why."""

    def __init__(self, settings: BudgetSettings, store: AsyncStore, metrics: JudgingMetrics) -> None:
        self.settings = settings
        self.store = store
        self.metrics = metrics
        self.budget = SpendBudget(
            per_hour=Limits(settings.requests_per_hour, settings.tokens_per_hour, settings.usd_per_hour),
            per_day=Limits(settings.requests_per_day, settings.tokens_per_day, settings.usd_per_day),
            soft_limit=settings.soft_limit,
        )
        self.freshness = FreshnessGovernor(settings.freshness_max_lag, settings.freshness_min_factor)
        self.traffic = TrafficCounter()
        self.factor, self.reason = 1.0, ""

    def current(self) -> tuple[float, str]:
        """The factor for the next sampling decision (recomputed each time while a budget is set, so a burst
        cannot run past the cap between refreshes)."""
        if self.budget.enabled:
            self.refresh()
        return self.factor, self.reason

    def refresh(self) -> None:
        """Combine the budget and freshness factors; log and export changes."""
        budget, fresh = self.budget.factor(), self.freshness.factor
        factor = budget * fresh
        reason = "budget" if budget < 1.0 else ("freshness" if fresh < 1.0 else "")
        if (factor == 0.0) != (self.factor == 0.0):
            if factor == 0.0:
                log.warning(
                    "budget_exhausted",
                    used=round(self.budget.used(), 3),
                    note="judging stops until the budget window rolls over",
                )
            else:
                log.info("budget_available", factor=round(factor, 3))
        elif reason != self.reason:
            log.info("sampling_factor_changed", factor=round(factor, 3), reason=reason or "none")
        self.factor, self.reason = factor, reason
        self.metrics.budget_used.set(self.budget.used())
        self.metrics.sampling_factor.labels("budget").set(budget)
        self.metrics.sampling_factor.labels("freshness").set(fresh)

    def reserve_call(self) -> None:
        """A judge call was decided: count the request now (its tokens and USD follow in `spent`)."""
        self.budget.record(Spend(requests=1))

    def spent(self, usage: Usage) -> None:
        """A judge call returned with this usage."""
        self.budget.record(Spend(usd=usage.cost_usd or 0.0, tokens=_tokens(usage)))

    def written(self, rows: Iterable[ScoredRow]) -> None:
        """Rows are durably in the store: a later sync must not count their spend twice."""
        if self.budget.enabled:
            paid = [r for r in rows if not r.cached]
            self.budget.written(
                Spend(requests=len(paid), usd=sum(r.cost_usd or 0.0 for r in paid), tokens=sum(map(_tokens, paid)))
            )

    def on_lag(self, lag: int, throttled: bool) -> None:
        """A lag measurement: adjust the freshness factor."""
        self.freshness.update(lag, throttled)
        self.refresh()

    async def sync_loop(self) -> None:
        """Re-read everyone's spend from the store for the current hour and day, every `sync_s`."""
        while True:
            await self.sync()
            await asyncio.sleep(self.settings.sync_s)

    async def sync(self) -> None:
        """One spend sync (failures keep the local view; the next sync catches up)."""
        hour_start, day_start = self.budget.window_starts()
        try:
            hour, day = await self.store.call(lambda store: judge_spend(store, hour_start, day_start))
            self.budget.sync(hour, day)
        except Exception as e:
            log.warning("budget_sync_failed", error=type(e).__name__, detail=str(e)[:200])
        self.refresh()

    async def flush_traffic(self) -> TrafficNotWritten | None:
        """Write the counted traffic; None once written (or nothing to write), else why not (the counts are kept for
        the next try). A `StoreError` is the store's outage and is retried quietly; anything else is a bug of the
        monitor, logged as one with its traceback, so that it cannot pass for an outage."""
        rows = self.traffic.drain()
        if not rows:
            return None
        try:
            await self.store.insert_table("traffic_counts", TRAFFIC_COLUMNS, rows)
        except StoreError as e:
            self.traffic.restore(rows)
            log.warning("traffic_counts_write_failed", error=type(e).__name__, detail=str(e)[:200])
            return TrafficNotWritten("store_outage", _one_line(e))
        except Exception as e:  # a defect (a row of the wrong shape, a wrong call): it recurs, and commits stall
            self.traffic.restore(rows)
            log.error("traffic_counts_write_bug", error=type(e).__name__, rows=len(rows), exc_info=True)
            return TrafficNotWritten("bug", _one_line(e))
        return None
