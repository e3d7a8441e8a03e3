"""The agreement page's "Judge against users" section through the ASGI app: each judge's AUC and ρ against users'
feedback over the page's range (all segments, then each) and week by week, the stored names escaped, no inline script
or style; and what it says without joined feedback or without the feedback table."""

from __future__ import annotations

import re
from datetime import timedelta

from monitor.feedback.agreement import auc_of, spearman_of
from monitor.feedback.agreement_text import auc_value, rho_value
from monitor.store.connection import ClickHouseStore
from tests.monitor.feedback.agreement_data import JUDGE, rating, scored, thumbs, write
from tests.monitor.ui.conftest import SCRIPT, MakeUi, now_minute


def _section(html: str) -> str:
    match = re.search(r'<section class="judge-users" id="judge-users">(.*?)</section>', html, re.DOTALL)
    assert match, html[-3000:]
    return match.group(1)


async def test_the_agreement_page_shows_each_judge_against_users(make_ui: MakeUi, store: ClickHouseStore) -> None:
    """Thumbs and ratings on judged answers of the last hours give the judge's row over all segments and its
    segment's row with AUC, counts and ρ as computed, one week's rows, and the markup-named app as text."""
    # All the feedback at one instant, so it falls in one ISO week whatever the hour of the run: spread over hours, it
    # straddled Monday 00:00 on runs early on a Monday and the weekly table rightly held two weeks.
    t, given = now_minute() - timedelta(hours=3), now_minute() - timedelta(hours=2)
    disliked, liked = [0.2, 0.5, 0.3], [0.7, 0.4, 0.9]
    rows = [scored(f"d{i}", s, t) for i, s in enumerate(disliked)] + [
        scored(f"l{i}", s, t) for i, s in enumerate(liked)
    ]
    feedback = [thumbs(f"d{i}", given, up=False) for i in range(3)]
    feedback += [thumbs(f"l{i}", given, up=True) for i in range(3)]
    feedback += [rating(f"d{i}", given, r) for i, r in enumerate([1, 3, 2])] + [rating("l0", given, 4)]
    rows.append(scored("evil", 0.1, t, app=SCRIPT))
    feedback.append(thumbs("evil", given, up=False, app=SCRIPT))
    write(store, rows, feedback)
    ui = await make_ui()
    page = await ui.client.get("/agreement")
    assert page.status_code == 200
    section = _section(page.text)
    auc = auc_value(auc_of([*disliked, 0.1], liked))
    rho = rho_value(spearman_of([0.2, 0.5, 0.3, 0.7], [1, 3, 2, 4]))
    assert (
        f'<tr data-judge-id="{JUDGE}"><td><code>{JUDGE}</code></td><td>all segments</td><td class="auc">{auc}</td>'
        f'<td>n 4/3 disliked/liked</td><td class="rho">{rho}</td><td>4</td></tr>' in section
    ), section
    shop = auc_value(auc_of(disliked, liked))
    assert f'<td>app=shop model=m1 prompt_version=v1</td><td class="auc">{shop}</td>' in section
    assert 'table class="judge-users-weekly"' in section and section.count("<td>all segments</td>") == 2
    assert "&lt;script&gt;" in section and SCRIPT not in page.text
    assert re.search(r"<script(?![^>]*\bsrc=)", page.text) is None and "<style" not in page.text
    assert " style=" not in section


async def test_the_section_says_why_it_is_empty(make_ui: MakeUi, store: ClickHouseStore) -> None:
    """Without feedback joined to a judged answer the section says so in one line; without the feedback table (an
    older schema) it says to migrate, and the rest of the page still works."""
    ui = await make_ui()
    page = await ui.client.get("/agreement")
    assert 'id="no-judged-feedback"' in _section(page.text)
    store.command(f"DROP VIEW {store.database}.feedback_rollup_1m_mv")
    store.command(f"DROP TABLE {store.database}.feedback")
    page = await ui.client.get("/agreement")
    assert page.status_code == 200 and 'id="no-feedback-table"' in _section(page.text)
    assert "Judges against reviewers" in page.text
