"""The browser tests' store, filled in a process of its own (chDB opens one store directory per process, and the UI
server under test must hold this one): `python -m tests.ui.fill_store chdb:///dir database`.

What it writes, through the real writers (`insert_rows`, `StateStore`, `LabelWriter`), all in the six hours before
now (the UI reads windows that end now):
- `support-bot` on `claude-haiku-4-5`, prompt version `v1` for three hours, then a worse `v2`; `search` on `m-small`
  `v7` throughout. Every event judged by the lexical judge (the primary: its real scoring function), one in two by a
  shadow judge (`sample_rule` `shadow:base`) that sometimes disagrees by two levels or more.
- one `v2` answer scored 0 (the worst of the firing segment: every other `v2` answer shares a word with its question);
- one `search` answer whose question and response hold a script and an `onerror` attribute;
- a firing `relevancy_drop` on `support-bot` `v2`;
- labels by two other reviewers (`bob`, `carol`) on a few `search` answers, so the agreement page has figures before
  the test labels anything.

It prints one JSON line of facts the tests check against (event ids, the primary's score of each event)."""

from __future__ import annotations

import json
import sys
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from monitor.alerts.evaluator import AlertState, segment_key_json
from monitor.alerts.state import StateStore
from monitor.judges.lexical import LexicalJudge, score_lexical
from monitor.store.connection import ClickHouseStore
from monitor.store.migrations import Migrations
from schemas.scored import ScoredRow

PRIMARY = LexicalJudge().info.judge_id
SHADOW = "rubric-5ad0c0ffee01"
MODEL = {"support-bot": "claude-haiku-4-5", "search": "m-small"}
SCRIPT = "<script>window.__xss=1</script>"
ONERROR = '<img src=x onerror="window.__xss=2">'
ALERT_RULE = "relevancy_drop"
STEP = timedelta(minutes=4)
SPAN = timedelta(hours=6)
# Sentences of an answer to "When did order A<n> ship?": the first shares the question's words, the others do not.
ON_TOPIC = "Order A{n} shipped on 3 March."
OFF_TOPIC = ("We also sell gift cards.", "Our shop opens at nine.", "Thanks for writing in today!")


def _row(at: datetime, app: str, version: str, question: str, response: str, *, n: int) -> ScoredRow:
    """The primary's row of one event: the lexical judge's own verdicts on the pair."""
    judged = score_lexical(question, response)
    return ScoredRow(
        event_id=f"ev-{app}-{n:04d}-{uuid.uuid4().hex[:6]}",
        conversation_id=f"c-{uuid.uuid4().hex[:8]}",
        event_time=at,
        app=app,
        model=MODEL[app],
        prompt_version=version,
        judge="lexical",
        judge_model="heuristic",
        judge_id=PRIMARY,
        status="ok",
        score=judged.score,
        raw_score=judged.raw_score,
        reasoning=judged.reasoning,
        statements=list(judged.statements),
        verdicts=list(judged.verdicts),
        verdict_reasons=list(judged.verdict_reasons),
        n_statements=len(judged.statements),
        question=question,
        response=response,
        sample_rate=1.0,
        sample_rule="base",
        scored_at=at + timedelta(seconds=3),
        latency_ms=2,
    )


def _shadow(primary: ScoredRow, n: int) -> ScoredRow:
    """The shadow judge's row of the same event: near the primary's score, or (one in five) far from it."""
    assert primary.score is not None
    score = 1.0 - primary.score if n % 5 == 0 else min(1.0, primary.score + 0.05)
    return primary.model_copy(
        update={
            "judge": "rubric",
            "judge_model": "claude-haiku-4-5",
            "judge_id": SHADOW,
            "score": round(score, 3),
            "raw_score": round(score * 4),
            "reasoning": f"rubric level {round(score * 4)}",
            "statements": [],
            "verdicts": [],
            "verdict_reasons": [],
            "n_statements": 0,
            "sample_rule": "shadow:base",
            "latency_ms": 900,
        }
    )


def _answer(n: int, off_topic: int, on_topic: bool = True) -> tuple[str, str]:
    sentences = ([ON_TOPIC.format(n=n)] if on_topic else []) + [OFF_TOPIC[k % 3] for k in range(off_topic)]
    return f"When did order A{n} ship?", " ".join(sentences)


