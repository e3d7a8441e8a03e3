"""The pipeline throughput benchmark at a tiny size, so that CI runs it: the bare loop and every monitor scenario over
one backlog, the table printed and the figures written. No timing is asserted (the benchmark reports ratios; CI
machines vary, and a tiny backlog may finish within one fetch, leaving no steady-state window)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import pipeline_throughput
from monitor.devtools.localbroker import LocalBroker


@pytest.mark.long(seconds=49)
async def test_the_throughput_benchmark_runs_at_a_tiny_size(
    broker: LocalBroker, clickhouse_url: str, database: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """bench/pipeline_throughput.py runs each scenario once on the tiny backlog, prints its table and writes the same
    figures."""
    path = tmp_path / "pipeline_throughput.json"
    n = pipeline_throughput.TINY_EVENTS
    result = await pipeline_throughput.main(
        n, rounds=1, json_path=path, bootstrap=broker.bootstrap, url=clickhouse_url, prefix=database, quiet=False
    )
    assert json.loads(path.read_text(encoding="utf-8")) == result
    assert result["events"] == n and result["rounds"] == 1
    for scenario in pipeline_throughput.SCENARIOS:
        (run,) = result[scenario]["runs"]
        assert 0 <= run["window_events"] <= n and result[scenario]["ratios_per_round"] == [
            result[scenario]["ratio_to_bare"]
        ]
    assert result["bare"]["events_per_s"] > 0
    out = capsys.readouterr().out
    assert "÷ bare" in out and all(label in out for label in pipeline_throughput.LABELS.values())
