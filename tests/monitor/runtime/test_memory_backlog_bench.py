"""The memory benchmark at a tiny size, so that CI runs it: a small backlog, the monitor in its own process behind a
2 s judge, RSS sampled, the embedded engine's fixed cost apart. No memory or timing figure is asserted (they vary by
machine); the test checks that the figures are there and consistent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import memory_backlog


@pytest.mark.long(seconds=25)
@pytest.mark.slow
def test_the_memory_benchmark_runs_at_a_tiny_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """bench/memory_backlog.py fills a backlog, samples the monitor's RSS while the judge holds it back, and writes it
    as printed."""
    path = tmp_path / "memory_backlog.json"
    result = memory_backlog.main(events=1000, minutes=0.25, json_path=path, interval_s=0.5)
    assert json.loads(path.read_text(encoding="utf-8")) == result
    assert result["samples"] and result["detail"] and result["consumed"] > 0 and result["peak_in_flight"] > 0
    assert result["engine_fixed_mb"] > 0 and result["rss_store_open_mb"] > result["rss_after_imports_mb"]
    assert result["own_peak_mb"] == pytest.approx(result["peak_rss_mb"] - result["engine_fixed_mb"])
    assert result["settings"]["judge_latency_s"] == 2.0 and result["settings"]["sample_rate"] == 1.0
    assert result["breakdown_end_mb"]["chdb_library"] > 0
    out = capsys.readouterr().out
    assert "embedded engine fixed cost" in out and "growth over the second half" in out


@pytest.mark.long(seconds=25)
@pytest.mark.slow
def test_the_memory_benchmark_runs_on_the_server_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With `server`, the store is a ClickHouse HTTP server in a process of its own: the monitor's process loads no
    engine (nothing to take off its peak) and imports only what the service imports (no harness, no judge SDK before
    the judge is built)."""
    result = memory_backlog.main(events=1000, minutes=0.25, json_path=tmp_path / "m.json", interval_s=0.5, server=True)
    assert result["consumed"] > 0 and result["peak_in_flight"] > 0
    assert result["engine_fixed_mb"] == 0.0 and result["own_peak_mb"] == result["peak_rss_mb"]
    assert "chdb" not in result["loaded_end"] and result["breakdown_end_mb"]["chdb_library"] == 0.0
    assert "anthropic" not in result["loaded_after_imports"] and "anthropic" in result["loaded_pipeline_built"]
    assert result["server_rss_end_mb"] > 0
    assert "no engine here" in capsys.readouterr().out


def test_every_event_of_the_backlog_has_its_own_response() -> None:
    """The backlog's responses are all different, so the verdict cache cannot serve them in place of the slow judge."""
    values = [json.loads(v) for v in memory_backlog.unique_events(400)]
    responses = [v.get("response") or v["messages"][-1]["content"][0]["text"] for v in values]
    assert len(set(responses)) == 400


def test_the_growth_slope_is_a_least_squares_fit_in_mb_per_minute() -> None:
    """RSS rising 1 MB every 6 s is a growth of 10 MB/min; a flat series is 0."""
    rising = [{"t_s": 6.0 * i, "rss_mb": 100.0 + i} for i in range(10)]
    assert memory_backlog.slope_mb_per_min(rising) == pytest.approx(10.0)
    assert memory_backlog.slope_mb_per_min([{"t_s": float(i), "rss_mb": 5.0} for i in range(5)]) == 0.0
