"""The report's canary section: each judge's canary series under its live relevancy, so a product regression (the
live line falls, the canary holds) and a judge drift (both fall) look different, and a section with the runs."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

from monitor.report.charts import Chart, Line
from monitor.report.queries import fetch_report_data
from monitor.report.write import charts_of, write_report
from monitor.store.connection import ClickHouseStore
from tests.monitor.alerts.conftest import canary_run, insert, insert_canary, make_row
from tests.monitor.report.conftest import T0, T1, outside_references, read_page

NOON = T0 + timedelta(hours=12)


def _store_with_both_stories(store: ClickHouseStore) -> None:
    """App `shop` (judge j-shop) answers worse from noon while its judge's canary holds; app `help` (judge j-help)
    answers as before while its judge's canary scores a rubric point lower from noon, as its live rows do."""
    rows = []
    for m in range(0, 24 * 60, 5):
        t = T0 + timedelta(minutes=m)
        rows.append(make_row(t, app="shop", judge_id="j-shop", score=0.45 if t >= NOON else 0.8))
        rows.append(make_row(t, app="help", judge_id="j-help", score=0.55 if t >= NOON else 0.8))
    insert(store, rows)
    runs = []
    for h in range(24):
        at = T0 + timedelta(hours=h, seconds=5)
        runs.append(canary_run(at, judge_id="j-shop", seed=h))
        runs.append(canary_run(at, judge_id="j-help", shift=-0.25 if at >= NOON else 0.0, seed=100 + h))
    insert_canary(store, runs)


def _values(line: Line) -> list[float]:
    return [v for v in line.values if v is not None]


def _fall(line: Line) -> float:
    """How far a line's last quarter sits below its first quarter."""
    v = _values(line)
    q = max(1, len(v) // 4)
    return sum(v[:q]) / q - sum(v[-q:]) / q


def test_a_product_regression_and_a_judge_drift_look_different(store: ClickHouseStore) -> None:
    """Under each app's live lines, its judge's canary: flat for a product regression, falling with it for a judge
    drift."""
    _store_with_both_stories(store)
    charts: dict[str, Chart] = {c.key: c for c in charts_of(fetch_report_data(store, T0, T1, 900))[0]}
    shop, help_ = charts["relevancy-shop"], charts["relevancy-help"]
    for chart in (shop, help_):
        canary_panel = chart.panels[-1]
        assert (
            len(chart.panels) == 3
            and canary_panel.ylabel.startswith("canary")
            and canary_panel.y_min < 0 < (canary_panel.y_max or 0)
        )
    [shop_live], [shop_canary] = shop.panels[0].lines, shop.panels[2].lines
    [help_live], [help_canary] = help_.panels[0].lines, help_.panels[2].lines
    assert shop_canary.label == "j-shop · canary" and help_canary.label == "j-help · canary"
    assert _fall(shop_live) > 0.3 and abs(_fall(shop_canary)) < 0.05  # the product
    assert _fall(help_live) > 0.2 and _fall(help_canary) > 0.15  # the judge (a point lower, less where labels sit at 0)
    canary = charts["canary"]
    labels = [line.label for p in canary.panels for line in p.lines]
    assert {"j-shop · ρ", "j-shop · κ", "j-help · mean shift", "j-help"} <= set(labels)


def test_the_page_has_a_canary_section_with_each_judges_runs(store: ClickHouseStore, tmp_path: Path) -> None:
    """The page explains how to read the canary, draws it, and lists per judge and labelled set its runs and figures."""
    _store_with_both_stories(store)
    path = tmp_path / "report.html"
    write_report(store, T0, T1, path)
    html = read_page(path)
    section = html[html.index('<section id="canaries">') :].split("</section>")[0]
    assert "Judge canaries" in section and "the product" in section and "the judge" in section
    assert 'id="chart-canary"' in section and "<svg" in section
    assert (
        section.count("<code>j-shop</code>") == 1
        and section.count("<code>j-help</code>") == 1
        and section.count("golden_set.jsonl:test") == 2
    )
    shifts = [float(x) for x in re.findall(r'<td class="n">([+-]0\.\d{3})</td>', section)]
    assert min(shifts) < -0.15 < max(shifts)  # the drifted judge's latest mean shift is well down, the other's near 0
    assert "bottom panel is the judge&#39;s mean shift" in html
    assert outside_references(html) == []


def test_without_canary_runs_the_page_says_why(store: ClickHouseStore, tmp_path: Path) -> None:
    """No run in the range: two panels per app and a note naming ALERTS_CANARY_INTERVAL; no canary table: migrate."""
    insert(
        store,
        [make_row(T0 + timedelta(minutes=m), app="shop", judge_id="j-shop", score=0.8) for m in range(0, 600, 10)],
    )
    charts = {c.key: c for c in charts_of(fetch_report_data(store, T0, T1, 900))[0]}
    assert len(charts["relevancy-shop"].panels) == 2 and "canary" not in charts
    path = tmp_path / "r.html"
    write_report(store, T0, T1, path)
    assert "No canary run in this range" in read_page(path)
    store.command(f"DROP TABLE {store.database}.canary_runs")
    write_report(store, T0, T1, path)
    assert "predates migration 035" in read_page(path)
