"""The report's story read from a store: the default range, rollouts first seen, the lead change's figures and zoom,
and worst examples from the segment that fired, one per answer."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

from monitor.alerts.evaluator import AlertState
from monitor.alerts.state import StateStore
from monitor.report import write_report
from monitor.report.queries import fetch_report_data
from monitor.report.write import charts_of
from monitor.store.connection import ClickHouseStore
from tests.monitor.report.conftest import LEXICAL_JUDGE, T0, make_row, read_page

ROLLOUT = T0 + timedelta(hours=20)
SEGMENT = (("app", "support"), ("prompt_version", "v2"), ("judge_id", LEXICAL_JUDGE))


def _fill(store: ClickHouseStore) -> None:
    """A day of support v1 at 0.9 (and search v7 from before the day), then v2 at 0.5 from 20:00, firing at 20:30;
    v2 gives the same padded answer many times and an off-topic one."""
    rows = [make_row(T0 - timedelta(days=3), app="search", prompt_version="v7", judge_id=LEXICAL_JUDGE, score=0.8)]
    for m in range(0, 24 * 60, 10):
        at = T0 + timedelta(minutes=m)
        rows.append(make_row(at, app="search", prompt_version="v7", judge_id=LEXICAL_JUDGE, score=0.8))
        if at < ROLLOUT:
            rows.append(make_row(at, app="support", prompt_version="v1", judge_id=LEXICAL_JUDGE, score=0.9))
        else:
            for i in range(3):
                padded = i < 2
                rows.append(
                    make_row(
                        at + timedelta(seconds=i),
                        app="support",
                        prompt_version="v2",
                        judge_id=LEXICAL_JUDGE,
                        score=0.33 if padded else 0.0,
                        response="Thanks for writing! Order A17 shipped on 3 March." if padded else "Gift cards.",
                    )
                )
    store.insert_rows(rows, uuid.uuid4().hex)
    fired = AlertState(
        "relevancy_drop", SEGMENT, "firing", since=ROLLOUT, fired_at=ROLLOUT + timedelta(minutes=30), severity="page"
    )
    StateStore(store, writer="test").save([fired], T0 + timedelta(days=1))


def test_the_default_range_is_the_stores_data_up_to_seven_days(store: ClickHouseStore, tmp_path: Path) -> None:
    """Without `since`, the report starts at the first row of the last 7 days (on its minute), says so on top, and
    leads with the change: headline, rollout, zoom."""
    _fill(store)
    until = T0 + timedelta(days=1)
    summary = write_report(store, None, until, tmp_path / "r.html")
    assert summary.since == T0 - timedelta(days=3) and summary.until == until
    assert summary.headline == (
        "support v2: relevancy 0.22 against 0.90 since 2026-11-02 20:00 UTC (-76 %), firing relevancy_drop."
    )
    page = read_page(tmp_path / "r.html")
    assert "all the data in the store, up to 7 days" in page.split("</header>")[0]
    later = write_report(store, None, until + timedelta(days=5), tmp_path / "later.html")
    assert later.since == T0  # the row three days before the day is more than 7 days before the end now


def test_a_version_new_in_the_range_is_marked_and_an_old_one_is_not(store: ClickHouseStore) -> None:
    """support v2 first appears in the range: a mark. search v7 had rows before the range, and support v1 is the
    app's first version: neither is a rollout."""
    _fill(store)
    data = fetch_report_data(store, T0, T0 + timedelta(days=1), 900)
    assert [(f.app, f.kind, f.value, f.t) for f in data.first_seen] == [("support", "prompt_version", "v2", ROLLOUT)]
    assert data.change is not None and data.change.at == ROLLOUT and data.change.rules == ("relevancy_drop",)
    assert data.figures is not None and data.figures.n_current == 4 * 6 * 3 and data.figures.n_baseline == 120
    assert data.zoom is not None and data.zoom.app == "support" and data.zoom.bucket_s == 600
    assert data.zoom.since == ROLLOUT - timedelta(hours=8)  # twice the four hours since the change
    charts = {c.key: c for c in charts_of(data)[0]}
    assert [m.label for m in charts["zoom"].marks] == ["v2 first seen 20:00:00"]
    assert list(charts)[:2] == ["zoom", "relevancy-support"]  # the app that fired leads
    lines = {line.label: line.muted for line in charts["relevancy-support"].panels[0].lines}
    assert lines == {f"v2 · {LEXICAL_JUDGE}": False, f"v1 · {LEXICAL_JUDGE}": True}


def test_worst_examples_come_from_the_segment_that_fired_one_per_answer(store: ClickHouseStore) -> None:
    """Of 72 v2 rows with two distinct answers, the examples are those two answers once each, lowest first; search's
    rows are not among them however low."""
    _fill(store)
    store.insert_rows(
        [make_row(T0, app="search", prompt_version="v7", judge_id=LEXICAL_JUDGE, score=0.0, response="x")],
        uuid.uuid4().hex,
    )
    data = fetch_report_data(store, T0, T0 + timedelta(days=1), 900)
    assert [(e.app, e.prompt_version, e.response, e.score) for e in data.examples] == [
        ("support", "v2", "Gift cards.", 0.0),
        ("support", "v2", "Thanks for writing! Order A17 shipped on 3 March.", 0.33),
    ]


def test_a_shadow_judge_that_agrees_makes_it_the_product(store: ClickHouseStore, tmp_path: Path) -> None:
    """The shadow judge's rows are paired with the primary's by event: its mean on the same answers, per bucket; it
    falls with the live score, so the page says the product changed."""
    _fill(store)
    shadow_id = "rubric-5ad0e0000001"
    primary = [
        make_row(T0 + timedelta(hours=h), app="support", prompt_version=v, judge_id=LEXICAL_JUDGE, score=s)
        for h, v, s in ((10, "v1", 0.9), (11, "v1", 0.9), (21, "v2", 0.3), (22, "v2", 0.3))
    ]
    shadow = [
        r.model_copy(update={"judge_id": shadow_id, "judge": "rubric", "sample_rule": "shadow:base", "score": s})
        for r, s in zip(primary, (0.8, 0.9, 0.3, 0.2), strict=True)
    ]
    store.insert_rows([*primary, *shadow], uuid.uuid4().hex)
    data = fetch_report_data(store, T0, T0 + timedelta(days=1), 3600)
    assert [(p.t.hour, p.app, p.shadow_judge_id, p.events, p.primary_mean, p.shadow_mean) for p in data.shadow] == [
        (10, "support", shadow_id, 1, 0.9, 0.8),
        (11, "support", shadow_id, 1, 0.9, 0.9),
        (21, "support", shadow_id, 1, 0.3, 0.3),
        (22, "support", shadow_id, 1, 0.3, 0.2),
    ]
    write_report(store, T0, T0 + timedelta(days=1), tmp_path / "r.html")
    verdict = read_page(tmp_path / "r.html").split('id="verdict">')[1].split("</p>")[0]
    assert verdict.startswith("The product changed, not the judge") and "shadow judge moved -0.60" in verdict
