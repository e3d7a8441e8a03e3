"""The metrics list in docs/metrics.md is the one the code's metric objects generate: every metric the service and
the alert evaluator register is in it, and the check notices when the code or the page drifts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter

from monitor.alerts.prometheus import AlertMetrics
from monitor.config import Settings, load_settings
from monitor.devtools import metrics_reference
from monitor.devtools.metrics_reference import METRICS_REFERENCE, main, render
from monitor.judges.base import Judge
from monitor.judges.factory import build_judge
from monitor.runtime.kafka_close import close_clients
from monitor.runtime.metrics import Metrics
from monitor.runtime.service import build_pipeline, build_shadow_judge
from monitor.store.async_store import AsyncStore
from monitor.store.connection import ClickHouseStore
from tests.test_readme import assert_markers_out_of_order_are_refused, assert_stale_check_says_what_to_run

ROOT = Path(__file__).resolve().parents[1]
METRICS_PAGE = ROOT / "docs" / "metrics.md"
FIX = "run python -m monitor.devtools.metrics_reference --write docs/metrics.md"


def _page() -> str:
    return METRICS_PAGE.read_text(encoding="utf-8")


def _exposed(registry: CollectorRegistry) -> set[str]:
    """The names a Prometheus query uses for the registry's metrics: a counter's with `_total`."""
    return {f"{m.name}_total" if m.type == "counter" else m.name for m in registry.collect()}


def test_docs_metrics_md_matches_the_metric_objects() -> None:
    """docs/metrics.md between the markers is exactly what the metric objects render (regenerate with --write)."""
    assert METRICS_REFERENCE.splice(_page(), render()) == _page(), FIX


@pytest.fixture
async def service_metrics(tmp_path: Path) -> AsyncIterator[Metrics]:
    """The metrics of a service built as `run_service` builds it, with an LLM judge and an LLM shadow judge (a
    pipeline never started: neither Kafka nor the store is reached)."""
    settings: Settings = load_settings(
        judge="rubric",
        shadow_judge="statements",
        anthropic_api_key="sk-ant-never-sent",
        clickhouse_url=f"chdb://{tmp_path}/chdb",
        metrics_port=0,
    )
    judge, shadow = build_judge(settings.judge), build_shadow_judge(settings)
    assert shadow is not None
    metrics = Metrics(max_apps=settings.process.metrics_max_apps, apps=tuple(settings.process.metrics_apps))
    store = AsyncStore(ClickHouseStore(settings.store.url, settings.store.database, settings.store.table))
    pipeline = build_pipeline(settings, judge, store, metrics, shadow_judge=shadow)
    yield metrics
    await close_clients(pipeline.source, pipeline.producer)  # never started, but aiokafka warns of unclosed clients
    judges: tuple[Judge, ...] = (judge, shadow)
    for j in judges:
        await j.aclose()


async def test_every_metric_the_service_registers_is_listed(service_metrics: Metrics) -> None:
    """Each metric of the service's registry (pipeline, probes' health gauges, both judges' API and prompt-cache
    counters) appears in docs/metrics.md under the name a query uses."""
    names = _exposed(service_metrics.registry)
    assert {"relevancy_monitor_judge_cache_read_tokens_total", "relevancy_monitor_ready"} <= names  # built in full
    assert sorted(n for n in names if f"| `{n}` |" not in _page()) == []


def test_every_metric_the_alert_evaluator_registers_is_listed() -> None:
    """Each metric of the alert evaluator's registry appears in docs/metrics.md."""
    names = _exposed(AlertMetrics().registry)
    assert names and sorted(n for n in names if f"| `{n}` |" not in _page()) == []


def test_rows_show_type_labels_when_and_help() -> None:
    """A row gives the type, the label names, the configuration that exports it and the help text."""
    block = render()
    assert (
        "| `relevancy_monitor_judge_cache_read_tokens_total` | counter | `judge`, `model` | with an LLM judge | "
        "Prompt tokens the API read from the prompt cache" in block
    )
    assert (
        "| `relevancy_monitor_judge_latency_seconds` | histogram (`_bucket`, `_sum`, `_count`) | `judge` | always |"
        in (block)
    )
    assert (
        "| `relevancy_monitor_shadow_judge_prompt_tokens_total` | counter | `judge`, `model` | with an LLM shadow"
        in (block)
    )
    assert "| `relevancy_monitor_alert_firing` | gauge | `rule`, `severity` | Segments firing per rule |" in block


class _MoreMetrics(Metrics):
    """The service's metrics with one more counter, as a developer would add it."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        Counter(  # registered, so the reference must list it
            "relevancy_monitor_new_things", "Things counted without regenerating", ["kind"], registry=self.registry
        )


def _copy(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "metrics.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_metric_added_to_the_code_fails_the_check_until_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A metric added without regenerating makes `--check` exit 1 with one line; `--write` lists it, then it passes."""
    path = _copy(tmp_path, _page())
    monkeypatch.setattr(metrics_reference, "Metrics", _MoreMetrics)
    assert main(["--check", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "out of date" in err and f"--write {path}" in err, err
    assert main(["--write", str(path)]) == 0
    assert "| `relevancy_monitor_new_things_total` | counter | `kind` | always | Things counted" in path.read_text()
    assert main(["--check", str(path)]) == 0


def test_check_exits_1_with_one_line_on_a_hand_edited_page_and_write_repairs_it(tmp_path: Path) -> None:
    """`--check` on a page whose list was edited exits 1 with one line saying what to run; `--write` restores it."""
    edited = _page().replace("| Records fetched from Kafka |", "| Records read from Kafka |")
    assert edited != _page()
    path = _copy(tmp_path, edited)
    assert_stale_check_says_what_to_run("monitor.devtools.metrics_reference", path)
    assert main(["--write", str(path)]) == 0
    assert path.read_text(encoding="utf-8") == _page()


def test_missing_markers_are_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file without both markers, in order, is refused with one line (exit 2), and nothing is written."""
    assert_markers_out_of_order_are_refused(main, METRICS_REFERENCE, tmp_path / "metrics.md", capsys)


def test_check_defaults_to_docs_metrics_md(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a file, `--check` reads docs/metrics.md (from the repository's root) and finds it current."""
    monkeypatch.chdir(ROOT)
    assert main(["--check"]) == 0
