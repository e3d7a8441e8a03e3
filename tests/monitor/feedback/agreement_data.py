"""Feedback rows and judged rows for the judge-against-user tests, written straight into chDB (`feedback` through
`insert_table`, scored rows through `insert_rows`, so the tables and their rollups fill as in production)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from monitor.store.connection import ClickHouseStore
from schemas.feedback import FEEDBACK_TABLE
from schemas.scored import ScoredRow

MONDAY = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)  # an ISO week's Monday
JUDGE = "rubric-1a2b"
FEEDBACK_COLUMNS = (
    "feedback_id", "event_id", "conversation_id", "turn", "trace_id", "span_id", "feedback_time", "answer_time",
    "app", "model", "prompt_version", "segment_source", "kind", "value", "scale", "negative", "rating_bucket",
    "comment", "reason", "source", "kafka_topic", "kafka_partition", "kafka_offset", "received_at", "version",
)  # fmt: skip


def scored(
    event_id: str,
    score: float,
    at: datetime,
    *,
    app: str = "shop",
    model: str = "m1",
    prompt_version: str = "v1",
    judge_id: str = JUDGE,
    sample_rule: str = "base",
    replay_run: str = "",
    status: str = "ok",
) -> ScoredRow:
    """One judged row of `event_id` (an error row without score when `status` is error)."""
    ok = status == "ok"
    return ScoredRow(
        event_id=event_id,
        conversation_id=f"c-{event_id}",
        event_time=at,
        app=app,
        model=model,
        prompt_version=prompt_version,
        judge=judge_id.split("-")[0],
        judge_model="jm",
        judge_id=judge_id,
        status=status,
        error="" if ok else "unavailable: test",
        score=score if ok else None,
        sample_rule=sample_rule,
        sample_rate=1.0,
        replay_run=replay_run,
        question=f"question of {event_id}",
        response=f"answer of {event_id}",
        scored_at=at + timedelta(seconds=1),
    )


def thumbs(event_id: str, at: datetime, up: bool, **kw: Any) -> list[Any]:
    """A thumbs row on `event_id` given at `at`."""
    return feedback(event_id, at, "thumbs", 1.0 if up else 0.0, scale=1, negative=not up, **kw)


def rating(event_id: str, at: datetime, value: float, scale: int = 5, **kw: Any) -> list[Any]:
    """A rating row on `event_id` given at `at`."""
    bucket = 1 + round(4 * (value - 1) / (scale - 1))
    return feedback(event_id, at, "rating", value, scale=scale, negative=bucket <= 2, bucket=bucket, **kw)


def feedback(
    event_id: str,
    at: datetime,
    kind: str,
    value: float,
    *,
    scale: int,
    negative: bool,
    bucket: int = 0,
    app: str = "shop",
    model: str = "m1",
    prompt_version: str = "v1",
    segment_source: str = "feedback",
    feedback_id: str | None = None,
    version: int = 1,
) -> list[Any]:
    """One row of the feedback table, in `FEEDBACK_COLUMNS` order."""
    unresolved = segment_source == "unresolved"
    return [
        feedback_id or uuid.uuid4().hex, event_id, "", -1, "", "", at, None,
        "" if unresolved else app, "" if unresolved else model, "" if unresolved else prompt_version,
        segment_source, kind, value, scale, negative, bucket, "", "", "json", "fb", 0, 0, at, version,
    ]  # fmt: skip


def write(store: ClickHouseStore, scores: Sequence[ScoredRow], rows: Sequence[Sequence[Any]]) -> None:
    """Insert judged rows and feedback rows."""
    if scores:
        store.insert_rows(list(scores), uuid.uuid4().hex)
    if rows:
        store.insert_table(FEEDBACK_TABLE, FEEDBACK_COLUMNS, rows)
