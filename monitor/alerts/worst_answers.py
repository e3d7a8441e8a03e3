"""The worst answers of a firing segment, read for the Slack message: the rule's own examples query
(`queries.examples_sql`: its segment, window, rows and turns, worst first), cut to a few rows.

Read once per alert and round, only for notifiers that show them; a store that cannot answer costs the message its
examples, never the page."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import structlog

from monitor.alerts.queries import examples_sql
from monitor.alerts.rules import Rule
from monitor.alerts.windows import SegmentKey, Windows
from monitor.store.connection import ClickHouseStore
from schemas.errors import StoreError

log = structlog.get_logger("monitor.alerts")

WORST_ANSWERS = 3  # Slack shows this many: enough to see a pattern, few enough to read on a phone
EXAMPLES_TIMEOUT_S = 10  # a store too slow for a few rows leaves them out rather than hold the page
RELEVANT = "yes"  # a statement's verdict when it helps answer the question (`monitor.judges.statements`)


@dataclass(frozen=True, slots=True)
class StatementVerdict:
    """One statement of an answer that the judge did not find relevant (`no`, `idk`), as stored."""

    verdict: str
    statement: str


@dataclass(frozen=True, slots=True)
class WorstAnswer:
    """One of the worst answers of a segment, as stored (redacted; '' when the store keeps no text)."""

    event_id: str
    judge_id: str
    status: str
    score: float | None
    question: str
    response: str
    error: str
    off_topic: tuple[StatementVerdict, ...]  # the statements not judged relevant, in the answer's order

    @property
    def text_stored(self) -> bool:
        """False when neither the question nor the answer was kept (MONITOR_STORE_TEXT=none)."""
        return bool(self.question or self.response)


def shows_answers(rule: Rule) -> bool:
    """Whether a rule's examples are judged answers (score rules), rather than canary pairs or judge pairs."""
    return rule.spec.table == "scores" and rule.source == "scores"


def fetch_worst_answers(
    store: ClickHouseStore, rule: Rule, segment: SegmentKey, windows: Windows, limit: int = WORST_ANSWERS
) -> tuple[WorstAnswer, ...]:
    """The `limit` worst answers of `segment` in the rule's current window, worst first; () for a rule whose examples
    are not answers, or when the store cannot answer (logged with the rule and segment, no text)."""
    if not shows_answers(rule):
        return ()
    sql = examples_sql(rule, segment, windows, store.database, store.table, limit=limit)
    sql += f"\nSETTINGS max_execution_time = {EXAMPLES_TIMEOUT_S}"
    try:
        result = store.query(sql)
    except StoreError as e:
        log.warning(
            "worst answers not read: the message goes without them",
            rule=rule.name,
            segment=dict(segment),
            error=str(e)[:300],
        )
        return ()
    return tuple(_answer(dict(zip(result.columns, row, strict=True))) for row in result.rows[:limit])


def _answer(row: dict[str, Any]) -> WorstAnswer:
    pairs = row.get("statement_verdicts") or []
    off = tuple(StatementVerdict(str(v), str(s)) for s, v in pairs if str(v) != RELEVANT)
    score = row.get("score")
    return WorstAnswer(
        event_id=str(row["event_id"]),
        judge_id=str(row.get("judge_id", "")),
        status=str(row.get("status", "ok")),
        score=float(score) if score is not None else None,
        question=str(row.get("question") or ""),
        response=str(row.get("response") or ""),
        error=str(row.get("error") or ""),
        off_topic=off,
    )
