"""Notifiers: a generic JSON webhook, a Slack-compatible webhook, and the Prometheus Alertmanager v2 API.

With the UI's public URL (ALERTS_UI_URL) each carries the link to the alert's page; Slack also shows the segment's
worst answers with the statements the judge found off-topic. Without it every payload is as it was before the UI.

Each posts through a `JsonPoster` (httpx2, a timeout per attempt, retries on connection errors, 429 and 5xx with
awaited waits). A notifier that still fails raises `NotifyError`; the caller logs and counts it and carries on."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from monitor.alerts.evaluator import AlertState, NoticeKind
from monitor.alerts.judge_drift import JudgeSuspect
from monitor.alerts.links import alert_path, answer_path, ui_link
from monitor.alerts.poster import JsonPoster
from monitor.alerts.rules import Rule
from monitor.alerts.windows import BaselineSource
from monitor.alerts.worst_answers import WorstAnswer
from schemas.durations import format_duration


@dataclass(frozen=True, slots=True)
class AlertMessage:
    """Everything a notifier needs to tell about one rule and segment."""

    kind: NoticeKind
    rule: Rule
    state: AlertState
    now: datetime
    window_start: datetime
    window_end: datetime
    examples_sql: str
    test: str = ""
    judge: str = ""
    baseline_from: BaselineSource | None = None  # None: the segment's own history
    suspect: JudgeSuspect | None = None  # the judge's canaries fire too: its figures (`judge_drift`)
    ui_base: str = ""  # ALERTS_UI_URL: the UI's public base URL ("" when unset: no links)
    worst: tuple[WorstAnswer, ...] = ()  # the segment's worst answers, read for the notifiers that show them

    @property
    def ui_url(self) -> str:
        """The alert's page in the UI ("" without ALERTS_UI_URL)."""
        return ui_link(self.ui_base, alert_path(self.rule.name, self.state.key[1])) if self.ui_base else ""

    def answer_url(self, answer: WorstAnswer) -> str:
        """One answer's page in the UI ("" without ALERTS_UI_URL)."""
        return ui_link(self.ui_base, answer_path(answer.event_id, answer.judge_id or None)) if self.ui_base else ""

    @property
    def status(self) -> str:
        """`firing` (also for repeats) or `resolved`."""
        return "resolved" if self.kind == "resolved" else "firing"

    @property
    def fingerprint(self) -> str:
        """Stable identity of the alert (rule and segment), for receivers that deduplicate."""
        return f"{self.rule.name}|{self.state.key[1]}"

    @property
    def segment(self) -> dict[str, str]:
        """Segment labels (app, model, prompt_version, judge_id as keyed)."""
        return dict(self.state.segment)

    def summary(self) -> str:
        """One line for people; it names the baseline whenever that is not the segment's own history, and ends with
        the canaries' figures when the judge is suspect."""
        text = self._summary()
        return f"{text}; {self.suspect.text()}" if self.suspect is not None and self.kind != "resolved" else text

    def _summary(self) -> str:
        s = self.state
        seg = " ".join(f"{k}={v}" for k, v in s.segment) or "all traffic"
        head = "RESOLVED" if self.kind == "resolved" else s.severity.upper()
        src = self.baseline_from
        if src is not None and src.kind == "previous_version":
            # A rollout: both versions, with their means and sizes, then the test.
            what, new, old = "/".join(src.fields), "/".join(src.segment_values), ", ".join(src.baseline_values)
            p = f", p={s.p_value:.2g}" if s.p_value is not None else ""
            return (
                f"[{head}] {self.rule.name}: {what} {new} mean {_fmt(s.value)} (n={s.n_current}) "
                f"vs {old} before it mean {_fmt(s.baseline)} (n={s.n_baseline}){p}, for {seg}"
            )
        parts = [f"[{head}] {self.rule.name}: {self.rule.metric} {_fmt(s.value)}"]
        if s.baseline is not None:
            parts.append(f"vs baseline {_fmt(s.baseline)}")
        parts.append(f"(n={s.n_current}/{s.n_baseline}" + (f", p={s.p_value:.2g})" if s.p_value is not None else ")"))
        parts.append(f"for {seg}")
        text = " ".join(parts)
        return f"{text}; {src.describe()}" if src is not None else text

    def as_dict(self) -> dict[str, Any]:
        """The JSON object of the generic webhook."""
        s = self.state
        out: dict[str, Any] = {
            "status": self.status,
            "kind": self.kind,
            "fingerprint": self.fingerprint,
            "rule": self.rule.name,
            "description": self.rule.description,
            "severity": s.severity,
            "metric": self.rule.metric,
            "labels": {**self.rule.labels},
            "segment": self.segment,
            "judge": self.judge,
            "value": s.value,
            "baseline": s.baseline,
            "n_current": s.n_current,
            "n_baseline": s.n_baseline,
            "p_value": s.p_value,
            "test": self.test,
            "baseline_source": _source_dict(self.baseline_from),
            "suspect_judge": _suspect_dict(self.suspect),
            "note": s.note,
            "window": {
                "start": _iso(self.window_start),
                "end": _iso(self.window_end),
                "length": format_duration(self.rule.window),
            },
            "since": _iso(s.since),
            "fired_at": _iso(s.fired_at),
            "resolved_at": _iso(s.resolved_at),
            "summary": self.summary(),
            "examples_sql": self.examples_sql,
        }
        if self.ui_base:
            out["ui_url"] = self.ui_url
        return out


