"""Scored rows for the review tests: a primary judge's row, a shadow judge's row, written with `insert_rows`."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from monitor.store.connection import ClickHouseStore
from schemas.scored import ScoredRow

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
PRIMARY = "rubric-1"
SHADOW = "lexical-1"


def row(
    event_id: str,
    score: float | None,
    *,
    judge_id: str = PRIMARY,
    shadow: bool = False,
    app: str = "shop",
    model: str = "m",
    prompt_version: str = "v1",
    minutes_ago: float = 60,
    confidence: float | None = None,
    question: str = "",
    response: str = "",
) -> ScoredRow:
    """The row of `event_id` by `judge_id` (a shadow judge's when `shadow`), an error row when `score` is None."""
    t = NOW - timedelta(minutes=minutes_ago)
    return ScoredRow(
        event_id=event_id,
        conversation_id=f"c-{event_id}",
        event_time=t,
        app=app,
        model=model,
        prompt_version=prompt_version,
        judge="rubric" if not shadow else "lexical",
        judge_model="jm",
        judge_id=judge_id,
        status="ok" if score is not None else "error",
        error="" if score is not None else "unavailable: test",
        score=score,
        score_confidence=confidence,
        sample_rule="shadow:all" if shadow else "all",
        question=question or f"question of {event_id}",
        response=response or f"answer of {event_id}",
        scored_at=t + timedelta(seconds=1),
    )


def write(store: ClickHouseStore, rows: Sequence[ScoredRow]) -> None:
    """Insert `rows` into the store's scores table."""
    store.insert_rows(list(rows), uuid.uuid4().hex)
