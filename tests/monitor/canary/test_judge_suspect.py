"""A judge that drifts moves the live scores too: live traffic judged by the drifted rubric judge (the fake Messages
API's brain moved a rubric point) fires the live score rules, and once that judge's canary fires, every live score
alert on its judge_id says "canaries moved too: suspect the judge" with the canary figures, in its notification and
in `alerts check`, as a ticket. A product regression under a steady judge stays a page without the note."""

from __future__ import annotations

import asyncio
import itertools
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from consumers.sampling import DecisionKind, SampleDecision
from monitor.alerts.engine import AlertRunner, Evaluation
from monitor.alerts.judge_drift import SUSPECT
from monitor.alerts.notifiers import WebhookNotifier
from monitor.canary.service import Canary, CanarySettings
from monitor.cli.alert_check_table import check_rows
from monitor.config import load_settings
from monitor.judges.base import Judge, Judgement
from monitor.judges.factory import build_judge
from monitor.judges.settings import JudgeSettings
from monitor.privacy.events import JudgedEvent
from monitor.runtime.rows import build_row
from monitor.store.connection import ClickHouseStore
from schemas.events import ConversationEvent, KafkaPosition
from schemas.scored import ScoredRow
from tests.fake_messages_api import FakeMessagesAPI
from tests.monitor.alerts.conftest import T0, default_rules, insert
from tests.monitor.alerts.receiver import Receiver
from tests.monitor.canary.test_drift import CANARY_RULES, drifting_brain

HOUR = timedelta(hours=1)
APPS = ("support", "travel")
LIVE_RULES = ("relevancy_drop", "low_score_share_rise", "relevancy_floor")
# Question and answers whose share of on-topic sentences the fake brain turns into rubric scores 4, 3 and 2.
QUESTION = "When did order A17 ship?"
ANSWERS = (
    "Order A17 shipped on 3 March.",
    "Order A17 shipped on 3 March. The order left our Leeds depot. The parcel for A17 was tracked. We sell gift cards.",
    "Order A17 shipped on 3 March. We also sell gift cards.",
)
DECISION = SampleDecision(True, 1.0, DecisionKind.BASE)
_ids = itertools.count()


def live_events(start: datetime, end: datetime, per_minute: int) -> list[ConversationEvent]:
    """`per_minute` events per app and minute over [start, end), the answers in turn."""
    out = []
    t = start
    while t < end:
        for app in APPS:
            for k in range(per_minute):
                n = next(_ids)
                out.append(
                    ConversationEvent(
                        event_id=f"e{n}",
                        conversation_id=f"c{n}",
                        event_time=t + timedelta(seconds=10 * k),
                        app=app,
                        model="m1",
                        prompt_version="v1",
                        metadata={},
                        question=QUESTION,
                        response=ANSWERS[n % len(ANSWERS)],
                        shape="flat",
                        source=KafkaPosition(topic="conversations", partition=0, offset=n),
                    )
                )
        t += timedelta(minutes=1)
    return out


def row(judge: Judge, event: ConversationEvent, verdict: Judgement) -> ScoredRow:
    """The row the sink writes for `event` and the judge's verdict."""
    return build_row(
        JudgedEvent.unredacted(event),
        judge.info,
        DECISION,
        verdict,
        latency_ms=5,
        scored_at=event.event_time + timedelta(seconds=5),
        text_policy="none",
    )


async def judged_live(settings: JudgeSettings, events: list[ConversationEvent]) -> list[ScoredRow]:
    """Each event judged through the API by the configured judge, as the pipeline would, 16 at a time."""
    judge, gate = build_judge(settings), asyncio.Semaphore(16)

    async def one(e: ConversationEvent) -> ScoredRow:
        async with gate:
            return row(judge, e, await judge.judge(e.question, e.response))

    try:
        return list(await asyncio.gather(*(one(e) for e in events)))
    finally:
        await judge.aclose()


async def history(settings: JudgeSettings, events: list[ConversationEvent]) -> list[ScoredRow]:
    """Rows of the judge's history: each distinct answer judged once through the API, its verdict on every event
    with that answer (the steady judge gives the same verdict to the same text)."""
    judge = build_judge(settings)
    try:
        verdicts = {a: await judge.judge(QUESTION, a) for a in ANSWERS}
    finally:
        await judge.aclose()
    return [row(judge, e, verdicts[e.response]) for e in events]


