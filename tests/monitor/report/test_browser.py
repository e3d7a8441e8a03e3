"""The report as a person sees it: headless Chromium (Debian's package, `make browser`) renders the file, the
screenshot is not blank, and the rendered DOM names every segment and judge and holds no outside resource."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from monitor.report import write_report
from tests.monitor.report.conftest import LEXICAL_JUDGE, STATEMENTS_JUDGE, T0, T1, Filled, outside_references

CHROMIUM = "/usr/bin/chromium"


def chromium() -> str:
    """Debian's Chromium; fails the test (never skips it) when it is not installed."""
    path = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if path is None:
        pytest.fail(
            f"{CHROMIUM} not found: run `make browser` (installs Debian's chromium package as root)", pytrace=False
        )
    return path


def headless(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium with its own profile directory (so runs never share state) and return its output."""
    argv = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={profile}",
        *args,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_chromium_renders_a_readable_report(filled: Filled, tmp_path: Path) -> None:
    """Chromium's screenshot of the report is not blank and its DOM names every app, version and judge, loading
    nothing."""
    page = tmp_path / "report.html"
    write_report(filled.store, T0, T1, page)
    shot = tmp_path / "report.png"
    headless(tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,2000", page.as_uri())
    with Image.open(shot) as im:
        rgb = im.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 24) or []
    assert rgb.size == (1280, 2000)
    ink = sum(n for n, c in colours if c != (255, 255, 255)) / (1280 * 2000)
    assert len(colours) > 200 and ink > 0.05, (len(colours), ink)

    dom = headless(tmp_path / "profile", "--dump-dom", page.as_uri()).stdout
    for needle in (
        "support",
        "search",
        ">v1<",
        ">v2<",
        ">v7<",
        STATEMENTS_JUDGE,
        LEXICAL_JUDGE,
        "Relevancy over time",
        "Judge health",
    ):
        assert needle in dom, needle
    assert dom.count("<svg") == 5  # two apps, coverage, judge health, cost
    assert outside_references(dom) == []
