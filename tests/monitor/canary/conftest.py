"""Fixtures of the canary tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.calibration.labels import golden_path


@pytest.fixture
def single_turn_golden(tmp_path: Path) -> Path:
    """The shipped golden set without its multi-turn cases, as a labels file: for runs of the rubric judge against
    the fake Messages API, whose brain reads no context (a word-overlap stand-in), so that the multi-turn cases would
    put its agreement under `canary_agreement_floor` and the drift those tests check would not be alone."""
    lines = golden_path().read_text(encoding="utf-8").splitlines()
    path = tmp_path / "golden_set.jsonl"
    path.write_text("\n".join(x for x in lines if "context" not in json.loads(x)) + "\n", encoding="utf-8")
    return path
