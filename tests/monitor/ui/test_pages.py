"""The UI's read-only pages through the ASGI app on a small store: each page's content, the 404 of an unknown alert,
the explore page's filters and paging, stored text shown as text, and the wording when no text is stored."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urlencode

from monitor.alerts.links import answer_path
from monitor.ui.pages.answer import NOT_STORED
from monitor.ui.settings import UiSettings
from tests.monitor.ui.conftest import HANDLER, PRIMARY, SCRIPT, MakeUi, alert_href


class _Elements(HTMLParser):
    """Every start tag with its attributes, and the text of elements by id."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text_of: dict[str, str] = {}
        self._open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.tags.append((tag, found))
        if found.get("id"):
            self._open.append(str(found["id"]))
            self.text_of.setdefault(str(found["id"]), "")

    def handle_endtag(self, tag: str) -> None:
        if self._open and tag in ("div", "span", "p", "code", "td"):
            self._open.pop()

    def handle_data(self, data: str) -> None:
        if self._open:
            self.text_of[self._open[-1]] += data


def parse(html: str) -> _Elements:
    """`html` as the browser's tokenizer reads it."""
    page = _Elements()
    page.feed(html)
    page.close()
    return page


def hrefs(page: _Elements, cls: str) -> list[str]:
    """The hrefs of the links with class `cls`, in order."""
    return [str(a.get("href")) for t, a in page.tags if t == "a" and cls in str(a.get("class", "")).split()]


async def test_overview_lists_each_app_with_its_segments_firing_alerts_and_sparklines(make_ui: MakeUi) -> None:
    """The overview shows both apps, a row per segment with a sparkline, the firing alert as a link to its page,
    the detector's statistic as a share of its threshold, and says which segments are thin."""
    ui = await make_ui()
    answer = await ui.client.get("/")
    assert answer.status_code == 200
    page = parse(answer.text)
    rows = [a for t, a in page.tags if t == "tr" and a.get("class") == "segment"]
    assert len(rows) == 4, answer.text  # search v7; support v1, v2 and the shadow judge's v1
    assert alert_href(ui.facts) in hrefs(page, "alert-link")
    assert "150 %" in answer.text  # CUSUM 9.0 of 6.0
    assert "thin: 0 judged in the last hour" in answer.text
    assert answer.text.count('<svg class="spark"') == 4
    assert ", the app's" in answer.text  # v2 has no week before: its app's baseline


async def test_alert_page_shows_the_episode_the_zoom_and_the_worst_answers_worst_first(make_ui: MakeUi) -> None:
    """The alert page shows the state and figures, draws the zoom as an image, and lists the segment's worst
    answers, the lowest score first, each linking to its answer page."""
    ui = await make_ui()
    answer = await ui.client.get(alert_href(ui.facts))
    assert answer.status_code == 200
    page = parse(answer.text)
    assert page.text_of["state"] == "firing"
    assert "CUSUM 9.0 of 6.0" in page.text_of["note"]
    images = [a for t, a in page.tags if t == "img"]
    assert len(images) == 1 and str(images[0]["src"]).startswith("data:image/svg+xml;base64,")
    assert re.search(r'<div id="zoom" class="chart">\s*<img', answer.text)
    links = hrefs(page, "answer-link")
    assert links[0] == answer_path(ui.facts.worst_event, PRIMARY)
    assert "support v2" in answer.text  # the rollout
    # Each worst answer says what was asked and how many statements missed, so the list is read without opening it.
    worst = answer.text.split('class="worst"')[1].split("</li>")[0]
    assert "0.01 · When did order A17 ship?" in worst and "1 of 2 statements not relevant" in worst


async def test_an_unknown_alert_is_a_404_saying_so(make_ui: MakeUi) -> None:
    """A rule or segment the alert state does not have is a 404 page whose message is one line naming them."""
    ui = await make_ui()
    answer = await ui.client.get("/alert?" + urlencode({"rule": "nope", "segment": ui.facts.segment_key}))
    assert answer.status_code == 404
    message = parse(answer.text).text_of["message"]
    assert "no alert state for rule 'nope'" in message and "\n" not in message


async def test_explore_filters_rows_and_pages_through_them(make_ui: MakeUi) -> None:
    """Explore lists only the rows its filters select (app, score range, a rule's firing segments), newest first,
    a page at a time with links to the next and previous pages; a bad value is a 400 naming the field."""
    ui = await make_ui(settings=UiSettings(page_size=5))
    first = await ui.client.get("/explore?app=search")
    assert first.status_code == 200
    page = parse(first.text)
    rows = re.findall(r'<tr class="row"><td>[^<]*</td><td>([^<]*)</td>', first.text)
    assert rows == ["search"] * 5
    [following] = [str(a["href"]) for t, a in page.tags if t == "a" and a.get("id") == "next-page"]
    second = await ui.client.get(following.replace("&amp;", "&"))
    assert second.status_code == 200
    assert set(hrefs(parse(second.text), "answer-link")).isdisjoint(hrefs(page, "answer-link"))
    assert 'id="previous"' in second.text
    worst = await ui.client.get("/explore?score_max=0.02")
    assert hrefs(parse(worst.text), "answer-link") == [answer_path(ui.facts.worst_event, PRIMARY)]
    by_rule = await ui.client.get("/explore?rule=relevancy_drop&score_max=0.5")
    found = re.findall(r'<tr class="row">(?:<td>[^<]*</td>){3}<td>([^<]*)</td>', by_rule.text)
    assert found and set(found) == {"v2"}, by_rule.text
    bad = await ui.client.get("/explore?score_min=lots")
    assert bad.status_code == 400 and "score_min: not a number from 0 to 1" in bad.text


