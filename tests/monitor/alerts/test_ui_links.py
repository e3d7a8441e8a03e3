"""Notifications and the UI (ALERTS_UI_URL), through the runner against chDB and a real local HTTP receiver: without
it every payload is as it was; with it each carries its alert page's link, and Slack shows the segment's three worst
answers with the statements the judge found off-topic, escaped, clipped and linked, read with a bounded query whose
failure costs the message its answers, never the page."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from structlog.testing import capture_logs

from monitor.alerts.engine import AlertRunner
from monitor.alerts.evaluator import segment_key_json
from monitor.alerts.notifiers import (
    QUESTION_CLIP,
    RESPONSE_CLIP,
    SECTION_LIMIT,
    AlertmanagerNotifier,
    Notifier,
    SlackNotifier,
    WebhookNotifier,
)
from monitor.alerts.poster import JsonPoster
from monitor.alerts.rules import RuleSet
from monitor.alerts.settings import load_alert_settings
from monitor.backoff import Backoff
from monitor.store.connection import ClickHouseStore
from schemas.errors import ConfigError
from schemas.scored import ScoredRow
from tests.monitor.alerts.conftest import T0, insert, make_row, rules_from
from tests.monitor.alerts.receiver import Receiver

RULES = RuleSet(
    rules=rules_from("""
- name: relevancy_low
  description: Mean relevancy below 0.5.
  metric: mean_score
  segment_by: [app]
  window: 30m
  condition: {threshold: {fire: 0.5, clear: 0.55}}
  test: none
  min_events: 10
  severity: page
""")
)
FAST = JsonPoster(backoff=Backoff(base_s=0.01, max_s=0.01))
NOW = T0 + timedelta(hours=2)
UI = "https://ui.example/monitor/"  # a path prefix, with a trailing slash
DASHBOARD = "http://grafana.local/d/relevancy"
SEGMENT = (("app", "a"), ("judge_id", "j1"))
# What the webhook's alert object held before the UI, key for key.
WEBHOOK_KEYS = {
    "status",
    "kind",
    "fingerprint",
    "rule",
    "description",
    "severity",
    "metric",
    "labels",
    "segment",
    "judge",
    "value",
    "baseline",
    "n_current",
    "n_baseline",
    "p_value",
    "test",
    "baseline_source",
    "suspect_judge",
    "note",
    "window",
    "since",
    "fired_at",
    "resolved_at",
    "summary",
    "examples_sql",
}
HOSTILE_QUESTION = "Where is <https://evil.example|your bank>? ask <!channel> & <@U123>"
LONG_ANSWER = "Buy shoes & socks <b>now</b>. " * 200


def _worst(t: Any, i: int, score: float, **text: Any) -> ScoredRow:
    row = make_row(t, app="a", score=score, event_id=f"worst-{i}", **text.pop("arrays", {}))
    return row.model_copy(update=text)


@pytest.fixture
def low(store: ClickHouseStore) -> ClickHouseStore:
    """App `a` scores 0.4 over the last 30 minutes; its three worst answers carry mrkdwn, a long answer, a forged
    link and mentions, and statements with verdicts."""
    rows = [make_row(NOW - timedelta(minutes=m), app="a", score=0.4) for m in range(1, 29)]
    rows += [
        _worst(
            NOW - timedelta(minutes=5),
            1,
            0.05,
            question=HOSTILE_QUESTION,
            response=LONG_ANSWER,
            arrays={
                "statements": ["Buy <shoes>.", "It is open.", "Call <@U999> now."],
                "verdicts": ["no", "yes", "idk"],
            },
        ),
        _worst(NOW - timedelta(minutes=6), 2, 0.10, question="What time\nis it?", response="Blue."),
        _worst(NOW - timedelta(minutes=7), 3, 0.15, question="Where?", response="There."),
    ]
    insert(store, rows)
    return store


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A local HTTP receiver recording what the notifiers post."""
    with Receiver() as r:
        yield r


def _notifiers(receiver: Receiver, generator: str = "") -> list[Notifier]:
    return [
        WebhookNotifier(receiver.base + "/hook", poster=FAST),
        SlackNotifier(receiver.base + "/slack", poster=FAST),
        AlertmanagerNotifier(receiver.base + "/am", generator_url=generator, poster=FAST),
    ]


