"""Prometheus metrics. One `Metrics` per pipeline, each with its own registry (tests run several)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from monitor.protocols import Judge

_PREFIX = "relevancy_monitor_"
OTHER = "other"


class LabelCap:
    """Bounds the values of a label that comes from event data: an allow-list when one is given, else the first
    `max_values` values seen; every other value is reported as `other`. A producer bug that puts a request id in
    `app` would otherwise create a series per event and can take the Prometheus server down."""

    def __init__(self, max_values: int, allowed: tuple[str, ...] = ()) -> None:
        self.max_values = max_values
        self._allowed = frozenset(allowed)
        self._seen: set[str] = set()

    def __call__(self, value: str) -> str:
        """The label value to export for `value`: itself, or `other`."""
        if self._allowed:
            return value if value in self._allowed else OTHER
        if value in self._seen:
            return value
        if len(self._seen) < self.max_values:
            self._seen.add(value)
            return value
        return OTHER


class Metrics:
    """Counters, gauges and histograms of one pipeline; label values stay low-cardinality (`app` is capped by
    `app_label`, see `LabelCap`)."""

    def __init__(self, registry: CollectorRegistry | None = None, *, max_apps: int = 100, apps: tuple[str, ...] = ()) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self._children: dict[tuple[int, tuple[str, ...]], Counter] = {}
        self._app_cap = LabelCap(max_apps, apps)
        self.label_overflow = Counter(
            _PREFIX + "metric_label_overflow", "Events whose label value was reported as `other` (over the cap)", ["label"], registry=r
        )
        self.consumed = Counter(_PREFIX + "events_consumed", "Records fetched from Kafka", ["topic"], registry=r)
        self.dead_lettered = Counter(_PREFIX + "events_dead_lettered", "Records sent to the dead-letter topic", ["reason"], registry=r)
        self.dlq_publish_failures = Counter(_PREFIX + "dlq_publish_failures", "Dead-letter publish attempts that failed", registry=r)
        self.not_sampled = Counter(_PREFIX + "events_not_sampled", "Decoded events not selected for judging", ["app"], registry=r)
        self.judged = Counter(_PREFIX + "events_judged", "Scored rows produced (by the primary judge)", ["app", "judge", "status"], registry=r)
        self.shadow_rows = Counter(_PREFIX + "shadow_rows", "Scored rows produced by the shadow judge", ["app", "judge", "status"], registry=r)
        self.shadow_cost = Counter(
            _PREFIX + "shadow_cost_usd",
            "Estimated USD of the shadow judge's calls (failed ones included; unpriced models add 0)",
            ["judge"],
            registry=r,
        )
        self.judge_errors = Counter(_PREFIX + "judge_errors", "Judge failures that produced an error row", ["judge", "reason"], registry=r)
        self.judge_deferred = Counter(
            _PREFIX + "judge_deferred", "Judge calls put back to wait for a failing judge to recover", ["judge"], registry=r
        )
        self.breaker_open = Gauge(_PREFIX + "judge_circuit_open", "1 while the judge circuit breaker holds calls back", registry=r)
        self.judge_concurrency = Gauge(_PREFIX + "judge_concurrency_limit", "Current adaptive judge concurrency limit", registry=r)
        self.judge_rate_limited = Counter(_PREFIX + "judge_rate_limited", "Judge calls that met a 429 from the provider", ["judge"], registry=r)
        self.judge_latency = Histogram(
            _PREFIX + "judge_latency_seconds",
            "Time to judge one event, retries included",
            ["judge"],
            buckets=(0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
            registry=r,
        )
        self.sampling_factor = Gauge(
            _PREFIX + "sampling_factor", "Multiplier on sampling rates (budget, freshness); 1 is none", ["reason"], registry=r
        )
        self.budget_used = Gauge(_PREFIX + "budget_used_ratio", "Largest share of any judge spend cap used in its window", registry=r)
        self.cache_hits = Counter(_PREFIX + "verdict_cache_hits", "Events scored from the verdict cache", registry=r)
        self.redactions = Counter(
            _PREFIX + "redactions", "Items of personal data replaced before the judge and the store, by kind", ["kind"], registry=r
        )
        self.sampled = Counter(_PREFIX + "events_sampled", "Decoded events selected for judging", ["app", "rule"], registry=r)
        self.rows_written = Counter(_PREFIX + "rows_written", "Rows durably inserted into ClickHouse", registry=r)
        self.rows_dropped = Counter(_PREFIX + "rows_dropped", "Rows the store refused even as error rows (logged with their event id)", registry=r)
        self.insert_failures = Counter(_PREFIX + "insert_failures", "Failed ClickHouse insert attempts (retried)", registry=r)
        self.flush_seconds = Histogram(_PREFIX + "flush_seconds", "Time to write one batch", registry=r)
        self.commits = Counter(_PREFIX + "commits", "Successful offset commits", registry=r)
        self.commit_failures = Counter(_PREFIX + "commit_failures", "Offset commits rejected by the group", registry=r)
        self.in_flight = Gauge(_PREFIX + "in_flight_events", "Events fetched and not yet finished", registry=r)
        self.paused = Gauge(_PREFIX + "consumption_paused", "1 while consumption is paused for backpressure", registry=r)
        self.lag = Gauge(_PREFIX + "consumer_lag", "Records behind the high-watermark", ["topic", "partition"], registry=r)

    def app_label(self, app: str, events: int = 1) -> str:
        """The `app` label value for `events` events of an app: itself while under the cap, else `other` (counted)."""
        label = self._app_cap(app)
        if label == OTHER and app != OTHER:
            self.label_overflow.labels("app").inc(events)
        return label

    def child(self, metric: Counter, *labels: str) -> Counter:
        """`metric.labels(*labels)`, kept: the look-up validates and locks on every call, and the hot path makes one
        per event (the series themselves are the same objects either way; none of these is ever removed)."""
        key = (id(metric), labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found

    def watch_judge(self, judge: Judge, *, shadow: bool = False) -> None:
        """Export a judge's own API counters (attempts, errors and retries by kind, tokens) at scrape time; a shadow
        judge's under `relevancy_monitor_shadow_judge_*`, so the same method in both roles stays two series."""
        self.registry.register(_JudgeStatsCollector(judge.info.method, judge.stats, _PREFIX + ("shadow_" if shadow else "")))

    def total(self, name: str) -> float:
        """The sum of a counter's samples over all its labels (for progress lines)."""
        return sum(s.value for m in self.registry.collect() if m.name == name for s in m.samples if s.name.endswith("_total"))


