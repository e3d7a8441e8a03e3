"""bench/round_time.py at a tiny size, so that CI runs it: it times detector rounds, means-only rounds and the numpy
pass on the same segments, prints them and writes the figures. No timing is asserted (CI machines vary)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import round_time
from monitor.alerts.rules import load_rules


def test_the_round_time_benchmark_runs_at_a_tiny_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Twelve segments (two apps of five arms, one of two) for 8 h: every segment is in the timed round, each figure
    is measured, and the JSON holds what was returned."""
    path = tmp_path / "round_time.json"
    result = round_time.main(segments=12, hours=8.0, rounds=2, json_path=path)
    assert json.loads(path.read_text(encoding="utf-8")) == result
    assert result["segments"] == 12 and result["window_h"] == 6
    for key in ("detector_round_s", "means_only_round_s", "numpy_pass_s", "ratio_to_means_only", "ratio_to_numpy_pass"):
        assert result[key] > 0, key
    out = capsys.readouterr().out
    assert "means-only round, same segments" in out and "numpy LLR pass" in out


def test_the_means_only_rule_keeps_the_detectors_segments_and_windows() -> None:
    """The limit's rule reads the same segments, window and trailing baseline as the shipped detector rule, with a
    test of the mean instead of the detector."""
    shipped = load_rules()
    rule = next(r for r in shipped.rules if r.name == "relevancy_drop")
    plain = round_time.means_only(rule)
    assert plain.detector is None and plain.condition.change is not None
    assert (plain.segment_by, plain.window, plain.baseline) == (rule.segment_by, rule.window, rule.baseline)
