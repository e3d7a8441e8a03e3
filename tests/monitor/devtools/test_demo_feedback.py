"""Users' feedback in the demo: the thumbs-down share rises with the padding v13, the history seeds the feedback
table and its rollup (the detector's baseline) in each answer's segment, and the closing lines read the thumbs-down
share by prompt version and the judge-against-user AUC from the store."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from consumers.feedback import decode_feedback
from monitor.config import load_settings
from monitor.devtools.demo import DemoPlan, demo_settings
from monitor.devtools.demo_feedback import (
    HISTORY_MIX,
    LIVE_MIX,
    OTLP_FEEDBACK_TOPIC,
    FeedbackFigures,
    VersionFeedback,
    feedback_lines,
    read_feedback_figures,
)
from monitor.devtools.demo_history import History, history_feedback, judge_history, write_history
from monitor.devtools.demo_traffic import APPS, REGRESSED, history_records, story_record
from monitor.devtools.feedback_traffic import FeedbackQueue, interleave
from monitor.devtools.outgoing import Outgoing
from monitor.feedback.agreement import AucFigure, RankFigure
from monitor.feedback.agreement_queries import JudgeUserAgreement
from monitor.store.connection import ClickHouseStore

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def test_the_thumbs_down_share_rises_with_the_regressed_version() -> None:
    """Live feedback on the regressed app: far more thumbs down (or 1-2 ratings) on v13 than on v12, every feedback
    record after its answer, keyed by its conversation."""
    options = load_settings().feedback.options()

    def negative_share(regressed: bool) -> float:
        rng = random.Random(11)
        answers = [story_record(rng, NOW, regressed=regressed) for _ in range(4000)]
        pairs = [(Outgoing(v, a.conversation_id.encode() if a else None), a) for v, a in answers]
        by_id = {a.event_id: a for _, a in answers if a}
        sent: set[str] = set()
        verdicts = []
        for i, record in enumerate(interleave(pairs, FeedbackQueue(LIVE_MIX, 3))):
            if b'"type": "feedback"' not in record.value:
                if record.key:
                    sent.add(json.loads(record.value)["event_id"])
                continue
            feedback = decode_feedback(
                record.value, topic="t", partition=0, offset=i, record_timestamp_ms=None, options=options, now=NOW
            )
            assert feedback.answer.event_id in sent  # after its answer
            answer = by_id[feedback.answer.event_id]
            assert record.key == answer.conversation_id.encode()
            if answer.app == REGRESSED.name:
                assert answer.prompt_version == (REGRESSED.new_version if regressed else REGRESSED.version)
                verdicts.append(feedback.negative)
        return sum(verdicts) / len(verdicts)

    before, after = negative_share(False), negative_share(True)
    assert 0.08 < before < 0.22 and after > before + 0.15, (before, after)


async def test_the_history_seeds_feedback_and_the_closing_lines_read_it(tmp_path: Path, store: ClickHouseStore) -> None:
    """The history's feedback, written beside its judged rows, lands in the rollup in each answer's segment (none
    after now); the closing figures give v12's thumbs-down share and a judge-against-user AUC above chance (the
    lexical judge scores padded answers lower, and users dislike them more)."""
    settings = load_settings(judge="lexical")
    now = datetime.now(UTC)
    records = history_records(random.Random(5), now, 6.0, 1500)
    past = await judge_history(settings, [v for v, _ in records], random.Random(5))
    feedback = history_feedback(settings, [a for _, a in records], HISTORY_MIX, 5, now)
    answers = {a.event_id: a for _, a in records if a}
    assert 350 < len(feedback) < 550 and all(r.event.feedback_time <= now for r in feedback)
    assert {r.segment_source for r in feedback} == {"feedback", "scored"}
    for row in feedback:
        answer = answers[row.event.answer.event_id]
        assert row.segment is not None and (row.segment.app, row.segment.prompt_version) == (
            answer.app,
            answer.prompt_version,
        )
    write_history(store, History(past.rows, past.traffic, past.dead_lettered, feedback))
    sql = f"SELECT app, prompt_version, sum(n_feedback) FROM {store.database}.feedback_rollup_1m GROUP BY ALL"
    rollup = store.query(sql).rows
    assert sum(int(n) for *_, n in rollup) == len(feedback)
    assert {(str(a), str(v)) for a, v, _ in rollup} == {(a.name, a.version) for a in APPS}
    figures = read_feedback_figures(store, REGRESSED.name, now - timedelta(hours=7), now + timedelta(minutes=1))
    (v12,) = figures.versions
    assert v12.prompt_version == REGRESSED.version and v12.n_thumbs > 50
    assert v12.thumbs_down_share is not None and 0.05 < v12.thumbs_down_share < 0.3
    (agreement,) = figures.agreement
    assert agreement.auc.auc is not None and agreement.auc.auc > 0.6 and agreement.auc.disliked > 20
    lines = feedback_lines(figures)
    assert lines[0].startswith(f"Users' thumbs-down on {REGRESSED.name}: {REGRESSED.version} ") and "AUC 0." in lines[1]


def test_the_closing_lines_compare_the_versions_and_give_the_auc() -> None:
    """The lines name each version's thumbs-down share with its count, then the judge's AUC with its interval and
    counts (and rho when there are ratings); without thumbs, one line says none was stored."""
    auc = AucFigure(0.812, 0.761, 0.858, 220, 1100)
    rho = RankFigure(0.43, 0.3, 0.55, 180)
    figures = FeedbackFigures(
        "support-bot",
        [VersionFeedback("v12", 312, 46), VersionFeedback("v13", 61, 22)],
        [JudgeUserAgreement(None, None, None, "lexical@1", None, auc, rho)],
    )
    assert feedback_lines(figures) == [
        "Users' thumbs-down on support-bot: v12 14.7% (n=312), v13 36.1% (n=61)",
        "Judge against users (lexical@1): AUC 0.81 (0.76-0.86) for predicting a thumbs-down, on 220 disliked and 1100 "
        "liked answers; Spearman's rho 0.43 against 180 ratings",
    ]
    assert feedback_lines(FeedbackFigures("support-bot", [], [])) == ["Users' feedback on support-bot: none stored."]


def test_the_demo_reads_its_feedback_topic(tmp_path: Path) -> None:
    """The demo's settings read feedback beside the conversations on their topic; with OTLP traffic, from a JSON
    topic of its own, consumed with the spans' topic."""
    plan = DemoPlan(60, 40, 6, 600, tmp_path, tmp_path / "r.html", "lexical", seed=1)
    events = demo_settings(plan, "127.0.0.1:9092")
    assert events.feedback.topics == ("conversations",) and events.kafka.topics == ("conversations",)
    otlp = demo_settings(DemoPlan(60, 40, 6, 600, tmp_path, tmp_path / "r.html", "lexical", 1, "otlp_proto"), "h:1")
    assert otlp.feedback.topics == (OTLP_FEEDBACK_TOPIC,)
    assert otlp.kafka.format_of(OTLP_FEEDBACK_TOPIC).holds == "events"
    assert otlp.kafka.format_of("conversations").holds == "spans"
