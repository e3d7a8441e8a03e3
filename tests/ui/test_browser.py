"""The web UI in a real browser: from the overview to an alert's worst answer in two clicks, labelling from the
keyboard with the judge's score hidden until the label is in, the agreement page moving, hostile text shown as text,
a POST without its CSRF token refused, and a Tab order that reaches the navigation and the label buttons.

The pages' screenshots land in $UI_SCREENSHOTS (else a temporary directory) for people to look at."""

from __future__ import annotations

import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from monitor.alerts.links import alert_path, answer_path
from tests.ui.conftest import Filled, Server, keep_shot

pytestmark = [pytest.mark.long(seconds=12), pytest.mark.xdist_group("ui_browser")]

WAIT_S = 30  # for a page or an element to appear; generous, the suite may share the 2 cores
NAV = ("nav-overview", "nav-explore", "nav-review", "nav-agreement")
KAPPA = re.compile(r"(-?\d+\.\d+) \[(-?\d+\.\d+), (-?\d+\.\d+)\] n=(\d+)")


def wait(driver: webdriver.Chrome, what: str, until: Callable[[webdriver.Chrome], Any]) -> Any:
    """Wait for a condition of the page; fail naming `what` and showing where the browser is."""
    try:
        return WebDriverWait(driver, WAIT_S, poll_frequency=0.1).until(until)
    except Exception as e:
        text = driver.find_element(By.TAG_NAME, "body").text[:1500]
        raise AssertionError(f"waiting for {what}: at {driver.current_url}: {text!r}") from e


def one(driver: webdriver.Chrome, css: str) -> WebElement:
    """The element `css` once it is on the page."""
    found: list[WebElement] = wait(driver, css, lambda d: d.find_elements(By.CSS_SELECTOR, css))
    return found[0]


def status_of_page(driver: webdriver.Chrome) -> int:
    """The HTTP status of the document the browser shows (Navigation Timing's responseStatus)."""
    return int(driver.execute_script("return performance.getEntriesByType('navigation')[0].responseStatus"))


def score_shown(text: str, score: float) -> bool:
    """Whether `text` states `score` in one of the ways a page may write it."""
    return any(s in text for s in (f"{score:.2f}", f"{score:.3f}", f"{score:.0%}"))


def test_from_the_overview_to_the_worst_answer_in_two_clicks(
    browser: webdriver.Chrome, server: Server, filled: Filled, shots: Path
) -> None:
    """The overview lists the segments and links the firing alert; its page draws the zoom and lists the segment's
    worst answer first; that answer's page shows its question, every statement and each statement's verdict."""
    facts = filled.facts
    browser.get(server.url("/"))
    one(browser, "main#main")
    segments = browser.find_elements(By.CSS_SELECTOR, "tr.segment")
    assert len(segments) >= 3, [s.text for s in segments]  # support-bot v1 and v2, search v7
    main = browser.find_element(By.ID, "main").text
    assert "support-bot" in main and "search" in main, main
    keep_shot(browser, shots, "overview")

    wanted = alert_path(facts["alert_rule"], facts["alert_segment"])
    links = browser.find_elements(By.CSS_SELECTOR, "a.alert-link")
    hrefs = [link.get_attribute("href") for link in links]
    assert server.url(wanted) in hrefs, (wanted, hrefs)
    links[hrefs.index(server.url(wanted))].click()  # click 1

    wait(browser, "the alert page", lambda d: urllib.parse.urlsplit(d.current_url).path == "/alert")
    chart = one(browser, "#zoom svg, #zoom img[src^='data:image/svg+xml']")  # inline, or as a data: image
    assert chart.is_displayed() and chart.size["width"] > 200, chart.size
    assert browser.execute_script("return arguments[0].tagName !== 'IMG' || arguments[0].naturalWidth > 0", chart)
    answers = browser.find_elements(By.CSS_SELECTOR, "a.answer-link")
    assert answers, browser.find_element(By.ID, "main").text[:1000]
    worst = urllib.parse.quote(facts["worst"], safe="")
    assert f"/answer/{worst}" in (answers[0].get_attribute("href") or ""), [a.get_attribute("href") for a in answers]
    keep_shot(browser, shots, "alert")
    answers[0].click()  # click 2

    wait(browser, "the answer page", lambda d: urllib.parse.urlsplit(d.current_url).path.startswith("/answer/"))
    assert "A9000" in one(browser, "#question").text
    statements = browser.find_elements(By.CSS_SELECTOR, "li.statement")
    verdicts = [s.find_element(By.CSS_SELECTOR, ".verdict").text.strip() for s in statements]
    assert verdicts == ["no"] * facts["worst_statements"], [s.text for s in statements]  # as the lexical judge stored
    assert "gift cards" in " ".join(s.text for s in statements)
    assert browser.find_element(By.ID, "sql").text.strip().startswith("relevancy-monitor sql")
    keep_shot(browser, shots, "answer")


def test_an_answer_with_script_and_onerror_runs_nothing_and_shows_them_as_text(
    browser: webdriver.Chrome, server: Server, filled: Filled
) -> None:
    """The answer holding `<script>` and an `onerror` image runs neither (no global set, no dialog), loads no image
    of it, and shows both literally in the question and the response."""
    facts = filled.facts
    browser.get(server.url(answer_path(facts["xss"])))
    question, response = one(browser, "#question"), one(browser, "#response")
    assert browser.execute_script("return window.__xss") is None
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # reading it is what raises when no dialog is open
    assert facts["script"] in question.text, question.text
    assert facts["onerror"] in response.text, response.text
    assert browser.find_elements(By.CSS_SELECTOR, "img[src='x'], [onerror]") == []
    scripts = [s.get_attribute("src") or "(inline)" for s in browser.find_elements(By.TAG_NAME, "script")]
    assert all(src.startswith(server.url("/static/")) for src in scripts), scripts


