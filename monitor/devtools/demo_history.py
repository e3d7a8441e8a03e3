"""The demo's history: hours of events written as the monitor would have written them at the time, so the alert
rules have a baseline on a store that is minutes old.

It runs the monitor's own parts (decode, redact, judge, row) but stamps each row as scored a few seconds after its
event, as live scoring would have: sent through Kafka now, six hours of history would be scored now, and read as six
hours of scoring lag (the `scoring_lag` rule would rightly call it a backlog). Users' feedback on a share of the
history's answers is written the same way (decoded by the monitor's own decoder, in its answer's segment), so the
feedback rules have a baseline too."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from consumers.decode import decode_event
from consumers.feedback import decode_feedback
from consumers.sampling import DecisionKind, SampleDecision
from monitor.config import Settings
from monitor.devtools.feedback_traffic import Answer, FeedbackMix, feedback_object, feedback_time
from monitor.feedback.rows import FEEDBACK_COLUMNS, FeedbackRow, feedback_values
from monitor.judges.factory import build_judge
from monitor.judging.guarded_judge import GuardedJudge
from monitor.judging.metrics import JudgingMetrics
from monitor.judging.traffic_counts import COLUMNS, TrafficCounter
from monitor.privacy.events import JudgedEvent, redact_event
from monitor.privacy.redactor import build_redactor
from monitor.runtime.rows import build_row
from monitor.store.connection import ClickHouseStore
from monitor.store.retention import TRAFFIC_TABLE
from schemas.errors import DecodeError
from schemas.events import KafkaPosition
from schemas.feedback import FEEDBACK_TABLE, Segment, SegmentSource
from schemas.scored import ScoredRow

_TOPIC = "demo-history"


@dataclass(frozen=True, slots=True)
class History:
    """The rows, traffic counts and users' feedback of the demo's history, ready to insert."""

    rows: list[ScoredRow]
    traffic: list[tuple[object, ...]]
    dead_lettered: int
    feedback: list[FeedbackRow] = field(default_factory=list)


async def judge_history(settings: Settings, values: Sequence[bytes], rng: random.Random) -> History:
    """Decode, redact and judge `values` (in time order) with the configured judge, through the service's guards; a
    malformed value is counted as consumed and dead-lettered at the time of the event before it, as the service
    would."""
    judge = build_judge(settings.judge)
    redactor = build_redactor(settings.redaction)
    guard = GuardedJudge(judge, settings.flow, JudgingMetrics(), on_spent=lambda usage: None, patient=False)
    traffic = TrafficCounter()
    decision = SampleDecision(sampled=True, rate=1.0, kind=DecisionKind.BASE)

    async def score(judged: JudgedEvent) -> ScoredRow:
        judging = await guard.judge_event(judged.judged, still_wanted=lambda: True)
        assert judging is not None  # still_wanted is always true: only a verdict or a failure ends the call
        outcome = judging.verdict
        latency = rng.uniform(0.2, 2.5)
        scored_at = judged.original.event_time + timedelta(seconds=latency + rng.uniform(0.5, 3.0))
        return build_row(
            judged,
            judge.info,
            decision,
            outcome,
            latency_ms=int(latency * 1000),
            scored_at=scored_at,
            text_policy=settings.store.store_text,
        )

    pending: list[JudgedEvent] = []
    at, dead = 0.0, 0
    for offset, value in enumerate(values):
        try:
            event = decode_event(
                value, position=KafkaPosition(topic=_TOPIC, partition=0, offset=offset), record_timestamp_ms=None
            )
        except DecodeError:
            traffic.add(at, "", "", "", "consumed")
            traffic.add(at, "", "", "", "dead_lettered")
            dead += 1
            continue
        at = event.event_time.timestamp()
        traffic.add(at, event.app, event.model, event.prompt_version, "consumed")
        traffic.add(at, event.app, event.model, event.prompt_version, "sampled")
        pending.append(redact_event(event, redactor) if redactor else JudgedEvent(event, event))
    try:
        rows = list(await asyncio.gather(*(score(j) for j in pending)))
    finally:
        await judge.aclose()
    return History(rows, traffic.drain(), dead)


def history_feedback(
    settings: Settings, answers: Sequence[Answer | None], mix: FeedbackMix, seed: int | str, now: datetime
) -> list[FeedbackRow]:
    """Users' feedback on a `mix.share` of the history's answers (None: a malformed record), as the monitor would
    have stored it: decoded by its decoder, in its answer's segment (from the feedback when it names one, else from
    the scored row, as every history answer was judged). Feedback not yet given by `now` is left out."""
    rng = random.Random(f"{seed}/history-feedback")
    options = settings.feedback.options()
    out: list[FeedbackRow] = []
    for answer in answers:
        if answer is None or rng.random() >= mix.share:
            continue
        value = feedback_object(rng, answer, mix)
        if feedback_time(value) > now:
            continue
        offset = len(out)
        event = decode_feedback(
            json.dumps(value).encode(), topic=_TOPIC, partition=0, offset=offset, record_timestamp_ms=None,
            options=options, now=now,
        )  # fmt: skip
        segment = Segment(answer.app, answer.model, answer.prompt_version)
        source: SegmentSource = "feedback" if event.segment is not None else "scored"
        received = event.feedback_time + timedelta(seconds=rng.uniform(0.2, 2.0))
        position = KafkaPosition(topic=_TOPIC, partition=0, offset=offset)
        out.append(FeedbackRow(event, event.segment or segment, source, position, received))
    return out


def write_history(store: ClickHouseStore, history: History) -> None:
    """Insert the history's rows (in batches, idempotently), its traffic counts and its feedback (which the rollup's
    materialized view counts as it is inserted)."""
    for start in range(0, len(history.rows), 1000):
        store.insert_rows(history.rows[start : start + 1000], dedup_token=f"demo-history-{start}-{len(history.rows)}")
    store.insert_table(TRAFFIC_TABLE, COLUMNS, history.traffic)
    if history.feedback:
        store.insert_table(
            FEEDBACK_TABLE, FEEDBACK_COLUMNS, [feedback_values(r) for r in history.feedback],
            dedup_token=f"demo-history-feedback-{len(history.feedback)}",
        )  # fmt: skip
