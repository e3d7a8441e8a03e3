"""The default ticket rule `judge_schema_not_enforced`: error rows of replies that did not validate, over 5 % of an
app's rows in 15 minutes, fire it; other judge errors (a provider outage) do not."""

from __future__ import annotations

from datetime import timedelta

from monitor.alerts.engine import evaluate_rules
from monitor.store.connection import ClickHouseStore
from tests.monitor.alerts.conftest import T0, default_rules, insert, make_row


def _minutes(store: ClickHouseStore, app: str, error: str, every: int) -> None:
    rows = []
    for m in range(40):
        t = T0 + timedelta(minutes=m)
        for k in range(4):
            rows.append(make_row(t + timedelta(seconds=k * 10), app=app, score=0.8))
        if m % every == 0:
            bad = make_row(t + timedelta(seconds=50), app=app, status="error", score=None, cost=None)
            rows.append(bad.model_copy(update={"error": error}))
    insert(store, rows)


def test_invalid_replies_fire_the_ticket_and_an_outage_does_not(store: ClickHouseStore) -> None:
    """One invalid reply for every four scores (20 %) fires the ticket for that app; the same share of
    `unavailable` errors in another app is the error-rate page's business, not this rule's."""
    _minutes(
        store, "vllm-app", "invalid_reply: no JSON object in the reply (json_schema mode after a corrective retry)", 1
    )
    _minutes(store, "outage-app", "unavailable: server_error: HTTP 503 (after 4 attempts)", 1)
    rules = default_rules("judge_schema_not_enforced", ignore_for=True)
    assert rules.rules[0].severity == "ticket"
    ev = evaluate_rules(store, rules, T0 + timedelta(minutes=40), {})
    by_app = {dict(r.observation.segment)["app"]: r for r in ev.results}
    assert by_app["vllm-app"].observation.value is not None and by_app["vllm-app"].observation.value > 0.15
    assert by_app["vllm-app"].state.state == "firing"
    assert by_app["outage-app"].observation.value == 0 and by_app["outage-app"].state.state == "inactive"
    assert "MONITOR_JUDGE_STRUCTURED_OUTPUT" in (rules.rules[0].description or "")
