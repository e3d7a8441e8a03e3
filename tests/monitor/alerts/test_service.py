"""The alert service, built from settings slices: the notifiers the alert settings name, and a round that delivers
over an injected httpx2 transport and saves its state."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import httpx2

from monitor.alerts.notifiers import AlertmanagerNotifier, SlackNotifier, WebhookNotifier
from monitor.alerts.rules import RuleSet
from monitor.alerts.service import AlertService, ServiceSettings, build_notifiers
from monitor.alerts.settings import AlertSettings
from monitor.alerts.state import StateStore
from monitor.judges.settings import JudgeSettings
from monitor.judging.settings import FlowSettings
from monitor.store.connection import ClickHouseStore
from monitor.store.settings import StoreSettings
from tests.monitor.alerts.conftest import insert, noisy, rules_from, stream

FLOOR = RuleSet(
    rules=rules_from("""
- name: floor
  metric: mean_score
  window: 30m
  condition: {threshold: 0.4}
""")
)


def test_the_notifiers_follow_the_alert_settings() -> None:
    """Each URL set gives its notifier, in a fixed order, with the notify timeout; Alertmanager's endsAt 4 rounds on."""
    alert = AlertSettings(
        webhook_url="http://hook.example/a",
        slack_webhook_url="https://hooks.slack.example/services/x",
        alertmanager_url="http://am.example:9093",
        generator_url="http://grafana.example/d/1",
        interval=timedelta(minutes=2),
        notify_timeout_s=2.5,
    )
    webhook, slack, am = build_notifiers(alert)
    assert isinstance(webhook, WebhookNotifier) and isinstance(slack, SlackNotifier)
    assert isinstance(am, AlertmanagerNotifier)
    assert [webhook.url, slack.url, am.url] == [alert.webhook_url, alert.slack_webhook_url, alert.alertmanager_url]
    assert am.resend_ttl == timedelta(minutes=8) and am.generator_url == "http://grafana.example/d/1"
    assert {n.poster.timeout_s for n in (webhook, slack, am)} == {2.5}
    assert build_notifiers(AlertSettings(interval=timedelta(seconds=30))) == []


def test_a_round_of_the_service_delivers_over_the_injected_transport(store: ClickHouseStore) -> None:
    """Built from the slices with a MockTransport, one round notifies the webhook and Alertmanager without a server,
    saves the firing state, and closing the service closes its own store."""
    now = datetime.now(UTC)  # the service's round runs at the real time: the rows are placed before it
    insert(store, stream(now - timedelta(minutes=20), now, per_minute=3, segments=[{}], score=noisy(0.2, 0.05)))
    seen: list[httpx2.Request] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, json={})

    alert = AlertSettings(webhook_url="http://hook.mock/a", alertmanager_url="http://am.mock", canary_interval="off")
    store_slice = StoreSettings(clickhouse_url=store.url, clickhouse_database=store.database)
    slices = ServiceSettings(alert, store_slice, JudgeSettings(), FlowSettings())
    with AlertService.build(slices, FLOOR, once=True, lease=False, transport=httpx2.MockTransport(answer)) as service:
        report = service.run_once()
        assert service.notifier_names == ["webhook", "alertmanager"] and service.runner.lease is None
    assert (report.sent, report.failed, report.saved) == (2, 0, 1)
    assert [str(r.url) for r in seen] == ["http://hook.mock/a", "http://am.mock/api/v2/alerts"]
    assert json.loads(seen[0].content)["alerts"][0]["rule"] == "floor"
    [state] = StateStore(store).load().values()
    assert state.state == "firing" and state.notified == {"webhook": "firing", "alertmanager": "firing"}
    assert not service.store.schema_ready  # closed: its writes refuse until the schema is checked again
