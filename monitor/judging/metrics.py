"""The judging metrics: what the guards, the budget and a judge's own API counters export, on a given registry.

The service's `monitor.runtime.metrics.Metrics` extends them with the consumer's; replay, canaries and calibration
use them alone."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from monitor.judges.base import Judge

PREFIX = "relevancy_monitor_"


class JudgingMetrics:
    """Judge calls (errors, deferrals, latency, 429s), the circuit, the adaptive limit and the spend budget."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.judge_errors = Counter(
            PREFIX + "judge_errors", "Judge failures that produced an error row", ["judge", "reason"], registry=r
        )
        self.judge_deferred = Counter(
            PREFIX + "judge_deferred",
            "Judge calls put back to wait for a failing judge to recover",
            ["judge"],
            registry=r,
        )
        self.breaker_open = Gauge(
            PREFIX + "judge_circuit_open", "1 while the judge circuit breaker holds calls back", registry=r
        )
        self.judge_concurrency = Gauge(
            PREFIX + "judge_concurrency_limit", "Current adaptive judge concurrency limit", registry=r
        )
        self.judge_rate_limited = Counter(
            PREFIX + "judge_rate_limited", "Judge calls that met a 429 from the provider", ["judge"], registry=r
        )
        self.judge_latency = Histogram(
            PREFIX + "judge_latency_seconds",
            "Time to judge one event, retries included",
            ["judge"],
            buckets=(0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
            registry=r,
        )
        self.sampling_factor = Gauge(
            PREFIX + "sampling_factor",
            "Multiplier on sampling rates (budget, freshness); 1 is none",
            ["reason"],
            registry=r,
        )
        self.budget_used = Gauge(
            PREFIX + "budget_used_ratio", "Largest share of any judge spend cap used in its window", registry=r
        )

    def watch_judge(self, judge: Judge, *, shadow: bool = False) -> None:
        """Export a judge's own API counters (attempts, errors and retries by kind, tokens, and for an LLM judge the
        prompt-cache tokens by model) at scrape time; a shadow judge's under `relevancy_monitor_shadow_judge_*`, so
        the same method in both roles stays two series."""
        info = judge.info
        self.registry.register(
            _JudgeStatsCollector(
                info.method,
                judge.stats,
                PREFIX + ("shadow_" if shadow else ""),
                model=None if info.heuristic else info.model,
                provider=info.provider,
            )
        )


class _JudgeStatsCollector(Collector):
    """Reads the judge's `stats` counters at scrape time (keys like `error.rate_limited`, `tokens.input`).

    With a `model` (a judge that calls the API) it also exports the prompt-cache counters the API reported on every
    reply, labelled by judge and model (the cache minimum is the model's): `judge_cache_read_tokens`,
    `judge_cache_write_tokens` and all `judge_prompt_tokens` (uncached input + cache read + cache write), so that the
    share read from the cache is read ÷ prompt in PromQL."""

    def __init__(
        self,
        method: str,
        stats: Mapping[str, int],
        prefix: str = PREFIX,
        *,
        model: str | None = None,
        provider: str | None = None,
    ) -> None:
        self._method = method
        self._stats = stats
        self._prefix = prefix
        self._model = model
        self._provider = provider

    def collect(self) -> Iterator[CounterMetricFamily]:
        p = self._prefix
        requests = CounterMetricFamily(
            p + "judge_api_requests", "Judge API requests sent (each attempt)", labels=["judge"]
        )
        errors = CounterMetricFamily(
            p + "judge_api_errors", "Failed judge API attempts by kind", labels=["judge", "kind"]
        )
        retries = CounterMetricFamily(
            p + "judge_api_retries", "Judge API retries by the kind that caused them", labels=["judge", "kind"]
        )
        tokens = CounterMetricFamily(p + "judge_tokens", "Judge tokens by type", labels=["judge", "type"])
        requests.add_metric([self._method], self._stats.get("attempts", 0))
        for key, value in list(self._stats.items()):
            prefix, _, kind = key.partition(".")
            family = {"error": errors, "retry": retries, "tokens": tokens}.get(prefix)
            if family is not None and kind:
                family.add_metric([self._method, kind], value)
        yield from (requests, errors, retries, tokens)
        if self._model is not None:
            yield from self._cache_families()
        if self._provider is not None:
            yield self._invalid_family()

    def _invalid_family(self) -> CounterMetricFamily:
        # By provider and structured-output mode: a server that accepts a schema and ignores it shows here first.
        family = CounterMetricFamily(
            self._prefix + "judge_invalid_replies",
            "Judge replies that did not validate against the reply schema, by provider and structured-output mode",
            labels=["judge", "provider", "mode"],
        )
        for key, value in list(self._stats.items()):
            prefix, _, mode = key.partition(".")
            if prefix == "invalid" and mode:
                family.add_metric([self._method, self._provider or "", mode], value)
        return family

    def _cache_families(self) -> Iterator[CounterMetricFamily]:
        p, labels, stats = self._prefix, [self._method, self._model or ""], self._stats
        read, write = stats.get("tokens.cache_read", 0), stats.get("tokens.cache_write", 0)
        for name, doc, value in (
            (
                "judge_cache_read_tokens",
                "Prompt tokens the API read from the prompt cache (cache_read_input_tokens)",
                read,
            ),
            (
                "judge_cache_write_tokens",
                "Prompt tokens the API wrote to the prompt cache (cache_creation_input_tokens)",
                write,
            ),
            (
                "judge_prompt_tokens",
                "All prompt tokens of judge replies: uncached input + cache read + cache write",
                stats.get("tokens.input", 0) + read + write,
            ),
        ):
            family = CounterMetricFamily(p + name, doc, labels=["judge", "model"])
            family.add_metric(labels, value)
            yield family
