"""The latency benchmark at a tiny size, so that CI runs it: a steady producer in its own process, the monitor with the
lexical judge, per-row visible times from the store. No latency is asserted (it depends on the machine); the test
checks that every produced event is measured and the stages add up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import latency


@pytest.mark.long(seconds=27)
@pytest.mark.slow
def test_the_latency_benchmark_runs_at_a_tiny_size(
    clickhouse_url: str, database: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """bench/latency.py produces at a steady rate, finds every row readable when its insert returned, and writes it as
    printed."""
    path = tmp_path / "latency.json"
    result = latency.main(
        rate=50.0, seconds=4.0, json_path=path, batch_settings=(None,), url=clickhouse_url, database=database
    )
    assert json.loads(path.read_text(encoding="utf-8")) == result
    (run,) = result["runs"]
    assert run["produced"] == 200 and run["rows_seen"] == 200 and run["rows_measured"] > 0
    assert result["bare_consumer"]["received"] == 200 and result["bare_consumer"]["produce_to_fetched"]["n"] > 0
    assert run["visible_when_insert_returns"] is True
    assert run["batch_max_rows"] == 1000 and run["batch_max_seconds"] == 1.0 and run["batches"] >= 1
    total, scored, visible = run["produce_to_visible"], run["produce_to_scored"], run["scored_to_visible"]
    assert total["n"] == scored["n"] == visible["n"] == run["rows_measured"]
    assert 0 < scored["p50_ms"] <= total["p50_ms"] and visible["p50_ms"] >= 0
    out = capsys.readouterr().out
    assert "produce → visible" in out and "1000 / 1" in out
