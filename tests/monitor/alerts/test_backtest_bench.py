"""The backtest benchmark at a tiny size, so that CI runs it: it fills a store, measures, prints and writes its
figures. No timing is asserted (the benchmark reports ratios; CI machines vary)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import backtest_speed


@pytest.mark.long(seconds=13)
def test_the_backtest_benchmark_runs_at_a_tiny_size(
    clickhouse_url: str, database: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """bench/backtest_speed.py fills a store through the insert path, times scan, check (timed once), per-step sample
    (one step) and backtest, and writes them all."""
    path = tmp_path / "backtest_speed.json"
    result = backtest_speed.main(
        days=0.25, rate=4, step="30m", sample=1, json_path=path, url=clickhouse_url, database=database, checks=1
    )
    assert json.loads(path.read_text(encoding="utf-8")) == result
    assert result["steps"] == 12 and result["rows"] > 1000 and result["per_step_sample_steps"] == 1
    for key in (
        "scan_s",
        "check_s",
        "check_x_steps_s",
        "per_step_estimate_s",
        "backtest_s",
        "ratio_to_check_x_steps",
        "ratio_to_per_step_estimate",
    ):
        assert result[key] > 0, key
    out = capsys.readouterr().out
    assert "backtest (history read once per rule)" in out and "one check (every rule once) × steps" in out
