"""Prometheus label cardinality: `app` comes from event data, so its values are capped."""

from __future__ import annotations

from collections.abc import Callable

from monitor.config import Settings
from monitor.devtools.localbroker import LocalBroker
from monitor.runtime.metrics import Metrics
from monitor.store.async_store import AsyncStore
from tests.harness import RunningPipeline, produce_values, wait_for


def _series(metrics: Metrics, name: str) -> set[tuple[tuple[str, str], ...]]:
    return {
        tuple(sorted(s.labels.items()))
        for m in metrics.registry.collect()
        if m.name == name
        for s in m.samples
        if s.name.endswith("_total")
    }


def test_app_label_keeps_the_first_n_values_then_reports_other_and_counts_it() -> None:
    """After `max_apps` distinct apps every new one is exported as `other`, and each such event is counted."""
    m = Metrics(max_apps=3)
    labels = [m.app_label(f"req-{i}") for i in range(10_000)] + [m.app_label("req-1")]
    assert labels[:3] == ["req-0", "req-1", "req-2"] and set(labels[3:-1]) == {"other"} and labels[-1] == "req-1"
    overflow = [
        s.value
        for fam in m.registry.collect()
        if fam.name == "relevancy_monitor_metric_label_overflow"
        for s in fam.samples
        if s.name.endswith("_total")
    ]
    assert overflow == [10_000 - 3]


def test_an_allow_list_admits_only_its_apps() -> None:
    """With an allow-list, only the listed apps keep their name; the rest are `other`, however few they are."""
    m = Metrics(apps=("support-bot", "travel-agent"))
    assert [m.app_label(a) for a in ("support-bot", "req-1", "travel-agent")] == [
        "support-bot",
        "other",
        "travel-agent",
    ]


async def test_a_request_id_in_app_does_not_explode_the_pipelines_series(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """200 events with 200 distinct apps produce at most max_apps + 1 `app` series per metric in a running pipeline."""
    settings = make_settings()
    values = [
        (
            f'{{"event_id": "e{i}", "app": "req-{i}", "user_message": "When did order A17 ship?", '
            f'"response": "Order A17 shipped on 3 March.", "timestamp": "2026-11-29T09:00:00Z"}}'
        ).encode()
        for i in range(200)
    ]
    await produce_values(broker.bootstrap, settings.kafka.topics[0], values)
    async with RunningPipeline(settings, async_store, metrics=Metrics(max_apps=5)) as run:
        await wait_for(lambda: _judged(run), 60, "200 events judged")
    apps = {dict(labels)["app"] for labels in _series(run.metrics, "relevancy_monitor_events_judged")}
    assert len(apps) == 6 and "other" in apps


async def _judged(run: RunningPipeline) -> bool:
    return run.counter("relevancy_monitor_events_judged") >= 200
