"""The notifiers' HTTP through an injected httpx2 MockTransport, with no server: retries wait the one Backoff and a
429's Retry-After with `asyncio.sleep`, a rejected payload is not retried, and errors never show a webhook's secret."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta

import httpx2
import pytest

from monitor.alerts.evaluator import AlertState
from monitor.alerts.notifiers import AlertmanagerNotifier, AlertMessage, SlackNotifier, WebhookNotifier
from monitor.alerts.poster import JsonPoster, safe_url
from monitor.backoff import Backoff
from schemas.errors import NotifyError
from tests.monitor.alerts.conftest import T0, default_rules

QUICK = Backoff(base_s=0.01, max_s=0.01, retry_after_cap_s=5.0)  # retries at once unless a Retry-After says otherwise
SLACK_URL = "https://hooks.slack.example/services/T000/B000/s3cr3t-token"


def _message() -> AlertMessage:
    rule = default_rules("relevancy_floor").rules[0]
    segment = (("app", "a"), ("judge_id", "j1"))
    state = AlertState(rule.name, segment, "firing", since=T0, fired_at=T0, value=0.3, severity="page")
    return AlertMessage("firing", rule, state, T0, T0 - timedelta(minutes=30), T0, "SELECT 1")


class Answers:
    """A MockTransport handler that answers with `script` in turn (then 200) and keeps each request and its time."""

    def __init__(self, *script: httpx2.Response) -> None:
        self.script = list(script)
        self.requests: list[httpx2.Request] = []
        self.times: list[float] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        """Answer one request."""
        self.requests.append(request)
        self.times.append(time.monotonic())
        return self.script.pop(0) if self.script else httpx2.Response(200, json={})

    def poster(self, **options: object) -> JsonPoster:
        """A poster over this handler, with quick waits."""
        return JsonPoster(backoff=QUICK, transport=httpx2.MockTransport(self), **options)  # type: ignore[arg-type]


async def test_a_429_with_retry_after_is_retried_after_the_wait() -> None:
    """A 429 with Retry-After: 0.4 is retried once it has passed, and the second answer (200) delivers the alert."""
    answers = Answers(httpx2.Response(429, headers={"Retry-After": "0.4"}))
    await WebhookNotifier("http://hook.mock/alerts", poster=answers.poster()).send([_message()])
    first, second = answers.requests
    assert answers.times[1] - answers.times[0] >= 0.4
    assert first.content == second.content and first.headers["content-type"] == "application/json"
    body = json.loads(second.content)
    assert body["source"] == "relevancy-monitor" and body["alerts"][0]["rule"] == "relevancy_floor"
    assert second.headers["user-agent"] == "relevancy-monitor-alerts/1"


async def test_a_retry_wait_leaves_the_event_loop_free() -> None:
    """While a notifier waits out a 503's Retry-After, another task on the same loop keeps running."""
    answers = Answers(httpx2.Response(503, headers={"Retry-After": "0.3"}))
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(tick())
    try:
        await AlertmanagerNotifier("http://am.mock", poster=answers.poster()).send([_message()])
    finally:
        ticker.cancel()
    assert len(answers.requests) == 2 and str(answers.requests[0].url) == "http://am.mock/api/v2/alerts"
    assert ticks >= 10  # about 30 ticks in 0.3 s; a blocking sleep would have allowed none


async def test_retry_after_is_honoured_only_on_429_and_503() -> None:
    """A 500's Retry-After is not waited for: the retry follows the Backoff's own (short) wait."""
    answers = Answers(httpx2.Response(500, headers={"Retry-After": "5"}))
    started = time.monotonic()
    await WebhookNotifier("http://hook.mock/alerts", poster=answers.poster()).send([_message()])
    assert len(answers.requests) == 2 and time.monotonic() - started < 2.0


@pytest.mark.parametrize(
    ("status", "attempts"),
    [
        (400, 1),  # the receiver rejected the payload: retrying will not help
        (502, 3),  # one attempt and two retries
    ],
)
async def test_a_notifier_that_gives_up_raises_without_the_webhook_secret(status: int, attempts: int) -> None:
    """A 400 is given up at once, a 502 after the retries; the error names the host but never the URL's secret path."""
    answers = Answers(*(httpx2.Response(status) for _ in range(3)))
    with pytest.raises(NotifyError) as caught:
        await SlackNotifier(SLACK_URL, poster=answers.poster()).send([_message()])
    assert len(answers.requests) == attempts
    assert str(caught.value) == f"POST https://hooks.slack.example/... failed: HTTP {status}"
    assert "s3cr3t" not in str(caught.value)


async def test_connection_errors_are_retried_then_given_up() -> None:
    """A receiver that cannot be reached is tried `retries` more times, then the error says why."""
    tries = 0

    def refuse(request: httpx2.Request) -> httpx2.Response:
        nonlocal tries
        tries += 1
        raise httpx2.ConnectError("[Errno 111] Connection refused", request=request)

    poster = JsonPoster(retries=1, backoff=QUICK, transport=httpx2.MockTransport(refuse))
    with pytest.raises(NotifyError, match=r"^POST http://hook\.mock/\.\.\. failed: \[Errno 111\] Connection refused$"):
        await WebhookNotifier("http://hook.mock/alerts?token=s3cr3t", poster=poster).send([_message()])
    assert tries == 2


def test_a_receiver_is_shown_by_scheme_and_host_only() -> None:
    """Credentials, path and query of a webhook URL (where its secret is) never reach a log line or an error."""
    assert safe_url("https://user:pw@hooks.slack.example/services/T0/B0/s3cr3t") == "https://hooks.slack.example/..."
    assert safe_url("http://hook.mock:8080?token=s3cr3t") == "http://hook.mock:8080/..."
