"""The runner against chDB and a real local HTTP receiver: payloads of the three notifiers, state that survives
a restart without re-notifying, failing notifiers, and the lease between replicas."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from monitor.alerts.engine import AlertRunner
from monitor.alerts.notifiers import AlertmanagerNotifier, SlackNotifier, WebhookNotifier
from monitor.alerts.poster import JsonPoster
from monitor.alerts.rules import RuleSet
from monitor.alerts.state import StateStore
from monitor.backoff import Backoff
from monitor.store.connection import ClickHouseStore
from monitor.store.migrations import Migrations
from tests.monitor.alerts.conftest import T0, insert, noisy, rules_from, stream
from tests.monitor.alerts.receiver import Receiver

RULES = RuleSet(
    rules=rules_from("""
- name: relevancy_drop
  description: Mean relevancy fell.
  metric: mean_score
  segment_by: [app]
  window: 30m
  baseline: {trailing: 24h}
  condition: {relative_change: {fire: 0.10, clear: 0.05}}
  min_events: 30
  min_baseline_events: 100
  for: 0s
  repeat_interval: 1h
  severity: page
  labels: {team: assistants}
""")
)
FAST = JsonPoster(backoff=Backoff(base_s=0.01, max_s=0.01))  # retries without the production waits
DASHBOARD, TTL = "http://grafana.local/d/relevancy", timedelta(minutes=4)
NOW = T0 + timedelta(hours=25)  # bad since T0+24h30m, so the window [NOW-30m, NOW) is all bad


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A local HTTP receiver recording what the notifiers post."""
    with Receiver() as r:
        yield r


@pytest.fixture
def dropped(store: ClickHouseStore) -> ClickHouseStore:
    """App `a` drops from 0.75 to 0.45 at T0+24h30m; app `b` stays at 0.75."""
    segs = [{"app": "a"}, {"app": "b"}]
    insert(store, stream(T0, T0 + timedelta(hours=24, minutes=30), per_minute=2, segments=segs, score=noisy(0.75, 0.1)))
    insert(
        store,
        stream(
            T0 + timedelta(hours=24, minutes=30), NOW, per_minute=2, segments=segs[:1], score=noisy(0.45, 0.1), seed=5
        ),
    )
    insert(
        store,
        stream(
            T0 + timedelta(hours=24, minutes=30), NOW, per_minute=2, segments=segs[1:], score=noisy(0.75, 0.1), seed=6
        ),
    )
    return store


def notifiers(receiver: Receiver) -> list[object]:
    """The webhook, Slack and Alertmanager notifiers, all posting to `receiver`."""
    return [
        WebhookNotifier(receiver.base + "/hook", poster=FAST),
        SlackNotifier(receiver.base + "/slack", poster=FAST),
        AlertmanagerNotifier(receiver.base + "/am", resend_ttl=TTL, generator_url=DASHBOARD, poster=FAST),
    ]


def _recover(store: ClickHouseStore, start: datetime, end: datetime) -> None:
    insert(store, stream(start, end, per_minute=2, segments=[{"app": "a"}], score=noisy(0.75, 0.1), seed=8))