def _posted(receiver: Receiver) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    [hook], [slack], [am] = receiver.posts["/hook"], receiver.posts["/slack"], receiver.posts["/am/api/v2/alerts"]
    return hook["alerts"][0], slack, am[0]


def _mrkdwn(slack: dict[str, Any]) -> list[str]:
    return [b["text"]["text"] for b in slack["blocks"] if b["type"] == "section" and "text" in b]


def test_without_ui_url_every_payload_is_as_before(low: ClickHouseStore, receiver: Receiver) -> None:
    """No ALERTS_UI_URL: the webhook's alert has its old keys only, Slack its text and three blocks (no answers, no
    button), Alertmanager no ui_url annotation and no generatorURL of its own."""
    report = AlertRunner(low, RULES, _notifiers(receiver)).run_once(NOW)
    assert report.sent == 3 and report.failed == 0
    hook, slack, am = _posted(receiver)
    assert set(hook) == WEBHOOK_KEYS
    assert set(slack) == {"text", "blocks"} and slack["text"] == hook["summary"]
    assert [b["type"] for b in slack["blocks"]] == ["section", "section", "section"]
    assert "Worst recent examples" in slack["blocks"][-1]["text"]["text"]
    assert "ui_url" not in am["annotations"] and "generatorURL" not in am
    assert not any("worst-" in text for text in _mrkdwn(slack))  # no answer read into the message


def test_with_ui_url_every_notification_links_to_its_alert_page(low: ClickHouseStore, receiver: Receiver) -> None:
    """ALERTS_UI_URL with a path prefix: the webhook's `ui_url`, Slack's button and fallback text, and Alertmanager's
    `ui_url` annotation and generatorURL all hold the alert page of the rule and segment under that prefix."""
    AlertRunner(low, RULES, _notifiers(receiver), ui_url=UI).run_once(NOW)
    hook, slack, am = _posted(receiver)
    link = hook["ui_url"]
    parts = urlsplit(link)
    assert (parts.scheme, parts.netloc, parts.path) == ("https", "ui.example", "/monitor/alert")
    assert parse_qs(parts.query) == {"rule": ["relevancy_low"], "segment": [segment_key_json(SEGMENT)]}
    assert set(hook) == WEBHOOK_KEYS | {"ui_url"}

    [actions] = [b for b in slack["blocks"] if b["type"] == "actions"]
    assert actions["elements"][0]["url"] == link
    assert slack["text"] == f"{hook['summary']}\n<{link.replace('&', '&amp;')}|Open the alert page>"

    assert am["annotations"]["ui_url"] == link and am["generatorURL"] == link


def test_a_generator_url_stays_alertmanagers_link_beside_the_ui_annotation(
    low: ClickHouseStore, receiver: Receiver
) -> None:
    """ALERTS_GENERATOR_URL set: it stays the generatorURL, and the alert page goes in the `ui_url` annotation."""
    AlertRunner(low, RULES, _notifiers(receiver, DASHBOARD), ui_url=UI).run_once(NOW)
    hook, _, am = _posted(receiver)
    assert am["generatorURL"] == DASHBOARD and am["annotations"]["ui_url"] == hook["ui_url"]


