"""The report as a person sees it: headless Chromium (Debian's package, `make browser`) renders the file, the
screenshot is not blank, and the rendered DOM names every segment and judge and holds no outside resource."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from matplotlib import font_manager
from matplotlib.ft2font import FT2Font
from PIL import Image

from monitor.alerts.evaluator import AlertState
from monitor.alerts.state import StateStore
from monitor.report import write_report
from monitor.store.connection import ClickHouseStore
from tests.monitor.report.conftest import (
    LEXICAL_JUDGE,
    STATEMENTS_JUDGE,
    T0,
    T1,
    Filled,
    make_row,
    outside_references,
)

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


# Run in the page by Chromium: every text and legend of each chart against the chart's own box, each chart's legends
# against each other, legends that end a name in "…" (text is drawn as glyph paths: the ellipsis glyph's id), and the
# page's one-line texts against their elements. The result lands on <body>.
_MEASURE = """
<script>
const out = {charts: 0, texts: 0, overflow: [], overlaps: [], cut: [], html: []};
const inside = (r, box) => r.left >= box.left - 1 && r.right <= box.right + 1 && r.top >= box.top - 1
  && r.bottom <= box.bottom + 1;
const meets = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1;
for (const svg of document.querySelectorAll('.chart svg')) {
  out.charts += 1;
  const box = svg.getBoundingClientRect();
  const chart = svg.closest('.chart').id;
  for (const g of svg.querySelectorAll('g[id^="text_"], g[id^="legend_"]')) {
    const r = g.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    out.texts += 1;
    const past = [Math.round(r.right - box.right), Math.round(r.bottom - box.bottom)];
    if (!inside(r, box)) out.overflow.push([chart, g.id, ...past]);
  }
  const legends = [...svg.querySelectorAll('g[id^="legend_"]')].map(g => [g.id, g.getBoundingClientRect()]);
  for (const use of svg.querySelectorAll('g[id^="legend_"] use')) {
    if ((use.getAttribute('xlink:href') || use.getAttribute('href') || '').endsWith('-ELLIPSIS')) out.cut.push(chart);
  }
  for (let i = 0; i < legends.length; i++)
    for (let j = i + 1; j < legends.length; j++)
      if (meets(legends[i][1], legends[j][1])) out.overlaps.push([chart, legends[i][0], legends[j][0]]);
}
for (const el of document.querySelectorAll('h1, h2, h3, .headline, .meta, .kpi, th')) {
  if (el.scrollWidth > el.clientWidth + 1) out.html.push(el.tagName + ': ' + el.textContent.slice(0, 60));
}
document.body.setAttribute('data-measure', JSON.stringify(out));
</script>
"""


def _ellipsis_glyph() -> int:
    """The index of "…" in the font the charts are drawn with: matplotlib names each glyph path after it."""
    return int(FT2Font(font_manager.findfont("DejaVu Sans")).get_char_index(0x2026))


def measure(page: Path, profile: Path) -> dict[str, Any]:
    """Open a copy of `page` with the measuring script in headless Chromium and return what it found."""
    probe = page.with_name(f"measure-{page.name}")
    script = _MEASURE.replace("ELLIPSIS", f"{_ellipsis_glyph():x}")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", script + "</body>"), encoding="utf-8")
    dom = headless(profile, "--window-size=1280,2000", "--virtual-time-budget=5000", "--dump-dom", probe.as_uri())
    found = re.search(r'data-measure="([^"]*)"', dom.stdout)
    assert found, dom.stdout[-2000:]
    result: dict[str, Any] = json.loads(html.unescape(found.group(1)))
    return result


def _crowded(store: ClickHouseStore) -> None:
    """An app with eight long-named prompt versions, a rollout, and six long-named alert episodes on one chart: more
    legend than a panel of the usual height holds."""
    rows = []
    for h in range(48):
        at = T0 + timedelta(minutes=30 * h)
        for v in range(8 if h >= 4 else 7):
            version = f"checkout-flow-2026-11-rewrite-candidate-{v}"
            rows.append(
                make_row(
                    at,
                    app="customer-support-assistant-eu-west",
                    prompt_version=version,
                    judge_id=STATEMENTS_JUDGE,
                    score=0.4 if v == 7 else 0.9,
                )
            )
    store.insert_rows(rows, uuid.uuid4().hex)
    segment = (
        ("app", "customer-support-assistant-eu-west"),
        ("model", "claude-haiku-4-5"),
        ("prompt_version", "checkout-flow-2026-11-rewrite-candidate-7"),
        ("judge_id", STATEMENTS_JUDGE),
    )
    states = [
        AlertState(rule, segment, state, since=T0 + timedelta(hours=h), fired_at=fired, severity="page")
        for rule, state, h, fired in (
            ("relevancy_drop_against_the_previous_prompt_version", "firing", 3, T0 + timedelta(hours=4)),
            ("low_score_share_rise_against_the_previous_prompt_version", "firing", 4, T0 + timedelta(hours=5)),
            ("relevancy_floor_for_the_checkout_flow_candidates", "pending", 20, None),
            ("p10_drop_against_the_previous_prompt_version", "firing", 6, T0 + timedelta(hours=7)),
            ("statements_irrelevant_share_rise_on_long_answers", "firing", 8, T0 + timedelta(hours=9)),
            ("relevancy_drop_for_the_eu_west_region_overnight", "firing", 10, T0 + timedelta(hours=11)),
        )
    ]
    StateStore(store, writer="test").save(states, T1)


@pytest.mark.long(seconds=12)
def test_no_legend_or_label_overflows_its_box(filled: Filled, store: ClickHouseStore, tmp_path: Path) -> None:
    """In Chromium, every chart text and legend lies inside its chart, no legend cuts a long name short (it wraps),
    no two legends of a chart overlap, and no heading or one-line text of the page overflows its element."""
    _crowded(store)
    for name, source, span in (("filled", filled.store, (T0, T1)), ("crowded", store, (T0, T0 + timedelta(days=1)))):
        page = tmp_path / f"{name}.html"
        write_report(source, *span, page)
        found = measure(page, tmp_path / "profile")
        assert found["charts"] >= 4 and found["texts"] > 100, (name, found)
        assert found["overflow"] == [] and found["overlaps"] == [] and found["html"] == [], (name, found)
        assert found["cut"] == [], (name, found)
