"""The answer page: one judged answer as stored (redacted), every judge's verdicts, its labels and the
`relevancy-monitor sql` line that finds it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from monitor.report.examples import find_command
from monitor.report.model import Example
from monitor.review.label_rows import StoredLabel, labels_of
from monitor.store.connection import ClickHouseStore
from monitor.ui.queries import ANSWER_CHARS, AnswerRow, answer_rows

NOT_STORED = "text not stored (MONITOR_STORE_TEXT=none)"


@dataclass(frozen=True, slots=True)
class StatementView:
    """One statement and the judge's verdict on it."""

    text: str
    verdict: str
    reason: str


@dataclass(frozen=True, slots=True)
class Turn:
    """One earlier message of the conversation the judge read."""

    role: str
    text: str


@dataclass(frozen=True, slots=True)
class JudgeView:
    """One judge's row of the answer."""

    row: AnswerRow
    statements: tuple[StatementView, ...]
    find: str


@dataclass(frozen=True, slots=True)
class AnswerPage:
    """The answer (from the primary judge's row), its judges' rows and its labels."""

    primary: AnswerRow
    question: str  # NOT_STORED when the text was not kept
    response: str
    text_stored: bool
    context: tuple[Turn, ...]
    judges: tuple[JudgeView, ...]
    labels: tuple[StoredLabel, ...]
    cut: int  # texts are shown up to this many characters


def _shown(text: str, stored: bool) -> str:
    if not stored:
        return NOT_STORED
    return text if len(text) <= ANSWER_CHARS else text[:ANSWER_CHARS] + "…"


def context_turns(text: str) -> tuple[Turn, ...]:
    """The stored context (a JSON array of {role, text}); a value that is not one is shown as one turn of text."""
    if not text:
        return ()
    try:
        items = json.loads(text)
    except ValueError:
        return (Turn("context", text),)
    if not isinstance(items, list):
        return (Turn("context", text),)
    return tuple(
        Turn(str(i.get("role", "")), str(i.get("text", ""))) if isinstance(i, dict) else Turn("", str(i)) for i in items
    )


def build_answer(rows: Sequence[AnswerRow], labels: Sequence[StoredLabel], store_label: str) -> AnswerPage | None:
    """The page of an event's rows (primary first) and labels (pure); None when there is no row."""
    if not rows:
        return None
    primary = rows[0]
    stored = bool(primary.question or primary.response)
    judges = tuple(
        JudgeView(
            r,
            tuple(
                StatementView(
                    s,
                    r.verdicts[i] if i < len(r.verdicts) else "",
                    r.verdict_reasons[i] if i < len(r.verdict_reasons) else "",
                )
                for i, s in enumerate(r.statements)
            ),
            find_command(_example(r), store_label),
        )
        for r in rows
    )
    return AnswerPage(
        primary, _shown(primary.question, stored), _shown(primary.response, stored), stored,
        context_turns(primary.context), judges, tuple(labels), ANSWER_CHARS,
    )  # fmt: skip


def _example(r: AnswerRow) -> Example:
    return Example(
        event_time=r.event_time, event_id=r.event_id, app=r.app, prompt_version=r.prompt_version, judge_id=r.judge_id,
        judge=r.judge, score=r.score or 0.0, raw_score=r.raw_score, question="", response="", reasoning="",
        statements=(), verdicts=(), verdict_reasons=(), n_statements=0,
    )  # fmt: skip


def load_answer(store: ClickHouseStore, event_id: str, judge_id: str | None, store_label: str) -> AnswerPage | None:
    """The page of one event (None: no such row)."""
    rows = answer_rows(store, event_id, judge_id)
    if not rows:
        return None
    return build_answer(rows, labels_of(store, event_id), store_label)
