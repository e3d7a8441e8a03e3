"""The metrics reference: every Prometheus metric the monitor (`run`) and the alert evaluator (`alerts run`) export,
with its type, labels and help text, rendered from the metric objects the code registers into docs/metrics.md between
two markers, so the list cannot fall behind the code.

    python -m monitor.devtools.metrics_reference --write   # regenerate the reference in docs/metrics.md
    python -m monitor.devtools.metrics_reference --check   # exit 1 if docs/metrics.md and the code disagree

The monitor's registry is built the way the service builds it: `Metrics`, the health gauges of the probes, and the
judges' API counters (`JudgingMetrics.watch_judge`), which depend on the configuration: some are exported only with
an LLM judge or a shadow judge, and the reference says so."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from monitor.alerts.prometheus import AlertMetrics
from monitor.devtools.config_reference import GeneratedBlock
from monitor.judges.base import JudgeInfo, Judgement
from monitor.runtime.health import HealthGauges
from monitor.runtime.metrics import Metrics
from schemas.events import Turn

START_MARKER = "<!-- metrics-reference:start -->"
END_MARKER = "<!-- metrics-reference:end -->"
DEFAULT_FILE = Path("docs/metrics.md")  # from the repository's root, where the commands are run

_SUFFIXES = {"counter": "_total"}  # what Prometheus queries: a counter's samples carry `_total`, its family does not
_TYPES = {"histogram": "histogram (`_bucket`, `_sum`, `_count`)", "summary": "summary (`_sum`, `_count`)"}


@dataclass(frozen=True, slots=True)
class MetricDoc:
    """One metric as the reference shows it: the name a query uses, type, label names, help text, and when the
    monitor exports it (`always`, or the setting that adds it)."""

    name: str
    type: str
    labels: tuple[str, ...]
    help: str
    exported: str = "always"


@dataclass(frozen=True, slots=True)
class _DescribedJudge:
    """A judge that only describes itself: `watch_judge` reads its identity and (empty) API counters, and it is
    never called."""

    info: JudgeInfo
    stats: Mapping[str, int] = field(default_factory=dict)
    rate_limited: int = 0

    async def judge(self, question: str, response: str, *, context: Sequence[Turn] = (), system: str = "") -> Judgement:
        """Never called: the reference only registers metrics."""
        raise NotImplementedError("a judge that only describes its metrics")

    async def aclose(self) -> None:
        """Nothing to release."""


_HEURISTIC = _DescribedJudge(JudgeInfo("lexical", "", "lexical-reference", heuristic=True))
_LLM = _DescribedJudge(JudgeInfo("rubric", "a-model", "rubric-reference", provider="anthropic"))


class _RecordingRegistry(CollectorRegistry):
    """A registry that keeps its collectors in the order they were registered, so that their label names can be read
    (prometheus_client lists none for a labelled metric that has no series yet)."""

    def __init__(self) -> None:
        super().__init__()
        self.collectors: list[Collector] = []

    def register(self, collector: Collector) -> None:
        """Register `collector` and keep it."""
        super().register(collector)
        self.collectors.append(collector)


def _service_registry(primary: _DescribedJudge, shadow: _DescribedJudge | None) -> _RecordingRegistry:
    # As `monitor.runtime.service` does: the pipeline's metrics, the probes' health gauges, then watch_judge per judge.
    registry = _RecordingRegistry()
    metrics = Metrics(registry)
    HealthGauges(registry)
    metrics.watch_judge(primary)
    if shadow is not None:
        metrics.watch_judge(shadow, shadow=True)
    return registry


# The monitor's configurations, each adding metrics to the one before; a metric is listed with the first that has it.
SERVICE_CONFIGURATIONS: tuple[tuple[str, _DescribedJudge, _DescribedJudge | None], ...] = (
    ("always", _HEURISTIC, None),
    ("with an LLM judge", _LLM, None),
    ("with `MONITOR_SHADOW_JUDGE`", _LLM, _HEURISTIC),
    ("with an LLM shadow judge", _LLM, _LLM),
)


def _labels(collector: Collector, family: Metric) -> tuple[str, ...]:
    # prometheus_client has no public accessor for label names: a wrapper (Counter, Gauge, ...) and a metric family
    # built with `labels=` both keep them in `_labelnames`.
    names = collector._labelnames if isinstance(collector, MetricWrapperBase) else getattr(family, "_labelnames", ())
    return tuple(str(n) for n in names)


def metric_docs(registry: _RecordingRegistry, exported: str = "always") -> list[MetricDoc]:
    """Every metric the registry's collectors export, in registration order."""
    docs = []
    for collector in registry.collectors:
        families: Iterable[Metric]
        families = collector.describe() if isinstance(collector, MetricWrapperBase) else collector.collect()
        for family in families:
            docs.append(
                MetricDoc(
                    name=f"{family.name}{_SUFFIXES.get(family.type, '')}",
                    type=_TYPES.get(family.type, family.type),
                    labels=_labels(collector, family),
                    help=family.documentation,
                    exported=exported,
                )
            )
    return docs


def service_docs() -> list[MetricDoc]:
    """The monitor's metrics, by name, each with the first configuration that exports it."""
    found: dict[str, MetricDoc] = {}
    for exported, primary, shadow in SERVICE_CONFIGURATIONS:
        for doc in metric_docs(_service_registry(primary, shadow), exported):
            found.setdefault(doc.name, doc)
    return sorted(found.values(), key=lambda d: d.name)


def evaluator_docs() -> list[MetricDoc]:
    """The alert evaluator's metrics, by name."""
    registry = _RecordingRegistry()
    AlertMetrics(registry)
    return sorted(metric_docs(registry), key=lambda d: d.name)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(docs: Sequence[MetricDoc], *, with_exported: bool) -> list[str]:
    head = ["metric", "type", "labels", *(["exported"] if with_exported else []), "meaning"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for d in docs:
        labels = ", ".join(f"`{n}`" for n in d.labels) or "none"
        cells = [f"`{d.name}`", d.type, labels, *([d.exported] if with_exported else []), _cell(d.help)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def render() -> str:
    """The markdown between the markers: the monitor's metrics, then the alert evaluator's."""
    return (
        "\n".join(
            [
                "<!-- generated from the metric objects the code registers by "
                f"`python -m monitor.devtools.metrics_reference --write {DEFAULT_FILE}`: "
                "edit the help texts there, not here -->",
                "",
                "### The monitor (`relevancy-monitor run`, `/metrics` on `MONITOR_METRICS_PORT`)",
                "",
                *_table(service_docs(), with_exported=True),
                "",
                "### The alert evaluator (`relevancy-monitor alerts run`, `/metrics` on `ALERTS_METRICS_PORT`)",
                "",
                *_table(evaluator_docs(), with_exported=False),
            ]
        )
        + "\n"
    )


METRICS_REFERENCE = GeneratedBlock(
    "monitor.devtools.metrics_reference", "the metrics reference", START_MARKER, END_MARKER, DEFAULT_FILE, render
)


def main(argv: Sequence[str] | None = None) -> int:
    """Write the metrics reference into docs/metrics.md (or FILE), or check it (exit 1 when it is out of date)."""
    return METRICS_REFERENCE.main(argv)


if __name__ == "__main__":
    sys.exit(main())