def _suspect_dict(suspect: JudgeSuspect | None) -> dict[str, Any] | None:
    if suspect is None:
        return None
    return {
        "judge_id": suspect.judge_id,
        "text": suspect.text(),
        "canaries": [dataclasses.asdict(c) for c in suspect.canaries],
    }


def _source_dict(src: BaselineSource | None) -> dict[str, Any] | None:
    if src is None:
        return None
    return {
        "kind": src.kind,
        "fields": list(src.fields),
        "segment_values": list(src.segment_values),
        "baseline_values": list(src.baseline_values),
        "reason": src.reason,
        "description": src.describe(),
    }


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def _iso(dt: datetime | None) -> str | None:
    return None if dt is None else dt.isoformat().replace("+00:00", "Z")


class Notifier(Protocol):
    """Delivers alert messages; `resend_while_firing` notifiers get every firing alert every round."""

    name: str
    resend_while_firing: bool
    shows_answers: bool  # its messages show the segment's worst answers (read by the runner for it)

    async def send(self, messages: list[AlertMessage]) -> None:
        """Deliver `messages`; raises `NotifyError`."""
        ...


class WebhookNotifier:
    """POSTs {"version", "source", "alerts": [...]} to a URL, one request per round; told of transitions and
    of repeats every rule's repeat_interval."""

    resend_while_firing = False
    shows_answers = False

    def __init__(self, url: str, *, name: str = "webhook", poster: JsonPoster | None = None) -> None:
        self.url, self.name, self.poster = url, name, poster or JsonPoster()

    async def send(self, messages: list[AlertMessage]) -> None:
        """See `Notifier.send`."""
        if messages:
            payload = {"version": "1", "source": "relevancy-monitor", "alerts": [m.as_dict() for m in messages]}
            await self.poster.post(self.url, [payload])


class SlackNotifier:
    """Slack-compatible incoming webhook: one message per alert, `text` plus Block Kit blocks."""

    resend_while_firing = False
    shows_answers = True

    def __init__(self, url: str, *, name: str = "slack", poster: JsonPoster | None = None) -> None:
        self.url, self.name, self.poster = url, name, poster or JsonPoster()

    async def send(self, messages: list[AlertMessage]) -> None:
        """See `Notifier.send`; raises after the first message that cannot be delivered."""
        if messages:
            await self.poster.post(self.url, [slack_payload(m) for m in messages])


def slack_payload(m: AlertMessage) -> dict[str, Any]:
    """The Slack message of one alert."""
    s = m.state
    fields = [
        f"*Segment*\n{', '.join(f'{k}={v}' for k, v in s.segment) or 'all traffic'}",
        f"*Value / baseline*\n{_fmt(s.value)} / {_fmt(s.baseline)}",
        f"*Samples (now / baseline)*\n{s.n_current} / {s.n_baseline}",
        f"*p-value*\n{'n/a' if s.p_value is None else f'{s.p_value:.3g}'} ({m.test or 'no test'})",
    ]
    if m.baseline_from is not None:
        fields.append(f"*Baseline*\n{m.baseline_from.describe()}")
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*{m.summary()}*\n{m.rule.description}".strip()}},
        {"type": "section", "fields": [{"type": "mrkdwn", "text": f} for f in fields]},
    ]
    if m.kind != "resolved":
        blocks += [_answer_block(m, i, a) for i, a in enumerate(m.worst[:MAX_ANSWER_BLOCKS], 1)]
        blocks.append(
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": f"Worst recent examples:\n```{m.examples_sql[:2800]}```"},
            }
        )
    if not m.ui_base:
        return {"text": m.summary(), "blocks": blocks}
    url = m.ui_url
    button = {"type": "button", "text": {"type": "plain_text", "text": "Open the alert page"}, "url": url}
    blocks.append({"type": "actions", "elements": [button]})
    return {"text": f"{m.summary()}\n<{slack_escape(url)}|Open the alert page>", "blocks": blocks}