def live_alerts(ev: Evaluation, judge_id: str) -> list[Any]:
    """The active live score alerts of `judge_id`."""
    return [
        r
        for r in ev.results
        if r.rule.name in LIVE_RULES and r.state.active and dict(r.state.segment).get("judge_id") == judge_id
    ]


@pytest.mark.long(seconds=24)
def test_live_alerts_of_a_drifted_judge_say_suspect_the_judge_as_tickets(
    store: ClickHouseStore, single_turn_golden: Path
) -> None:
    """Live traffic through a judge moved a point down fires relevancy_drop; once the canary fires, each live alert is
    a ticket saying "suspect the judge" with the canary's figures (webhook and check), re-sent to those paged."""
    shift = [0]
    with FakeMessagesAPI(drifting_brain(shift)) as api:
        settings = load_settings(judge="rubric", **api.settings_overrides())
        canary = Canary(
            store,
            CanarySettings(HOUR, single_turn_golden, settings.judge, settings.flow, settings.redaction),
            background=False,
        )
        judge_id = canary.judge.judge_id  # the live rows' judge_id is checked against it below
        insert(store, asyncio.run(history(settings.judge, live_events(T0 - 3 * HOUR, T0 + 25 * HOUR, per_minute=2))))
        rules = default_rules(ignore_for=True)
        with Receiver() as receiver:
            runner = AlertRunner(store, rules, [WebhookNotifier(receiver.base + "/hook")], canary=canary)
            for hours in (24, 25):
                runner.run_once(T0 + hours * HOUR)
            quiet = len(receiver.posts.get("/hook", []))
            shift[0] = -1  # the provider's model update: every score a rubric point lower, live and canary alike
            drifted = asyncio.run(
                judged_live(settings.judge, live_events(T0 + 25 * HOUR, T0 + 26 * HOUR, per_minute=2))
            )
            insert(store, drifted)
            first = runner.run_once(T0 + 26 * HOUR)  # live alerts may page; the drifted canary run is written
            final = runner.run_once(T0 + 26 * HOUR + timedelta(minutes=2))  # ... and fires the canary
            posts = receiver.posts["/hook"][quiet:]
    assert quiet == 0 and first.evaluation is not None and final.evaluation is not None
    assert len(api.message_requests) >= len(drifted)  # the live rows really went through the drifted judge
    assert {r.judge_id for r in drifted} == {judge_id} and max(r.score or 0.0 for r in drifted) <= 0.75

    alerts = live_alerts(final.evaluation, judge_id)
    assert {dict(r.state.segment)["app"] for r in alerts if r.rule.name == "relevancy_drop"} == set(APPS)
    canary_fired = {r.rule.name for r in final.evaluation.results if r.rule.name in CANARY_RULES and r.state.active}
    assert "canary_scores_lower" in canary_fired
    for r in alerts:
        assert r.suspect is not None and r.state.severity == "ticket" and r.state.note.startswith(SUSPECT)
        assert [c.rule for c in r.suspect.canaries] == sorted(canary_fired)

    sent = [a for post in posts for a in post["alerts"]]
    last = {(a["rule"], a["segment"]["app"]): a for a in sent if a["rule"] in LIVE_RULES}
    assert {(r.rule.name, dict(r.state.segment)["app"]) for r in alerts if r.state.state == "firing"} <= set(last)
    for a in last.values():  # the latest word on every live alert: the judge's ticket, with the canary's figures
        assert a["severity"] == "ticket" and SUSPECT in a["summary"], a["summary"]
        shift_figure = next(c for c in a["suspect_judge"]["canaries"] if c["rule"] == "canary_scores_lower")
        assert shift_figure["baseline"] - shift_figure["value"] >= 0.10 and shift_figure["n_current"] == 107
        assert "canary_scores_lower: canary_mean_shift" in a["summary"]
    canary_sent = [a for a in sent if a["rule"] == "canary_scores_lower"]
    assert canary_sent and canary_sent[0]["severity"] == "page" and canary_sent[0]["suspect_judge"] is None

    rows = [r for r in check_rows(final.evaluation) if r["rule"] in LIVE_RULES and r["state"] in ("pending", "firing")]
    assert rows and all(r["severity"] == "ticket" and r["suspect"].startswith(SUSPECT) for r in rows)
    assert all("canary_mean_shift" in r["suspect"] and r["note"].startswith(SUSPECT) for r in rows)
