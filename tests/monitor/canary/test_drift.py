"""The canary rules end to end: canary runs judged by the rubric judge against the fake Messages API, whose brain
then scores the pairs a rubric point lower (or higher), fire through the same state, notifications, `alerts check`
and backtest as every rule; a real product regression fires the live rules while the canaries hold. What a drifted
judge does to the live alerts (its live traffic judged by the drifted judge) is `test_judge_suspect`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from monitor.alerts.backtest import run_backtest
from monitor.alerts.engine import AlertRunner
from monitor.alerts.notifiers import WebhookNotifier
from monitor.alerts.rules import RuleSet
from monitor.calibration.labels import golden_path
from monitor.canary.service import Canary, CanarySettings
from monitor.cli.alert_check_table import check_rows
from monitor.config import load_settings
from monitor.store.connection import ClickHouseStore
from tests.fake_messages_api import FakeMessagesAPI, RecordedRequest, default_brain
from tests.monitor.alerts.conftest import T0, default_rules, insert, noisy, stream
from tests.monitor.alerts.receiver import Receiver

HOUR = timedelta(hours=1)
CANARY_RULES = (
    "canary_agreement_drop",
    "canary_agreement_floor",
    "canary_scores_lower",
    "canary_scores_higher",
    "canary_errors",
)


def drifting_brain(shift: list[int]) -> Callable[[RecordedRequest], str | dict[str, Any]]:
    """The default brain, its rubric scores moved by `shift[0]` points (0..4): a provider's model update behind the
    same name."""

    def brain(request: RecordedRequest) -> str | dict[str, Any]:
        reply = default_brain(request)
        if isinstance(reply, dict) and "score" in reply:
            reply = {**reply, "score": min(4, max(0, int(reply["score"]) + shift[0]))}
        return reply

    return brain


@pytest.mark.long(seconds=69)
@pytest.mark.parametrize(("points", "fires"), [(-1, "canary_scores_lower"), (1, "canary_scores_higher")])
def test_a_judge_that_drifts_fires_its_canary_and_not_the_live_alerts(
    store: ClickHouseStore, points: int, fires: str, single_turn_golden: Path
) -> None:
    """A rubric judge moved a point fires that canary rule (webhook, state, check, backtest), and only that rule."""
    shift = [0]
    with FakeMessagesAPI(drifting_brain(shift)) as api:
        settings = load_settings(judge="rubric", **api.settings_overrides())
        canary = Canary(
            store,
            CanarySettings(HOUR, single_turn_golden, settings.judge, settings.flow, settings.redaction),
            background=False,
        )
        judge_id = canary.judge.judge_id
        # Rows of the same judge from before the drift, so the live rules have data to decide on (live traffic judged
        # after the drift is test_judge_suspect's). From hours before the rules' day: no baseline is partly filled.
        segs = [{"app": "support"}, {"app": "travel"}]
        start = T0 - 3 * HOUR
        insert(
            store,
            stream(
                start,
                T0 + 27 * HOUR,
                per_minute=2,
                segments=segs,
                score=noisy(0.75, 0.1),
                judge_id=judge_id,
                judge="rubric",
            ),
        )
        rules = default_rules(ignore_for=True)
        with Receiver() as receiver:
            runner = AlertRunner(store, rules, [WebhookNotifier(receiver.base + "/hook")], canary=canary)
            for hours in (24, 25):
                report = runner.run_once(T0 + hours * HOUR)
                assert report.canary is not None and report.canary.written is not None
            shift[0] = points
            runner.run_once(T0 + 26 * HOUR)  # the drifted run is judged and written ...
            final = runner.run_once(T0 + 26 * HOUR + timedelta(minutes=2))  # ... and is in the canary rules' window
            posts = receiver.posts["/hook"]
    sent = [a for post in posts for a in post["alerts"]]
    assert {a["rule"] for a in sent} == {fires} and all(a["status"] == "firing" for a in sent)
    [alert] = sent
    assert alert["segment"] == {"judge_id": judge_id, "labels": canary.labelled.name} and alert["judge"] == "rubric"
    assert abs(alert["value"] - alert["baseline"]) >= 0.10 and alert["n_current"] == 107 and alert["n_baseline"] == 214
    worst = store.query(alert["examples_sql"]).rows  # the notification's query lists the pairs that moved most
    assert worst and all(abs(r[8]) >= 0.25 for r in worst[:5])

    assert final.evaluation is not None
    rows = {
        r["rule"]: r for r in check_rows(final.evaluation) if r["segment"] is not None and r["rule"] in CANARY_RULES
    }
    assert rows[fires]["state"] == "firing" and rows[fires]["sufficient"] and "changed by" in rows[fires]["note"]
    assert rows["canary_errors"]["state"] == "inactive" and rows["canary_errors"]["value"] == 0.0

    backtest = run_backtest(
        store, RuleSet(rules=rules.rules), T0 + 24 * HOUR, T0 + 26 * HOUR + timedelta(minutes=30), timedelta(minutes=5)
    )
    assert {e.rule for e in backtest.fired()} == {fires}
    assert [e.fired_at for e in backtest.fired()] == [
        T0 + 26 * HOUR + timedelta(minutes=5)
    ]  # the first step after the run's minute


@pytest.mark.long(seconds=28)
def test_a_product_regression_fires_the_live_alerts_while_the_canaries_hold(store: ClickHouseStore) -> None:
    """A worse app fires relevancy_drop while its judge's canary rules decide on steady runs and stay quiet."""
    s = load_settings(judge="lexical")
    canary = Canary(store, CanarySettings(HOUR, golden_path(), s.judge, s.flow, s.redaction), background=False)
    judge_id = canary.judge.judge_id
    segs = [{"app": "support"}]
    before, drop = T0, T0 + 24 * HOUR + timedelta(minutes=30)
    insert(store, stream(before, drop, per_minute=2, segments=segs, score=noisy(0.75, 0.1), judge_id=judge_id))
    insert(
        store, stream(drop, drop + HOUR, per_minute=2, segments=segs, score=noisy(0.45, 0.1), seed=2, judge_id=judge_id)
    )
    runner = AlertRunner(store, default_rules(ignore_for=True), [], canary=canary)
    for hours in (22, 23, 24, 25):
        runner.run_once(T0 + hours * HOUR)
    report = runner.run_once(T0 + 25 * HOUR + timedelta(minutes=2))
    assert report.evaluation is not None
    by_rule = {(r.rule.name, r.state.state) for r in report.evaluation.results}
    assert ("relevancy_drop", "firing") in by_rule
    drops = [r for r in report.evaluation.results if r.rule.name == "relevancy_drop" and r.state.active]
    assert all(r.suspect is None and r.state.severity == "page" for r in drops)  # a steady judge: the product's page
    canaries = [r for r in report.evaluation.results if r.rule.name in CANARY_RULES]
    assert {r.rule.name for r in canaries} == set(CANARY_RULES) and all(
        r.verdict.sufficient and r.state.state == "inactive" for r in canaries
    )
    shift = next(r for r in canaries if r.rule.name == "canary_scores_lower").observation
    assert shift.value == pytest.approx(shift.baseline)  # the same judge on the same set: the same figures
