"""The judge-overhead benchmark at a tiny size, so that CI runs it: both paths against the fake in its own process,
interleaved rounds, printed and written figures. No timing is asserted (the ratios are for people; CI machines vary)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import judge_overhead


def test_the_judge_overhead_benchmark_runs_at_a_tiny_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """bench/judge_overhead.py runs both paths for two interleaved rounds each and writes every round's figures as
    printed."""
    path = tmp_path / "judge_overhead.json"
    result = judge_overhead.main(rounds=2, requests=32, json_path=path)
    assert json.loads(path.read_text(encoding="utf-8")) == result
    assert result["concurrency"] == 64 and result["latency_s"] == 0.2 and result["requests_per_round"] == 32
    for name in ("sdk", "judge"):
        assert len(result["runs"][name]) == 2
        for run in result["runs"][name]:
            assert run["requests_per_s"] > 0 and run["cpu_ms_per_request"] > 0 and run["gc_ms_per_request"] >= 0
    assert (
        len(result["rate_ratios"]) == len(result["cpu_ratios"]) == 2
        and result["rate_ratio"] > 0
        and result["cpu_ratio"] > 0
    )
    out = capsys.readouterr().out
    assert "rate ratio judge ÷ SDK" in out and "CPU ratio judge ÷ SDK" in out
