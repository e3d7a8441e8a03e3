"""The OpenAI-compatible judge-overhead benchmark at a tiny size, so that CI runs it: the judge path and the `openai`
SDK alone against the fake Chat Completions server in its own process, interleaved rounds, the probe check, printed
and written figures. No timing is asserted (the ratios are for people; CI machines vary)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import judge_overhead_openai


def test_the_openai_judge_overhead_benchmark_runs_at_a_tiny_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """bench/judge_overhead_openai.py runs both paths for two interleaved rounds with equal request bodies, sees the
    probe happen exactly once under `auto`, and writes every round's figures as printed."""
    path = tmp_path / "judge_overhead_openai.json"
    result = judge_overhead_openai.main(rounds=2, requests=32, json_path=path)
    assert json.loads(path.read_text(encoding="utf-8")) == result
    assert result["concurrency"] == 64 and result["latency_s"] == 0.2 and result["requests_per_round"] == 32
    assert result["provider"] == "openai" and result["structured_output"] == "json_schema"
    sizes = result["mean_body_bytes"]
    assert sizes["sdk"] == sizes["judge"] > 0
    for name in ("sdk", "judge"):
        assert len(result["runs"][name]) == 2
        for run in result["runs"][name]:
            assert run["requests_per_s"] > 0 and run["cpu_ms_per_request"] > 0 and run["gc_ms_per_request"] >= 0
    assert len(result["ratios"]["judge"]["rate"]) == 2
    assert result["rate_ratio_min"] <= result["rate_ratio"] <= result["rate_ratio_max"]
    probe = result["probe"]
    assert probe["requests"] == 64 + 1 and probe["probe_positions"] == [0] and probe["chosen_mode"] == "json_schema"
    out = capsys.readouterr().out
    assert "rate ratio judge ÷ SDK" in out and "the probe happens once" in out
