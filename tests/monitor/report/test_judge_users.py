"""The report's "Judge against users" section over a real store: each judge's AUC for thumbs and ρ for ratings over
the range (all segments, then each), week by week in a table and a chart, escaped like any stored text; and what it
says when the store has no feedback table or no feedback joined to a judged answer."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

from monitor.feedback.agreement import auc_of
from monitor.feedback.agreement_text import auc_value
from monitor.report import write_report
from monitor.store.connection import ClickHouseStore
from tests.monitor.feedback.agreement_data import JUDGE, MONDAY, rating, scored, thumbs, write
from tests.monitor.report.conftest import HOSTILE, outside_references, read_page

WEEK = timedelta(days=7)
SINCE, UNTIL = MONDAY, MONDAY + 2 * WEEK


def _section(html: str) -> str:
    match = re.search(r'<section id="judge-users">(.*?)</section>', html, re.DOTALL)
    assert match, "no judge-users section"
    return match.group(1)


def _fill(store: ClickHouseStore) -> None:
    """Two weeks of thumbs on `shop` answers (disliked answers score low in the first week, no better than the
    liked ones in the second), ratings in the first week, and thumbs on an app whose name is markup."""
    rows, feedback = [], []
    for week, (disliked, liked) in enumerate([([0.1, 0.3, 0.5], [0.6, 0.8, 0.4]), ([0.6, 0.7], [0.5, 0.6])]):
        t = MONDAY + week * WEEK + timedelta(hours=2)
        for i, s in enumerate(disliked):
            rows.append(scored(f"d{week}{i}", s, t))
            feedback.append(thumbs(f"d{week}{i}", t + timedelta(hours=1), up=False))
        for i, s in enumerate(liked):
            rows.append(scored(f"l{week}{i}", s, t))
            feedback.append(thumbs(f"l{week}{i}", t + timedelta(hours=1), up=True))
    t = MONDAY + timedelta(hours=3)
    feedback += [rating(f"d0{i}", t, r) for i, r in enumerate([1, 2, 3])]
    feedback += [rating(f"l0{i}", t, r) for i, r in enumerate([4, 5, 3])]
    rows.append(scored("evil", 0.2, t, app=HOSTILE))
    feedback.append(thumbs("evil", t, up=False, app=HOSTILE))
    write(store, rows, feedback)


def test_the_report_shows_each_judge_against_users_over_the_range_and_by_week(
    store: ClickHouseStore, tmp_path: Path
) -> None:
    """The section lists the judge over all segments and per segment with AUC [interval], disliked/liked and ρ, the
    weekly rows of both weeks, and the weekly AUC chart; the hostile app name is text, and the page loads nothing."""
    _fill(store)
    write_report(store, SINCE, UNTIL, tmp_path / "r.html")
    html = read_page(tmp_path / "r.html")
    section = _section(html)
    everything = auc_value(auc_of([0.1, 0.3, 0.5, 0.6, 0.7, 0.2], [0.6, 0.8, 0.4, 0.5, 0.6]))
    assert (
        f'<tr><td><code>{JUDGE}</code></td><td>all segments</td><td class="n">{everything}</td>'
        "<td>n 6/5 disliked/liked</td>" in section
    ), section
    first = auc_value(auc_of([0.1, 0.3, 0.5], [0.6, 0.8, 0.4]))
    second = auc_value(auc_of([0.6, 0.7], [0.5, 0.6]))
    shop = "app=shop model=m1 prompt_version=v1"
    assert f'<td>{shop}</td><td>{MONDAY.date().isoformat()}</td><td class="n">{first}</td>' in section
    assert f'<td>{shop}</td><td>{(MONDAY + WEEK).date().isoformat()}</td><td class="n">{second}</td>' in section
    assert 'id="chart-judge_users"' in section and "<svg" in section
    assert "&lt;script&gt;" in section and HOSTILE not in html
    assert outside_references(html) == []
    assert html.index('id="canaries"') < html.index('id="judge-users"') < html.index('id="alerts"')


def test_the_section_says_why_it_is_empty(store: ClickHouseStore, tmp_path: Path) -> None:
    """Judged answers without any joined feedback say so; a store without the feedback table says to migrate."""
    write(store, [scored("a", 0.5, MONDAY + timedelta(hours=1))], [thumbs("nobody-judged-this", MONDAY, up=False)])
    write_report(store, SINCE, UNTIL, tmp_path / "e.html")
    assert 'id="no-judged-feedback"' in _section(read_page(tmp_path / "e.html"))
    store.command(f"DROP VIEW {store.database}.feedback_rollup_1m_mv")
    store.command(f"DROP TABLE {store.database}.feedback")
    write_report(store, SINCE, UNTIL, tmp_path / "m.html")
    section = _section(read_page(tmp_path / "m.html"))
    assert "No feedback table in this database" in section and "migration 046" in section
