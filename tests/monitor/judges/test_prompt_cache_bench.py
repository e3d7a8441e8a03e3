"""The prompt-cache benchmark at a tiny size, so that CI runs it: both judges, both prompts, printed and written
figures. No timing is asserted (the benchmark measures tokens and cost, not speed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import prompt_cache


def test_the_prompt_cache_benchmark_runs_at_a_tiny_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """bench/prompt_cache.py judges a few events per judge, prompt and token count (3.5 and 4.5 characters per token),
    finds only the new prompts cached at both counts, and writes it all."""
    path = tmp_path / "prompt_cache.json"
    result = prompt_cache.main(events=6, json_path=path)
    assert json.loads(path.read_text(encoding="utf-8")) == result
    assert result["min_cacheable_tokens"] == 4096 and result["chars_per_token"] == [3.5, 4.5]
    rows = {(r["judge"], r["prompt"], r["chars_per_token"]): r for r in result["rows"]}
    judges, counts = ("rubric", "statements"), (3.5, 4.5)
    assert set(rows) == {(j, p, c) for j in judges for p in ("before", "after") for c in counts}
    for judge in judges:
        for count in counts:
            before, after = rows[(judge, "before", count)], rows[(judge, "after", count)]
            assert not before["cached"] and before["cache_share_steady"] == 0
            assert before["cache_write_tokens_total"] == 0
            assert after["cached"] and after["cache_write_tokens_total"] == after["prefix_tokens"]
            assert after["cache_share_steady"] >= 0.8
            assert after["cost_per_1000_steady_usd"] < before["cost_per_1000_steady_usd"]
    out = capsys.readouterr().out
    assert "cache share" in out and "rubric at 4.5 c/tok: cost after ÷ before" in out


def test_the_prompt_cache_benchmark_measures_context_on_and_off(tmp_path: Path) -> None:
    """With context on (a 3 to 6 message history and system instructions), each judge's requests carry more prompt
    tokens than with it off, and the static prefix is still read from the cache: the context only adds uncached
    tokens after it."""
    result = prompt_cache.main(events=6, json_path=tmp_path / "prompt_cache.json")
    rows = {(r["judge"], r["context"]): r for r in result["context_rows"]}
    assert set(rows) == {(j, c) for j in ("rubric", "statements") for c in ("off", "on")}
    assert 3 <= result["context_messages_per_event"] <= 6
    for judge in ("rubric", "statements"):
        off, on = rows[(judge, "off")], rows[(judge, "on")]
        assert on["prompt_tokens_per_event"] > off["prompt_tokens_per_event"]
        assert on["cached"] and on["cache_read_tokens_per_event"] == off["cache_read_tokens_per_event"] > 0
        assert 0.5 < on["cache_share_steady"] < off["cache_share_steady"]
