"""Prometheus metrics. One `Metrics` per pipeline, each with its own registry (tests run several)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from monitor.judging.metrics import PREFIX, JudgingMetrics

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


class Metrics(JudgingMetrics):
    """Counters, gauges and histograms of one pipeline; label values stay low-cardinality (`app` is capped by
    `app_label`, see `LabelCap`)."""

    def __init__(
        self, registry: CollectorRegistry | None = None, *, max_apps: int = 100, apps: tuple[str, ...] = ()
    ) -> None:
        super().__init__(registry)
        self._children: dict[tuple[int, tuple[str, ...]], Counter] = {}
        self._app_cap = LabelCap(max_apps, apps)
        self.label_overflow = Counter(
            PREFIX + "metric_label_overflow",
            "Events whose label value was reported as `other` (over the cap)",
            ["label"],
            registry=self.registry,
        )
        self._register_records(self.registry)
        self._register_otlp(self.registry)
        self._register_events(self.registry)
        self._register_rows(self.registry)
        self._register_evaluations(self.registry)
        self._register_writes(self.registry)
        self._register_offsets(self.registry)
        self._register_feedback(self.registry)

    def _register_records(self, r: CollectorRegistry) -> None:
        """What was fetched from Kafka, and what went to the dead-letter topic."""
        self.consumed = Counter(PREFIX + "events_consumed", "Records fetched from Kafka", ["topic"], registry=r)
        self.dead_lettered = Counter(
            PREFIX + "events_dead_lettered", "Records sent to the dead-letter topic", ["reason"], registry=r
        )
        self.dlq_publish_failures = Counter(
            PREFIX + "dlq_publish_failures", "Dead-letter publish attempts that failed", registry=r
        )

    def _register_otlp(self, r: CollectorRegistry) -> None:
        """The OpenTelemetry reader: spans not scored, and the join of spans with their log records."""
        self.otlp_skipped = Counter(
            PREFIX + "otlp_spans_skipped",
            "OpenTelemetry spans and log records not scored, by kind (agent, tool, no_content, duplicate, ...)",
            ["topic", "kind"],
            registry=r,
        )
        self.otlp_joined = Counter(
            PREFIX + "otlp_calls_joined",
            "Spans without content released from the join with their log records: complete, waited (the wait ended), "
            "evicted (over the cap)",
            ["why"],
            registry=r,
        )
        self.otlp_unjoined = Counter(
            PREFIX + "otlp_log_records_unjoined",
            "One-message GenAI log records that met no span: waited, evicted, or late (their call was already scored)",
            ["why"],
            registry=r,
        )
        self.otlp_join_waiting = Gauge(
            PREFIX + "otlp_join_waiting", "Calls waiting for their span or their log records", registry=r
        )

    def _register_events(self, r: CollectorRegistry) -> None:
        """Decoded events: sampled or not, and redacted before the judge and the store."""
        self.not_sampled = Counter(
            PREFIX + "events_not_sampled", "Decoded events not selected for judging", ["app"], registry=r
        )
        self.sampled = Counter(
            PREFIX + "events_sampled", "Decoded events selected for judging", ["app", "rule"], registry=r
        )
        self.redactions = Counter(
            PREFIX + "redactions",
            "Items of personal data replaced before the judge and the store, by kind",
            ["kind"],
            registry=r,
        )
        self.redaction_failures = Counter(
            PREFIX + "redaction_failures",
            "Sampled events the redactor raised on: dead-lettered (redaction_failed), never judged or stored",
            registry=r,
        )

    def _register_feedback(self, r: CollectorRegistry) -> None:
        """Users' feedback: what arrived, where its segment came from, and the answers read back and judged."""
        self.feedback_received = Counter(
            PREFIX + "feedback_received", "Feedback events decoded (thumbs, ratings)", ["source", "kind"], registry=r
        )
        self.feedback_stored = Counter(
            PREFIX + "feedback_stored",
            "Feedback rows written, by where their segment came from (feedback, scored, kafka, unresolved)",
            ["segment_source"],
            registry=r,
        )
        self.feedback_answer_reads = Counter(
            PREFIX + "feedback_answer_reads",
            "Answers looked for in Kafka for a feedback event: found, aged_out (no longer in the topic), not_found",
            ["outcome"],
            registry=r,
        )
        self.feedback_judging = Counter(
            PREFIX + "feedback_judging",
            "Negative feedback on answers: judged (read back and judged), already_judged (a live row exists), "
            "over_budget (MONITOR_FEEDBACK_JUDGE_BUDGET), no_answer (not found in the store or Kafka), erased (by "
            "`forget`), failed",
            ["outcome"],
            registry=r,
        )

    def _register_rows(self, r: CollectorRegistry) -> None:
        """The rows the judges produced, and what the shadow judge cost."""
        self.judged = Counter(
            PREFIX + "events_judged",
            "Scored rows produced (by the primary judge)",
            ["app", "judge", "status"],
            registry=r,
        )
        self.shadow_rows = Counter(
            PREFIX + "shadow_rows", "Scored rows produced by the shadow judge", ["app", "judge", "status"], registry=r
        )
        self.shadow_cost = Counter(
            PREFIX + "shadow_cost_usd",
            "Estimated USD of the shadow judge's calls (failed ones included; unpriced models add 0)",
            ["judge"],
            registry=r,
        )
        self.cache_hits = Counter(PREFIX + "verdict_cache_hits", "Events scored from the verdict cache", registry=r)

    def _register_evaluations(self, r: CollectorRegistry) -> None:
        """The scores published as OpenTelemetry evaluation records."""
        self.evaluations_published = Counter(
            PREFIX + "evaluations_published", "Scores published as gen_ai.evaluation.result records", registry=r
        )
        self.evaluations_dropped = Counter(
            PREFIX + "evaluations_dropped",
            "Scores whose evaluation record was not published (queue_full, send_failed, encode_failed: a defect, "
            "logged with its traceback); the scores are stored",
            ["reason"],
            registry=r,
        )

    def _register_writes(self, r: CollectorRegistry) -> None:
        """Writes to ClickHouse: the rows, and the traffic counts each commit waits for."""
        self.rows_written = Counter(PREFIX + "rows_written", "Rows durably inserted into ClickHouse", registry=r)
        self.rows_dropped = Counter(
            PREFIX + "rows_dropped",
            "Rows the store refused even as error rows (logged with their event id)",
            registry=r,
        )
        self.insert_failures = Counter(
            PREFIX + "insert_failures", "Failed ClickHouse insert attempts (retried)", registry=r
        )
        self.flush_seconds = Histogram(PREFIX + "flush_seconds", "Time to write one batch", registry=r)
        self.traffic_write_failures = Counter(
            PREFIX + "traffic_counts_write_failures",
            "Failed writes of the traffic counts, which hold every commit back (retried): store_outage, or bug (a "
            "defect of the monitor, logged with its traceback)",
            ["reason"],
            registry=r,
        )

    def _register_offsets(self, r: CollectorRegistry) -> None:
        """Offsets and flow: commits, events in flight, this replica's share, backpressure and lag."""
        self.commits = Counter(PREFIX + "commits", "Successful offset commits", registry=r)
        self.commit_failures = Counter(PREFIX + "commit_failures", "Offset commits rejected by the group", registry=r)
        self.in_flight = Gauge(PREFIX + "in_flight_events", "Events fetched and not yet finished", registry=r)
        self.group_share = Gauge(
            PREFIX + "group_share",
            "This replica's share of the group's judge quota and per-segment minimum: its partitions over all",
            registry=r,
        )
        self.paused = Gauge(PREFIX + "consumption_paused", "1 while consumption is paused for backpressure", registry=r)
        self.lag = Gauge(
            PREFIX + "consumer_lag", "Records behind the high-watermark", ["topic", "partition"], registry=r
        )

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

    def total(self, name: str) -> float:
        """The sum of a counter's samples over all its labels (for progress lines)."""
        return sum(
            s.value for m in self.registry.collect() if m.name == name for s in m.samples if s.name.endswith("_total")
        )