def test_slack_shows_the_three_worst_answers_escaped_clipped_with_verdicts_and_links(
    low: ClickHouseStore, receiver: Receiver
) -> None:
    """Slack lists the three worst answers worst first, each with its score, one clipped line of question and answer
    in which `&`, `<` and `>` are escaped (no forged link, mention or channel ping), the statements not judged relevant
    with their verdicts, and a link to the answer's page; every section stays within Slack's limit."""
    AlertRunner(low, RULES, _notifiers(receiver), ui_url=UI).run_once(NOW)
    _, slack, _ = _posted(receiver)
    answers = [t for t in _mrkdwn(slack) if t.startswith("*#")]
    assert len(answers) == 3 and len(slack["blocks"]) <= 50
    first, second, third = answers
    assert first.startswith("*#1* score 0.05 · <https://ui.example/monitor/answer/worst-1?judge_id=j1|answer page>")
    assert second.startswith("*#2* score 0.1 ") and third.startswith("*#3* score 0.15 ")

    # Escaped: the only links are the ones the message makes; stored `<`, `>` and `&` are entities.
    for text in answers:
        assert text.count("<") == 1 and "<!" not in text and "<@" not in text  # (`>` starts the quoted lines)
    assert "Where is &lt;https://evil.example|your bank&gt;? ask &lt;!channel&gt; &amp; &lt;@U123&gt;" in first
    # Clipped to one line each: the question and the 6,000-character answer.
    [q_line] = [line for line in first.splitlines() if line.startswith("> *Q:* ")]
    [a_line] = [line for line in first.splitlines() if line.startswith("> *A:* ")]
    assert a_line.endswith("…") and len(a_line.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")) <= (
        len("> *A:* ") + RESPONSE_CLIP
    )
    assert len(q_line) <= len("> *Q:* ") + QUESTION_CLIP * 5
    assert "> *Q:* What time is it?" in second  # a newline made a space
    # The statements the judge did not find relevant, with their verdicts; the relevant one is left out.
    assert "• `no` Buy &lt;shoes&gt;." in first and "• `idk` Call &lt;@U999&gt; now." in first
    assert "It is open." not in first
    assert all(len(t) <= SECTION_LIMIT for t in _mrkdwn(slack))
    assert "Worst recent examples" in slack["blocks"][-2]["text"]["text"]


def test_answers_without_stored_text_say_text_not_stored(store: ClickHouseStore, receiver: Receiver) -> None:
    """With MONITOR_STORE_TEXT=none the rows keep '' for the question and answer: Slack says the text is not stored
    instead of showing blanks, and still shows the verdicts."""
    rows = [make_row(NOW - timedelta(minutes=m), app="a", score=0.3) for m in range(1, 20)]
    rows = [r.model_copy(update={"question": "", "response": ""}) for r in rows]
    insert(store, rows)
    AlertRunner(store, RULES, [SlackNotifier(receiver.base + "/slack", poster=FAST)], ui_url=UI).run_once(NOW)
    [slack] = receiver.posts["/slack"]
    answers = [t for t in _mrkdwn(slack) if t.startswith("*#")]
    assert len(answers) == 3
    assert all("text not stored (MONITOR_STORE_TEXT=none)" in t and "*Q:*" not in t for t in answers)


def test_a_failure_to_read_the_worst_answers_still_sends_the_page(low: ClickHouseStore, receiver: Receiver) -> None:
    """The examples query fails (a column it reads is gone): Slack still gets the alert, without answers, and one
    warning names the rule and segment, with no text of an answer."""
    low.command(f"ALTER TABLE {low.database}.{low.table} DROP COLUMN reasoning")
    with capture_logs() as logs:
        report = AlertRunner(low, RULES, _notifiers(receiver), ui_url=UI).run_once(NOW)
    assert report.sent == 3 and report.failed == 0
    _, slack, _ = _posted(receiver)
    assert not any(t.startswith("*#") for t in _mrkdwn(slack))
    assert any(b["type"] == "actions" for b in slack["blocks"])  # the link still goes
    [warning] = [e for e in logs if e["event"].startswith("worst answers not read")]
    assert warning["log_level"] == "warning" and warning["rule"] == "relevancy_low"
    assert warning["segment"] == dict(SEGMENT)
    assert "Where is" not in json.dumps(warning, default=str) and "Buy shoes" not in json.dumps(warning, default=str)


def test_ui_url_must_be_an_http_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """ALERTS_UI_URL takes http(s) URLs only; unset it is None."""
    monkeypatch.delenv("ALERTS_UI_URL", raising=False)
    assert load_alert_settings().ui_url is None
    assert load_alert_settings(ui_url="https://ui.example/monitor").ui_url == "https://ui.example/monitor"
    monkeypatch.setenv("ALERTS_UI_URL", "ui.example/monitor")
    with pytest.raises(ConfigError, match="ALERTS_UI_URL"):
        load_alert_settings()