def scored_rows(now: datetime) -> tuple[list[ScoredRow], dict[str, Any]]:
    """Every row of the store, and the facts the tests check against."""
    rows: list[ScoredRow] = []
    start = now - SPAN
    n = 0
    worst = xss = ""
    t = start
    while t < now - timedelta(minutes=2):
        n += 1
        late = t >= start + SPAN / 2
        version = "v2" if late else "v1"
        # v1 answers are mostly on topic; v2 pads them with up to three unrelated sentences.
        support = _row(t, "support-bot", version, *_answer(n, (n % 4) if late else (n % 2)), n=n)
        search = _row(t + timedelta(seconds=30), "search", "v7", *_answer(n, n % 3), n=n)
        rows += [support, search]
        if n % 2 == 0:
            rows += [_shadow(support, n), _shadow(search, n)]
        t += STEP
    at = now - timedelta(minutes=90)
    question, response = _answer(9000, 3, on_topic=False)
    worst_row = _row(at, "support-bot", "v2", question, response, n=9000)
    worst = worst_row.event_id
    hostile = _row(
        at,
        "search",
        "v7",
        f"When did order A9001 ship? {SCRIPT}",
        f"Order A9001 shipped on 3 March. {ONERROR} **bold** [link](javascript:alert(1))",
        n=9001,
    )
    xss = hostile.event_id
    rows += [worst_row, hostile, _shadow(hostile, 9001)]
    facts = {
        "primary": PRIMARY,
        "shadow": SHADOW,
        "worst": worst,
        "xss": xss,
        "script": SCRIPT,
        "onerror": ONERROR,
        "alert_rule": ALERT_RULE,
        "alert_segment": segment_key_json(_firing_segment()),
        "scores": {r.event_id: r.score for r in rows if r.judge_id == PRIMARY},
        "worst_statements": len(worst_row.statements),
    }
    return rows, facts


def _firing_segment() -> tuple[tuple[str, str], ...]:
    return (("app", "support-bot"), ("model", MODEL["support-bot"]), ("prompt_version", "v2"), ("judge_id", PRIMARY))


def alert_states(now: datetime) -> list[AlertState]:
    """A relevancy drop of support-bot v2 firing since an hour and a half after the rollout."""
    return [
        AlertState(
            ALERT_RULE,
            _firing_segment(),
            "firing",
            since=now - timedelta(hours=2, minutes=30),
            fired_at=now - timedelta(hours=2),
            last_eval_at=now - timedelta(minutes=1),
            value=0.58,
            baseline=0.83,
            n_current=45,
            n_baseline=45,
            severity="page",
            note="cusum",
        )
    ]


def seed_labels(store: ClickHouseStore, rows: list[ScoredRow], now: datetime) -> int:
    """Labels by `bob` on a dozen `search` answers (their level, one off on every third), and by `carol` on four of
    them, through the one writer of the labels table."""
    from monitor.review.label_rows import LabelWriter, NewLabel

    writer = LabelWriter(store)
    search = [r for r in rows if r.app == "search" and r.judge_id == PRIMARY and "A9001" not in r.question][:12]
    written = 0
    for k, r in enumerate(search):
        assert r.score is not None
        level = min(4, round(r.score * 4) + (1 if k % 3 == 0 else 0))
        reviewers = ("bob", "carol") if k < 4 else ("bob",)
        for reviewer in reviewers:
            new = NewLabel(r.event_id, reviewer, level, "", "control", 0.2)
            writer.record(store, new, now - timedelta(minutes=30 - k))
            written += 1
    return written


def main(url: str, database: str) -> None:
    """Migrate and fill the store at `url`, database `database`; print the facts as one JSON line."""
    now = datetime.now(UTC).replace(microsecond=0)
    store = ClickHouseStore(url, database, "relevancy_scores")
    Migrations(store).ensure(migrate=True)
    rows, facts = scored_rows(now)
    for i in range(0, len(rows), 500):
        store.insert_rows(rows[i : i + 500], uuid.uuid4().hex)
    StateStore(store, writer="test").save(alert_states(now), now)
    facts["labels"] = seed_labels(store, rows, now)
    facts["now"] = now.isoformat()
    store.close()
    print(json.dumps(facts))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
