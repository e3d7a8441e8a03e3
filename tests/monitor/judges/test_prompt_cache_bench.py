"""The prompt-cache benchmark at a tiny size, so that CI runs it: both judges, both prompts, printed and written
figures. No timing is asserted (the benchmark measures tokens and cost, not speed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import prompt_cache


def test_the_prompt_cache_benchmark_runs_at_a_tiny_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """bench/prompt_cache.py judges a few events per judge and prompt, finds only the new prompts cached, and writes it
    all."""
    path = tmp_path / "prompt_cache.json"
    result = prompt_cache.main(events=6, json_path=path)
    assert json.loads(path.read_text(encoding="utf-8")) == result
    assert result["min_cacheable_tokens"] == 4096 and result["chars_per_token"] == 3.5
    rows = {(r["judge"], r["prompt"]): r for r in result["rows"]}
    assert set(rows) == {(j, p) for j in ("rubric", "statements") for p in ("before", "after")}
    for judge in ("rubric", "statements"):
        before, after = rows[(judge, "before")], rows[(judge, "after")]
        assert not before["cached"] and before["cache_share_steady"] == 0 and before["cache_write_tokens_total"] == 0
        assert after["cached"] and after["cache_write_tokens_total"] == after["prefix_tokens"]
        assert after["cache_share_steady"] >= 0.8
        assert after["cost_per_1000_steady_usd"] < before["cost_per_1000_steady_usd"]
    out = capsys.readouterr().out
    assert "cache share" in out and "rubric: cost after ÷ before" in out