class _JudgeStatsCollector(Collector):
    """Reads the judge's `stats` counters at scrape time (keys like `error.rate_limited`, `tokens.input`)."""

    def __init__(self, method: str, stats: Mapping[str, int], prefix: str = _PREFIX) -> None:
        self._method = method
        self._stats = stats
        self._prefix = prefix

    def collect(self) -> Iterator[CounterMetricFamily]:
        p = self._prefix
        requests = CounterMetricFamily(p + "judge_api_requests", "Judge API requests sent (each attempt)", labels=["judge"])
        errors = CounterMetricFamily(p + "judge_api_errors", "Failed judge API attempts by kind", labels=["judge", "kind"])
        retries = CounterMetricFamily(p + "judge_api_retries", "Judge API retries by the kind that caused them", labels=["judge", "kind"])
        tokens = CounterMetricFamily(p + "judge_tokens", "Judge tokens by type", labels=["judge", "type"])
        requests.add_metric([self._method], self._stats.get("attempts", 0))
        for key, value in list(self._stats.items()):
            prefix, _, kind = key.partition(".")
            family = {"error": errors, "retry": retries, "tokens": tokens}.get(prefix)
            if family is not None and kind:
                family.add_metric([self._method, kind], value)
        yield from (requests, errors, retries, tokens)