async def test_answer_page_shows_the_answer_its_verdicts_labels_and_the_sql_line(make_ui: MakeUi) -> None:
    """The answer page shows the question, the answer, the judge's reasoning, each statement with its verdict, the
    labels block and the `relevancy-monitor sql` line that finds the row."""
    ui = await make_ui()
    answer = await ui.client.get(f"/answer/{ui.facts.worst_event}")
    assert answer.status_code == 200
    page = parse(answer.text)
    assert page.text_of["question"] == "When did order A17 ship?"
    assert page.text_of["response"] == "Gift cards on sale!"
    assert "judged 0.01" in page.text_of["reasoning"]
    assert re.findall(r'<li class="statement"><span class="verdict[^"]*">(\w+)</span>', answer.text) == ["yes", "no"]
    assert "No labels yet." in answer.text and 'id="labels"' in answer.text
    assert page.text_of["sql"].startswith("relevancy-monitor sql ") and ui.facts.worst_event in page.text_of["sql"]
    missing = await ui.client.get("/answer/no-such-event")
    assert missing.status_code == 404


async def test_markup_in_a_stored_answer_is_shown_as_text(make_ui: MakeUi) -> None:
    """A question holding a script and an answer holding an img with onerror are on the page as text: escaped,
    with no script or img element and no event-handler attribute made of them."""
    ui = await make_ui()
    answer = await ui.client.get(f"/answer/{ui.facts.hostile_event}")
    assert answer.status_code == 200
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in answer.text
    assert "&lt;img src=x onerror=alert(1)&gt;" in answer.text
    assert SCRIPT not in answer.text and HANDLER not in answer.text
    page = parse(answer.text)
    assert page.text_of["question"] == SCRIPT and page.text_of["response"] == HANDLER
    assert not [t for t, _ in page.tags if t in ("script", "img")]
    assert not [n for _, a in page.tags for n in a if n.startswith("on")]
    listed = await ui.client.get("/explore?" + urlencode({"app": "search", "score_max": "0.55"}))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in listed.text and SCRIPT not in listed.text  # the question column


async def test_an_answer_without_stored_text_says_so(make_ui: MakeUi) -> None:
    """With MONITOR_STORE_TEXT=none the stored question and answer are '': the page says the text is not stored."""
    ui = await make_ui()
    answer = await ui.client.get(f"/answer/{ui.facts.quiet_event}")
    page = parse(answer.text)
    assert page.text_of["question"] == NOT_STORED == "text not stored (MONITOR_STORE_TEXT=none)"
    assert page.text_of["response"] == NOT_STORED


async def test_every_response_carries_the_content_security_policy(make_ui: MakeUi) -> None:
    """Pages, errors, the health check, static files and refused POSTs all carry the strict CSP and nosniff."""
    ui = await make_ui()
    answers = [
        await ui.client.get(path)
        for path in (
            "/",
            "/explore",
            "/agreement",
            "/review",
            "/healthz",
            "/static/review.js",
            "/nowhere",
            "/static/base.css",
        )
    ]
    answers.append(await ui.client.post("/review/label", data={"label": "3"}))
    for answer in answers:
        csp = answer.headers.get("content-security-policy", "")
        assert "default-src 'none'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp, (
            answer.request.url
        )
        assert answer.headers.get("x-content-type-options") == "nosniff"
    assert [a.status_code for a in answers] == [200, 200, 200, 403, 200, 200, 404, 200, 403]
    assert answers[7].headers["content-type"].startswith("text/css") and "body {" in answers[7].text  # the report's
    assert not re.search(r"<script>|\sstyle=|\son\w+=", "".join(a.text for a in answers[:4]))


async def test_on_loopback_a_request_naming_another_host_is_refused(make_ui: MakeUi) -> None:
    """Bound to 127.0.0.1 (the default), a request whose Host is another name (a page that rebound its name to
    127.0.0.1) gets 400 and no page; bound elsewhere (behind a proxy), any Host is served."""
    ui = await make_ui()
    refused = await ui.client.get("/", headers={"Host": "evil.example"})
    assert refused.status_code == 400 and "Overview" not in refused.text
    assert "default-src 'none'" in refused.headers["content-security-policy"]
    assert (await ui.client.get("/", headers={"Host": "localhost:8787"})).status_code == 200
    proxied = await make_ui(settings=UiSettings(host="0.0.0.0"))
    assert (await proxied.client.get("/", headers={"Host": "ui.example.com"})).status_code == 200


async def test_an_unreachable_store_is_a_503_page_of_one_line() -> None:
    """With the store unreachable (a server URL whose port nothing listens on), a page is a 503 whose message is the
    store's one-line error naming the server without its password; the health check still answers."""
    import socket

    import httpx2

    from monitor.ui.app import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_app(url=f"http://reader:s3cret-pw@127.0.0.1:{port}", settings=UiSettings())
    try:
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
            page = await client.get("/")
            health = await client.get("/healthz")
    finally:
        app.state.ui.store.close()
    assert page.status_code == 503 and health.status_code == 200
    assert "connection refused" in page.text and f"127.0.0.1:{port}" in page.text and "s3cret-pw" not in page.text