def test_payloads_of_webhook_slack_and_alertmanager_through_fire_resend_and_resolve(
    dropped: ClickHouseStore, receiver: Receiver
) -> None:
    """The three notifiers get complete payloads on firing, only Alertmanager is re-sent while firing, and each is told
    once of the resolve."""
    store = dropped
    runner = AlertRunner(store, RULES, notifiers(receiver))  # type: ignore[arg-type]
    report = runner.run_once(NOW)
    assert report.leader and report.failed == 0 and report.sent == 3

    [hook] = receiver.posts["/hook"]
    assert hook["source"] == "relevancy-monitor" and len(hook["alerts"]) == 1
    a = hook["alerts"][0]
    assert a["status"] == "firing" and a["rule"] == "relevancy_drop" and a["severity"] == "page"
    assert a["segment"] == {"app": "a", "judge_id": "j1"} and a["labels"] == {"team": "assistants"}
    assert a["value"] == pytest.approx(0.45, abs=0.05) and a["baseline"] == pytest.approx(0.75, abs=0.03)
    assert a["n_current"] == 60 and a["n_baseline"] >= 2800
    assert a["p_value"] < 1e-10 and a["test"].startswith("welch_t")
    assert a["fired_at"] == "2026-11-03T01:00:00Z"
    assert a["window"] == {"start": "2026-11-03T00:30:00Z", "end": "2026-11-03T01:00:00Z", "length": "30m"}
    # The ready query lists this segment's worst answers of the window, worst first.
    examples = store.query(a["examples_sql"])
    assert len(examples.rows) == 20
    col = examples.columns.index("score")
    scores = [r[col] for r in examples.rows]
    assert scores == sorted(scores) and all(r[examples.columns.index("app")] == "a" for r in examples.rows)

    [slack] = receiver.posts["/slack"]
    assert slack["text"].startswith("[PAGE] relevancy_drop: mean_score 0.4") and "app=a judge_id=j1" in slack["text"]
    assert slack["blocks"][0]["type"] == "section" and "Worst recent examples" in slack["blocks"][-1]["text"]["text"]

    [am] = receiver.posts["/am/api/v2/alerts"]
    assert isinstance(am, list) and len(am) == 1
    alert = am[0]
    assert alert["labels"] == {
        "alertname": "relevancy_drop",
        "severity": "page",
        "source": "relevancy-monitor",
        "team": "assistants",
        "app": "a",
        "judge_id": "j1",
    }
    assert alert["startsAt"] == "2026-11-03T01:00:00Z" and alert["endsAt"] == "2026-11-03T01:04:00Z"
    assert alert["generatorURL"] == DASHBOARD
    assert {"summary", "value", "baseline", "n_current", "n_baseline", "p_value", "examples_sql"} <= set(
        alert["annotations"]
    )

    # Next round, still firing: Alertmanager gets the alert again with endsAt pushed ahead; the webhooks do not.
    runner.run_once(NOW + timedelta(minutes=1))
    assert (
        len(receiver.posts["/am/api/v2/alerts"]) == 2
        and receiver.posts["/am/api/v2/alerts"][1][0]["endsAt"] == "2026-11-03T01:05:00Z"
    )
    assert len(receiver.posts["/hook"]) == 1 and len(receiver.posts["/slack"]) == 1

    # Recovery: one resolve to each; Alertmanager's endsAt is the resolve time.
    _recover(store, NOW, NOW + timedelta(minutes=40))
    later = NOW + timedelta(minutes=40)
    runner.run_once(later)
    assert receiver.posts["/hook"][-1]["alerts"][0]["status"] == "resolved"
    assert receiver.posts["/slack"][-1]["text"].startswith("[RESOLVED] relevancy_drop")
    assert receiver.posts["/am/api/v2/alerts"][-1][0]["endsAt"] == "2026-11-03T01:40:00Z"
    counts = (len(receiver.posts["/hook"]), len(receiver.posts["/slack"]), len(receiver.posts["/am/api/v2/alerts"]))
    runner.run_once(later + timedelta(minutes=1))
    assert (
        len(receiver.posts["/hook"]),
        len(receiver.posts["/slack"]),
        len(receiver.posts["/am/api/v2/alerts"]),
    ) == counts  # resolved once
    assert receiver.headers[0]["Content-Type"] == "application/json"


def test_state_survives_a_restart_without_renotifying(dropped: ClickHouseStore, receiver: Receiver) -> None:
    """A restarted runner loads the stored state and does not page again until repeat_interval has passed."""
    store = dropped
    first = AlertRunner(store, RULES, [WebhookNotifier(receiver.base + "/hook")])
    first.run_once(NOW)
    assert len(receiver.posts["/hook"]) == 1

    # A new process: a new runner, a new client, the same tables.
    store2 = ClickHouseStore(store.url, store.database, store.table)
    try:
        Migrations(store2).ensure(migrate=False)  # as `alerts run` opens its store for the state it writes
        second = AlertRunner(store2, RULES, [WebhookNotifier(receiver.base + "/hook")])
        saved = StateStore(store2).load()
        [state] = [s for s in saved.values() if s.state == "firing"]
        assert dict(state.segment) == {"app": "a", "judge_id": "j1"} and state.notified == {"webhook": "firing"}
        assert state.fired_at == NOW and state.last_notified_at == NOW and state.value == pytest.approx(0.45, abs=0.05)
        for minutes in (1, 2, 30):
            second.run_once(NOW + timedelta(minutes=minutes))
        assert len(receiver.posts["/hook"]) == 1  # no second page after the restart
        second.run_once(NOW + timedelta(hours=1))
        assert (
            len(receiver.posts["/hook"]) == 2 and receiver.posts["/hook"][1]["alerts"][0]["kind"] == "repeat"
        )  # repeat_interval
    finally:
        store2.close()