def _submit_label_form(browser: webdriver.Chrome, csrf: str | None) -> None:
    """Submit the review page's label form with label 2, its csrf field removed (None) or set to `csrf`."""
    one(browser, "form#label-form")
    browser.execute_script(
        "const form = document.querySelector('form#label-form');"
        "const token = form.querySelector('input[name=csrf]');"
        "if (arguments[0] === null) token.remove(); else token.value = arguments[0];"
        "form.requestSubmit(form.querySelector('button[name=label][value=\"2\"]'));",
        csrf,
    )


def test_a_post_without_its_csrf_token_is_refused(browser: webdriver.Chrome, server: Server) -> None:
    """The review form posted by the browser (its cookie sent) without the csrf field, or with the field altered,
    gets 403; so does a POST from outside the browser, with neither cookie nor field."""
    browser.get(server.url("/review"))
    event_id = one(browser, "form#label-form input[name=event_id]").get_attribute("value") or ""
    token = one(browser, "form#label-form input[name=csrf]").get_attribute("value") or ""
    assert event_id and len(token) >= 16, (event_id, token)

    for field in (None, token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")):
        browser.get(server.url("/review"))
        _submit_label_form(browser, field)
        wait(browser, "the answer to the POST", lambda d: urllib.parse.urlsplit(d.current_url).path == "/review/label")
        assert status_of_page(browser) == 403, (field, browser.find_element(By.TAG_NAME, "body").text[:300])

    form = urllib.parse.urlencode({"event_id": event_id, "label": "2", "comment": ""}).encode()
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(server.url("/review/label"), data=form), timeout=10)
    assert refused.value.code == 403


def _tab_stops(browser: webdriver.Chrome, limit: int = 60) -> list[str]:
    """Press Tab from the top of the page until focus comes back round; name each element it stops at."""
    stops: list[str] = []
    for _ in range(limit):
        ActionChains(browser).send_keys(Keys.TAB).perform()
        name = browser.execute_script(
            "const e = document.activeElement;"
            "if (e.id) return e.id;"
            "if (e.name === 'label') return 'label-' + e.value;"
            "return e.tagName.toLowerCase() + (e.name ? '[' + e.name + ']' : '');"
        )
        if stops and name == stops[0]:
            break
        stops.append(str(name))
    return stops


def test_tab_reaches_the_navigation_then_the_label_buttons_in_order(browser: webdriver.Chrome, server: Server) -> None:
    """On the review page, Tab from the top stops at the four navigation links in order, then the five label buttons
    0 to 4 in order; the comment box and skip are reached too, after the navigation."""
    browser.get(server.url("/review"))
    one(browser, "form#label-form")
    stops = _tab_stops(browser)
    ordered = [*NAV, *(f"label-{k}" for k in range(5))]
    missing = [w for w in [*ordered, "comment", "skip"] if w not in stops]
    assert missing == [], stops
    positions = [stops.index(w) for w in ordered]
    assert positions == sorted(positions), stops
    assert min(stops.index("comment"), stops.index("skip")) > stops.index(NAV[-1]), stops


def _agreement_n(browser: webdriver.Chrome, server: Server, judge_id: str) -> tuple[int, str]:
    """The primary judge's label count on the agreement page, and its κ text over every label."""
    browser.get(server.url("/agreement"))
    section = one(browser, f"section.judge[data-judge-id='{judge_id}']")
    text = section.find_element(By.CSS_SELECTOR, ".kappa-all").text
    found = re.search(r"n=(\d+)", text)
    return (int(found.group(1)) if found else 0), text


def test_five_labels_from_the_keyboard_move_the_agreement_page(
    browser: webdriver.Chrome, server: Server, filled: Filled, shots: Path
) -> None:
    """Five items labelled with the keys 0-4 alone: before each label the page shows no judge score, after it
    #judge-score shows the primary's score of that item, and Enter (a#next has the focus) or the key n opens the next,
    different item.
    The agreement page's count for the primary judge grows and it states κ with an interval."""
    facts = filled.facts
    scores: dict[str, float] = facts["scores"]
    before, _ = _agreement_n(browser, server, facts["primary"])

    browser.get(server.url("/review"))
    seen: list[str] = []
    for k in range(5):
        event_id = one(browser, "form#label-form input[name=event_id]").get_attribute("value") or ""
        assert event_id in scores and event_id not in seen, (event_id, seen)
        assert one(browser, "#why").text.strip()
        main = browser.find_element(By.ID, "main").text
        assert browser.find_elements(By.ID, "judge-score") == [], main
        assert not score_shown(main, scores[event_id]), (scores[event_id], main)
        if k == 0:
            keep_shot(browser, shots, "review")
        level = min(4, round(scores[event_id] * 4) + (k % 2))  # near the judge's level, not always on it
        browser.find_element(By.TAG_NAME, "body").send_keys(str(level))

        shown = one(browser, "#judge-score").text
        assert score_shown(shown, scores[event_id]), (scores[event_id], shown)
        if k == 0:
            keep_shot(browser, shots, "review-after-label")
        seen.append(event_id)
        # a#next has the focus when the page opens, so Enter follows it; the key n does too.
        assert browser.execute_script("return document.activeElement.id") == "next"
        ActionChains(browser).send_keys(Keys.ENTER if k % 2 else "n").perform()
        wait(browser, "the next item", lambda d: not d.find_elements(By.ID, "judge-score"))

    after, kappa = _agreement_n(browser, server, facts["primary"])
    assert after > before, (before, after, kappa)
    assert KAPPA.search(kappa), kappa
    keep_shot(browser, shots, "agreement")
