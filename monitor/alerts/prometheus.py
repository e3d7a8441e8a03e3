"""Prometheus metrics of the alert evaluator, in a registry of their own (`alerts run --metrics-port`)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

_PREFIX = "relevancy_monitor_alert_"
_CANARY = "relevancy_monitor_canary_"


class AlertMetrics:
    """Prometheus metrics of the alert evaluator (own registry)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.rounds = Counter(_PREFIX + "rounds", "Evaluation rounds run (as leader)", registry=r)
        self.rule_errors = Counter(_PREFIX + "rule_errors", "Rule evaluations that failed", ["rule"], registry=r)
        self.notifications = Counter(
            _PREFIX + "notifications", "Notification attempts", ["notifier", "outcome"], registry=r
        )
        self.firing = Gauge(_PREFIX + "firing", "Segments firing per rule", ["rule", "severity"], registry=r)
        self.leader = Gauge(_PREFIX + "leader", "1 while this replica evaluates and notifies", registry=r)
        self.last_round = Gauge(_PREFIX + "last_round_timestamp_seconds", "When the last round finished", registry=r)
        self.canary_runs = Counter(
            _CANARY + "runs", "Canary runs written, and rounds where a run or its write failed", ["outcome"], registry=r
        )
        self.canary_cost = Counter(
            _CANARY + "cost_usd", "Estimated judge spend of the canary runs written (USD)", registry=r
        )
        self.canary_last_run = Gauge(
            _CANARY + "last_run_timestamp_seconds", "When the last canary run written started", registry=r
        )
