"""The UI pages benchmark (`bench/ui_pages.py`) end to end on a tiny store, so that CI keeps it working: it fills the
store server-side, writes alert state and labels, and gets every page with 200. No time is asserted (speed targets
belong to the benchmark's own run, on a quiet machine)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import monitor_env

REPO = Path(__file__).resolve().parents[2]
PAGES = ("overview", "alert", "explore, first page", "explore, filtered", "answer", "review, next item", "agreement")


def test_a_tiny_run_fills_the_store_and_times_every_page(tmp_path: Path) -> None:
    """20,000 rows: every row inserted, the rollup filled by its materialized view, 300 labels, every page answered
    200 with a body, and each page's figures present (its time, its ratios to 1 s and to the reference query; one
    timed request a page after its warm-up)."""
    out = tmp_path / "ui_pages.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.ui_pages", "--rows", "20000", "--repeats", "1", "--json", str(out)],
        cwd=REPO,
        env=monitor_env(),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["rows"] == 20_000 and result["rollup_1m_rows"] > 0 and result["labels"] == 300
    assert result["segments"] == 50 and result["reference_s"] > 0
    assert tuple(result["pages"]) == PAGES
    for name, page in result["pages"].items():
        assert page["status"] == 200 and page["bytes"] > 1000, (name, page)
        assert page["s"] > 0 and page["ratio_to_reference"] == pytest.approx(page["s"] / result["reference_s"])
    for name in PAGES:
        assert name in done.stdout, done.stdout
