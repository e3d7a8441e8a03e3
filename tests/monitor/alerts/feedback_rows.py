"""Users' feedback rows for the alerting tests: thumbs in the `feedback` table (migration 046), whose materialized view
fills the per-minute rollup the feedback rules read (047/048)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from monitor.store.connection import ClickHouseStore

FEEDBACK_COLUMNS = (
    "feedback_id",
    "event_id",
    "conversation_id",
    "turn",
    "trace_id",
    "span_id",
    "feedback_time",
    "answer_time",
    "app",
    "model",
    "prompt_version",
    "segment_source",
    "kind",
    "value",
    "scale",
    "negative",
    "rating_bucket",
    "comment",
    "reason",
    "source",
    "kafka_topic",
    "kafka_partition",
    "kafka_offset",
    "received_at",
    "version",
)


class Thumb(NamedTuple):
    """One thumbs: when, on which segment's answer (app '': unresolved), down or up."""

    at: datetime
    app: str
    negative: bool
    event_id: str
    model: str = "m1"
    prompt_version: str = "v1"


def insert_feedback(store: ClickHouseStore, items: Sequence[tuple[Any, ...]], *, comment: str = "") -> None:
    """Thumbs (`Thumb` fields: time, app, negative, answer event id[, model, prompt_version]) into the feedback table;
    its view fills the rollup. A negative one carries `comment`."""
    rows = []
    for i, item in enumerate(items):
        t = Thumb(*item)
        rows.append(
            (
                uuid.uuid4().hex,
                t.event_id,
                "",
                -1,
                "",
                "",
                t.at,
                None,
                t.app,
                t.model if t.app else "",
                t.prompt_version if t.app else "",
                "feedback" if t.app else "unresolved",
                "thumbs",
                0.0 if t.negative else 1.0,
                2,
                t.negative,
                0,
                comment if t.negative else "",
                "",
                "json",
                "feedback",
                0,
                i,
                t.at,
                1,
            )
        )
    store.insert_table("feedback", FEEDBACK_COLUMNS, rows)