def test_a_failing_notifier_is_counted_and_retried_next_round_and_never_stops_the_others(
    dropped: ClickHouseStore, receiver: Receiver
) -> None:
    """A failing notifier is counted and retried the next round, while the other notifiers still deliver."""
    receiver.fail["/slack"] = 3  # the first send (1 try + 2 retries) fails
    closed_port = "http://127.0.0.1:9/nothing-listens-here"
    runner = AlertRunner(
        dropped,
        RULES,
        [
            WebhookNotifier(receiver.base + "/hook", poster=FAST),
            SlackNotifier(receiver.base + "/slack", poster=FAST),
            WebhookNotifier(closed_port, name="dead", poster=replace(FAST, timeout_s=0.5, retries=1)),
        ],
    )
    report = runner.run_once(NOW)
    assert report.sent == 1 and report.failed == 2
    assert receiver.attempts["/slack"] == 3 and len(receiver.posts["/hook"]) == 1
    failed = runner.metrics.registry.get_sample_value(
        "relevancy_monitor_alert_notifications_total", {"notifier": "slack", "outcome": "failed"}
    )
    assert failed == 1
    [state] = [s for s in StateStore(dropped).load().values() if s.state == "firing"]
    assert state.notified == {"webhook": "firing"}  # slack and dead still owe the firing notice

    report = runner.run_once(NOW + timedelta(minutes=1))
    assert (
        len(receiver.posts["/slack"]) == 1 and len(receiver.posts["/hook"]) == 1
    )  # slack caught up, webhook not repeated
    assert report.failed == 1  # the dead endpoint, again, without crashing anything


def test_only_the_lease_holder_evaluates_and_a_standby_takes_over(dropped: ClickHouseStore, receiver: Receiver) -> None:
    """Only the lease holder evaluates; a standby takes over after the TTL, or at once on release, without sending
    twice."""
    ttl = timedelta(minutes=3)
    one = AlertRunner(dropped, RULES, [WebhookNotifier(receiver.base + "/hook")], replica="one", lease_ttl=ttl)
    two = AlertRunner(dropped, RULES, [WebhookNotifier(receiver.base + "/hook")], replica="two", lease_ttl=ttl)
    assert one.run_once(NOW).leader
    assert not two.run_once(NOW + timedelta(seconds=1)).leader
    assert one.run_once(NOW + timedelta(minutes=1)).leader
    assert not two.run_once(NOW + timedelta(minutes=1, seconds=1)).leader
    assert len(receiver.posts["/hook"]) == 1
    # `one` dies: after the TTL `two` leads, with the stored state, so nothing is sent twice.
    report = two.run_once(NOW + timedelta(minutes=5))
    assert report.leader and report.sent == 0 and len(receiver.posts["/hook"]) == 1
    # `one` comes back (same process, stale heartbeat): it rejoins behind `two`.
    assert not one.run_once(NOW + timedelta(minutes=6)).leader
    # `two` steps down on shutdown: `one` takes over at once.
    assert two.lease is not None
    two.lease.release(NOW + timedelta(minutes=6, seconds=30))
    assert one.run_once(NOW + timedelta(minutes=7)).leader


def test_state_rows_are_written_only_when_something_changes(dropped: ClickHouseStore) -> None:
    """State rows are written for active segments and on changes only, never for quiet segments."""
    runner = AlertRunner(dropped, RULES, [])
    assert runner.run_once(NOW).saved == 1  # a firing; b is inactive and never stored
    rows = dropped.query(f"SELECT count() FROM {dropped.database}.alert_state").rows[0][0]
    assert rows == 1
    assert runner.run_once(NOW + timedelta(minutes=1)).saved == 1  # firing: refreshed
    _recover(dropped, NOW, NOW + timedelta(minutes=40))
    assert runner.run_once(NOW + timedelta(minutes=40)).saved == 1  # resolved
    assert runner.run_once(NOW + timedelta(minutes=41)).saved == 0  # quiet
    assert datetime.now(UTC) > NOW  # times in these tests are explicit, never the clock's


def test_a_round_reports_what_each_notifier_was_given(dropped: ClickHouseStore, receiver: Receiver) -> None:
    """A round reports per notifier how many alerts it delivered and how many failed (with the error), and its counts
    for the log line."""
    receiver.fail["/slack"] = 3  # the first send (1 try + 2 retries) fails
    runner = AlertRunner(dropped, RULES, notifiers(receiver)[:2])  # type: ignore[arg-type]
    report = runner.run_once(NOW)
    hook, slack = report.deliveries
    assert (hook.notifier, hook.sent, hook.failed, hook.error) == ("webhook", 1, 0, "")
    assert (slack.notifier, slack.sent, slack.failed) == ("slack", 0, 1) and "HTTP 500" in slack.error
    fields = report.log_fields()
    assert fields["notifications"] == {"webhook": {"sent": 1, "failed": 0}, "slack": {"sent": 0, "failed": 1}}
    assert {
        k: fields[k] for k in ("rules", "segments", "firing", "newly_firing", "pending", "resolved", "rule_errors")
    } == {
        "rules": 1,
        "segments": 2,
        "firing": 1,
        "newly_firing": 1,
        "pending": 0,
        "resolved": 0,
        "rule_errors": 0,
    }
    report = runner.run_once(NOW + timedelta(minutes=1))
    assert [(d.notifier, d.sent, d.failed) for d in report.deliveries] == [
        ("webhook", 0, 0),
        ("slack", 1, 0),
    ]  # slack caught up
