"""The UI's stable addresses of an alert and of an answer, so a notification can link to the page that shows it.

The web UI (monitor/ui) serves these paths; they are built here, in the alerting room, because the notifications
that carry them must not import the UI. Every value goes through the query string, percent-encoded: a segment key
is JSON and an event id is whatever the producer sent."""

from __future__ import annotations

from urllib.parse import quote, urlencode

ALERT_PATH = "/alert"
ANSWER_PATH = "/answer/"


def alert_path(rule: str, segment_key: str) -> str:
    """The path of one rule's episode on one segment (`segment_key` as stored in alert_state)."""
    return f"{ALERT_PATH}?{urlencode({'rule': rule, 'segment': segment_key})}"


def answer_path(event_id: str, judge_id: str | None = None) -> str:
    """The path of one judged answer; `judge_id` picks one judge's verdicts (else the page shows every judge's)."""
    path = ANSWER_PATH + quote(event_id, safe="")
    return f"{path}?{urlencode({'judge_id': judge_id})}" if judge_id else path


def ui_link(base_url: str, path: str) -> str:
    """`path` under the UI's public base URL (ALERTS_UI_URL), which may carry a path prefix of its own."""
    return base_url.rstrip("/") + path