# Slack's limits: 3000 characters in a section's text, 50 blocks a message. An answer's block is kept well inside
# the first: one line of each text, a few statements, each clipped before it is escaped (escaping can only lengthen
# it, up to five times for `&`), then the whole cut again to the limit.
SECTION_LIMIT = 3000
MAX_ANSWER_BLOCKS = 3
QUESTION_CLIP, RESPONSE_CLIP, STATEMENT_CLIP, STATEMENTS_SHOWN = 150, 200, 120, 3
NOT_STORED = "_text not stored (MONITOR_STORE_TEXT=none)_"


def slack_escape(text: str) -> str:
    """Text for Slack mrkdwn with its control characters escaped (`&`, `<`, `>`): stored text cannot open a link,
    a mention or a channel ping."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def one_line(text: str, limit: int) -> str:
    """`text` on one line (whitespace runs made one space), cut to `limit` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _quoted(text: str, limit: int) -> str:
    return slack_escape(one_line(text, limit)) if text else "_(empty)_"


def _answer_block(m: AlertMessage, rank: int, a: WorstAnswer) -> dict[str, Any]:
    score = "error" if a.status != "ok" else _fmt(a.score)
    url = m.answer_url(a)
    head = f"*#{rank}* score {score}" + (f" · <{slack_escape(url)}|answer page>" if url else "")
    lines = [head]
    if a.status != "ok":
        lines.append(f"> error: {_quoted(a.error, RESPONSE_CLIP)}")
    if not a.text_stored:
        lines.append(f"> {NOT_STORED}")
    else:
        lines.append(f"> *Q:* {_quoted(a.question, QUESTION_CLIP)}")
        lines.append(f"> *A:* {_quoted(a.response, RESPONSE_CLIP)}")
    for v in a.off_topic[:STATEMENTS_SHOWN]:
        said = slack_escape(one_line(v.statement, STATEMENT_CLIP)) if v.statement else "_(text not stored)_"
        lines.append(f"• `{slack_escape(one_line(v.verdict, 10))}` {said}")
    if len(a.off_topic) > STATEMENTS_SHOWN:
        lines.append(f"• and {len(a.off_topic) - STATEMENTS_SHOWN} more not judged relevant")
    return {"type": "section", "text": {"type": "mrkdwn", "text": _fit("\n".join(lines), SECTION_LIMIT)}}


def _fit(text: str, limit: int) -> str:
    """`text` cut to `limit` characters without splitting an escape (`&amp;`) or a link at the end."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    amp, semi = cut.rfind("&"), cut.rfind(";")
    if amp > semi:
        cut = cut[:amp]
    opened, closed = cut.rfind("<"), cut.rfind(">")
    if opened > closed:
        cut = cut[:opened]
    return cut + "…"


class AlertmanagerNotifier:
    """Prometheus Alertmanager v2: POST {url}/api/v2/alerts with every firing alert each round (endsAt a few
    rounds ahead, so a dead evaluator's alerts expire) and endsAt=now once to resolve."""

    resend_while_firing = True
    shows_answers = False

    def __init__(
        self,
        url: str,
        *,
        resend_ttl: timedelta = timedelta(minutes=5),
        generator_url: str = "",
        name: str = "alertmanager",
        poster: JsonPoster | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.resend_ttl, self.generator_url, self.name = resend_ttl, generator_url, name
        self.poster = poster or JsonPoster()

    async def send(self, messages: list[AlertMessage]) -> None:
        """See `Notifier.send`."""
        if messages:
            await self.poster.post(self.url + "/api/v2/alerts", [[self.alert(m) for m in messages]])

    def alert(self, m: AlertMessage) -> dict[str, Any]:
        """One postable alert."""
        s = m.state
        labels = {
            "alertname": m.rule.name,
            "severity": s.severity,
            "source": "relevancy-monitor",
            **m.rule.labels,
            **{k: v for k, v in s.segment},
        }
        annotations = {
            "summary": m.summary(),
            "description": m.rule.description,
            "metric": m.rule.metric,
            "value": _fmt(s.value),
            "baseline": _fmt(s.baseline),
            "n_current": str(s.n_current),
            "n_baseline": str(s.n_baseline),
            "p_value": "n/a" if s.p_value is None else f"{s.p_value:.3g}",
            "test": m.test,
            "baseline_source": m.baseline_from.describe() if m.baseline_from is not None else "",
            "suspect_judge": m.suspect.text() if m.suspect is not None else "",
            "examples_sql": m.examples_sql,
            "ui_url": m.ui_url,
        }
        starts = s.fired_at or s.since or m.now
        ends = (s.resolved_at or m.now) if m.kind == "resolved" else m.now + self.resend_ttl
        out: dict[str, Any] = {
            "labels": labels,
            "annotations": {k: v for k, v in annotations.items() if v},
            "startsAt": _iso(starts),
            "endsAt": _iso(ends),
        }
        generator = self.generator_url or m.ui_url
        if generator:
            out["generatorURL"] = generator
        return out
