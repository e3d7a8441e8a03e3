"""Stored text is inert on the page: a script or an event handler planted in an app name, a prompt version, a
conversation, a verdict, an error or an alert stays text, and the charts' SVG carries no element or attribute of it."""

from __future__ import annotations

import uuid
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path

from monitor.alerts.evaluator import AlertState
from monitor.alerts.state import StateStore
from monitor.report import write_report
from monitor.report.charts import Chart, Line, Mark, Panel, Span
from monitor.report.svg import render_svg
from monitor.store.connection import ClickHouseStore
from tests.monitor.report.conftest import STATEMENTS_JUDGE, T0, T1, make_row

SCRIPT = "<script>alert(1)</script>"
HANDLER = "<img src=x onerror=alert(1)>"
BOTH = f"{SCRIPT}{HANDLER}"


class _Page(HTMLParser):
    """Every element and attribute the HTML parser creates, and the page's text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attributes: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes += [name for name, _ in attrs]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parsed(html: str) -> _Page:
    """`html` as the browser's tokenizer reads it (html.parser follows the same rules for tags and attributes)."""
    page = _Page()
    page.feed(html)
    page.close()
    return page


def assert_inert(html: str) -> _Page:
    """No element the hostile text would make (script, img), no event-handler attribute; the page as parsed."""
    page = parsed(html)
    assert "script" not in page.tags and "img" not in page.tags, sorted(set(page.tags))
    assert not [a for a in page.attributes if a.startswith("on")], sorted(set(page.attributes))
    return page


def _hostile_store(store: ClickHouseStore) -> None:
    """A day of one app whose name, prompt version, conversations, reasoning, statements, verdicts, reasons and
    errors hold a script and an event handler, with an alert firing on it whose rule and note hold them too."""
    app = f"shop {BOTH}"
    rows = []
    for m in range(0, 24 * 60, 20):
        at = T0 + timedelta(minutes=m)
        row = make_row(
            at,
            app=app,
            prompt_version=f"v1 {HANDLER}" if m < 12 * 60 else f"v2 {SCRIPT}",
            judge_id=STATEMENTS_JUDGE,
            score=0.9 if m < 12 * 60 else 0.3,
            question=f"Where is my parcel? {BOTH}",
            response=f"We also sell gift cards {BOTH}",
            statements=((f"gift cards {SCRIPT}", HANDLER, f"an upsell {BOTH}"),),
        )
        rows.append(row.model_copy(update={"reasoning": f"off topic {BOTH}"}))
    rows.append(
        make_row(
            T0 + timedelta(hours=3), app=app, prompt_version="v1", judge_id=STATEMENTS_JUDGE, score=None, error=BOTH
        )
    )
    store.insert_rows(rows, uuid.uuid4().hex)
    firing = AlertState(
        f"relevancy_drop {SCRIPT}",
        (("app", app), ("prompt_version", f"v2 {SCRIPT}")),
        "firing",
        since=T0 + timedelta(hours=12),
        fired_at=T0 + timedelta(hours=12, minutes=30),
        value=0.3,
        baseline=0.9,
        severity=HANDLER,
        note=BOTH,
    )
    StateStore(store, writer="test").save([firing], T1)


def test_hostile_stored_text_is_text_on_the_page(store: ClickHouseStore, tmp_path: Path) -> None:
    """A report over rows and an alert holding `<script>` and an `onerror` handler in every text it shows creates no
    script or img element and no event-handler attribute, and shows each planted text as text."""
    _hostile_store(store)
    path = tmp_path / "hostile.html"
    write_report(store, T0, T1, path)
    page = assert_inert(path.read_text(encoding="utf-8"))
    text = "".join(page.text)
    for planted in (
        f"app shop {BOTH}",  # the chart's heading
        f"Where is my parcel? {BOTH}",
        f"We also sell gift cards {BOTH}",
        f"off topic {BOTH}",
        f"gift cards {SCRIPT}",
        f"an upsell {BOTH}",
        f"relevancy_drop {SCRIPT}",
        f"v2 {SCRIPT}",
    ):
        assert planted in text, planted
    assert text.count(BOTH) >= 8 and text.count(HANDLER) >= 12


def test_the_check_finds_an_unescaped_script_or_handler() -> None:
    """The inertness check is not vacuous: a raw script, a raw img with a handler, and an svg onload each fail it."""
    for raw in (SCRIPT, HANDLER, "<svg onload=alert(1)>"):
        try:
            assert_inert(f"<p>{raw}</p>")
        except AssertionError:
            continue
        raise AssertionError(f"not caught: {raw}")


def test_chart_svg_holds_no_element_attribute_or_text_of_the_names_it_draws() -> None:
    """Labels, marks and alert spans named with a script and a handler are drawn as glyph paths: the SVG has no
    element, attribute or text content of theirs (only matplotlib's own style sheet is text)."""
    grid = tuple(T0 + timedelta(hours=h) for h in range(4))
    chart = Chart(
        f"relevancy-{BOTH}",
        BOTH,
        grid,
        3600,
        (T0, T0 + timedelta(hours=4)),
        (Panel(f"score {SCRIPT}", (Line(f"v1 {BOTH}", (0.5, None, 0.7, 0.9)),), y_max=1.0),),
        spans=(Span(f"rule {BOTH}", grid[1], grid[2]),),
        marks=(Mark(f"{HANDLER} first seen", grid[1]),),
    )
    svg = render_svg(chart)
    page = assert_inert(svg)
    assert not {"foreignobject", "a", "iframe", "image"} & set(page.tags)
    assert [t.strip() for t in page.text if t.strip()] == ["*{stroke-linejoin: round; stroke-linecap: butt}"]
    assert "alert" not in svg and "script" not in svg
