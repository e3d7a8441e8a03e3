"""The review queue's pages and the one write: blind items, labels recorded only with a good CSRF token and a known
reviewer (the proxy's header when configured, and only then), skip, and the agreement page over the labels."""

from __future__ import annotations

import re

import httpx2

from monitor.review.label_rows import labels_of
from monitor.store.connection import ClickHouseStore
from monitor.ui.settings import UiSettings
from tests.monitor.ui.conftest import PRIMARY, MakeUi, Ui

HEADER = "X-Forwarded-Email"


def served(html: str) -> str:
    """The event id the review page's label form carries."""
    found = re.search(r'<form id="label-form".*?name="event_id" value="([^"]+)"', html, re.DOTALL)
    assert found, html[:3000]
    return found.group(1)


async def _label(
    ui: Ui, level: int, headers: dict[str, str] | None = None, token: str | None = "good"
) -> httpx2.Response:
    page = await ui.client.get("/review", headers=headers)
    form = {"event_id": served(page.text), "label": str(level), "comment": "checked by hand"}
    if token == "good":
        found = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert found
        form["csrf"] = found.group(1)
    elif token is not None:
        form["csrf"] = token
    return await ui.client.post("/review/label", data=form, headers=headers)


async def test_the_review_page_is_blind_and_says_why_the_item_was_picked(make_ui: MakeUi) -> None:
    """Before labelling, the page shows the item, why it was picked, the five label buttons and skip, and no score
    of any judge."""
    ui = await make_ui(reviewer="alice")
    page = await ui.client.get("/review")
    assert page.status_code == 200
    assert re.search(r'<p id="why">[^<]+</p>', page.text)
    assert [int(v) for v in re.findall(r'<button type="submit" name="label" value="(\d)"', page.text)] == [
        0,
        1,
        2,
        3,
        4,
    ]
    assert 'id="skip"' in page.text and 'textarea id="comment"' in page.text
    assert "judge-score" not in page.text and 'class="score"' not in page.text and "verdict" not in page.text
    assert '<script src="/static/review.js" defer></script>' in page.text


async def test_a_label_without_a_csrf_token_or_with_a_bad_one_is_403(make_ui: MakeUi, store: ClickHouseStore) -> None:
    """A POST whose form has no token, or a token this process did not sign, is a 403 and writes nothing."""
    ui = await make_ui(reviewer="alice")
    missing = await _label(ui, 3, token=None)
    forged_token = "abc." + "0" * 64
    forged = await _label(ui, 3, token=forged_token)
    assert [missing.status_code, forged.status_code] == [403, 403]
    assert "CSRF token is missing or wrong" in missing.text
    assert store.query(f"SELECT count() FROM {store.database}.labels").rows[0][0] == 0


async def test_a_label_with_its_token_is_stored_and_shows_the_score(make_ui: MakeUi, store: ClickHouseStore) -> None:
    """With the page's token, the label is written through LabelWriter as the reviewer gave it, and the next page
    reveals the judge's score with a link to the next item."""
    ui = await make_ui(reviewer="alice")
    page = await ui.client.get("/review")
    event_id = served(page.text)
    token = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert token
    done = await ui.client.post(
        "/review/label", data={"csrf": token.group(1), "event_id": event_id, "label": "1", "comment": "off topic"}
    )
    assert done.status_code == 200, done.text
    assert re.search(r'<span id="judge-score">\d\.\d{3} \(level \d\)</span>', done.text)
    assert '<a id="next" href="/review" autofocus>' in done.text
    [stored] = labels_of(store, event_id)
    assert (stored.reviewer, stored.label, stored.comment, stored.judge_id) == ("alice", 1, "off topic", PRIMARY)
    following = await ui.client.get("/review")
    assert served(following.text) != event_id


async def test_without_a_reviewer_labelling_is_refused_saying_how(make_ui: MakeUi, store: ClickHouseStore) -> None:
    """With neither MONITOR_UI_USER_HEADER nor --reviewer, the review page is a 403 naming both, and a label POST
    with a good token is refused."""
    ui = await make_ui()
    page = await ui.client.get("/review")
    assert page.status_code == 403
    assert "relevancy-monitor ui --reviewer NAME" in page.text and "MONITOR_UI_USER_HEADER" in page.text
    token = re.search(r'name="csrf" value="([^"]+)"', (await ui.client.get("/")).text)
    assert token is None  # the overview has no form; the cookie is set though
    cookie = ui.client.cookies.get("csrf")
    assert cookie
    refused = await ui.client.post("/review/label", data={"csrf": cookie, "event_id": "x", "label": "2"})
    assert refused.status_code == 403 and "labelling needs a reviewer" in refused.text
    assert store.query(f"SELECT count() FROM {store.database}.labels").rows[0][0] == 0


async def test_the_user_header_is_the_reviewer_only_when_configured(make_ui: MakeUi, store: ClickHouseStore) -> None:
    """With MONITOR_UI_USER_HEADER set, the header's value is the reviewer and a request without it may not label;
    without the setting, the same header is ignored and --reviewer labels."""
    proxied = await make_ui(settings=UiSettings(user_header=HEADER), reviewer="alice")
    without = await proxied.client.get("/review")
    assert without.status_code == 403 and f"labelling needs the {HEADER} header" in without.text
    done = await _label(proxied, 4, headers={HEADER: "bob@example.com"})
    assert done.status_code == 200
    local = await make_ui(reviewer="alice")
    done = await _label(local, 2, headers={HEADER: "mallory@example.com"})
    assert done.status_code == 200
    reviewers = store.query(f"SELECT reviewer, label FROM {store.database}.labels FINAL ORDER BY reviewer").rows
    assert reviewers == [("alice", 2), ("bob@example.com", 4)]


async def test_skip_moves_on_to_another_item(make_ui: MakeUi) -> None:
    """Skipping (with the token) answers with the next item, another one; without the token it is refused."""
    ui = await make_ui(reviewer="alice")
    page = await ui.client.get("/review")
    first = served(page.text)
    refused = await ui.client.post("/review/skip", data={"event_id": first})
    assert refused.status_code == 403
    token = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert token
    moved = await ui.client.post("/review/skip", data={"csrf": token.group(1), "event_id": first})
    assert moved.status_code == 303 and moved.headers["location"] == "/review"
    assert served((await ui.client.get("/review")).text) != first


async def test_the_agreement_page_shows_each_judge_against_the_labels(make_ui: MakeUi) -> None:
    """After labels, the agreement page has a section for the routing judge with κ on the control slice and on
    everything, the confusion table, the weekly table and the reviewers' κ."""
    ui = await make_ui(reviewer="alice")
    for level in (4, 1, 3, 0, 2):
        assert (await _label(ui, level)).status_code == 200
    page = await ui.client.get("/agreement")
    assert page.status_code == 200
    assert f'<section class="judge" data-judge-id="{PRIMARY}">' in page.text
    assert re.search(r'class="kappa kappa-control">[^<]*n=\d+<', page.text)
    assert re.search(r'class="kappa kappa-all">[^<]*n=5<', page.text), page.text
    assert 'table class="confusion"' in page.text and 'table class="weekly"' in page.text
    assert 'id="human-kappa"' in page.text
