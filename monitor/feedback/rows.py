"""A feedback event as a row of `{database}.feedback` (migration 046): the event, the segment it counts in, where
that segment came from, and the feedback record's position (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from schemas.events import KafkaPosition, replace_lone_surrogates
from schemas.feedback import FeedbackEvent, Segment, SegmentSource

FEEDBACK_COLUMNS = (
    "feedback_id", "event_id", "conversation_id", "turn", "trace_id", "span_id", "feedback_time", "answer_time",
    "app", "model", "prompt_version", "segment_source", "kind", "value", "scale", "negative", "rating_bucket",
    "comment", "reason", "source", "kafka_topic", "kafka_partition", "kafka_offset", "received_at", "version",
)  # fmt: skip
UNKNOWN_TURN = -1
_INT32_MAX = 2**31 - 1
MAX_SCALE = 255  # the column is UInt8


@dataclass(frozen=True, slots=True)
class FeedbackRow:
    """What is stored of one feedback event: the event (its comment already redacted by the caller), the segment it
    counts in (None exactly when `segment_source` is 'unresolved'), the feedback record's position, when it was
    received (its row's version: a later write of the same feedback id replaces an earlier one), and the answer's
    event id when it was found by other means than the feedback's own event id."""

    event: FeedbackEvent
    segment: Segment | None
    segment_source: SegmentSource
    position: KafkaPosition
    received_at: datetime
    answer_event_id: str = ""

    def __post_init__(self) -> None:
        if (self.segment is None) != (self.segment_source == "unresolved"):
            raise ValueError(
                f"feedback {self.event.feedback_id}: segment_source {self.segment_source!r} "
                f"{'needs' if self.segment is None else 'must not have'} a segment"
            )
        if not 0 <= self.event.scale <= MAX_SCALE:
            raise ValueError(f"feedback {self.event.feedback_id}: scale {self.event.scale} is not in 0..{MAX_SCALE}")

    @property
    def feedback_id(self) -> str:
        """The feedback event's id (the table's key)."""
        return self.event.feedback_id

    @property
    def stored_id(self) -> str:
        """The feedback id as it is stored (lone surrogates replaced)."""
        return replace_lone_surrogates(self.event.feedback_id)

    @property
    def month(self) -> int:
        """The table partition of the row: toYYYYMM(feedback_time) in UTC."""
        t = _utc(self.event.feedback_time)
        return t.year * 100 + t.month

    @property
    def version(self) -> int:
        """The row's version: `received_at` in milliseconds since the epoch."""
        return int(_utc(self.received_at).timestamp() * 1000)


def feedback_values(row: FeedbackRow) -> list[Any]:
    """The row's values in `FEEDBACK_COLUMNS` order, for an insert. Strings are made encodable (a lone surrogate
    would make the driver refuse the whole batch) and a turn outside the column's range reads as unknown."""
    event, answer = row.event, row.event.answer
    segment = row.segment or Segment("", "", "")
    s = replace_lone_surrogates
    return [
        s(event.feedback_id),
        s(row.answer_event_id or answer.event_id),
        s(answer.conversation_id),
        answer.turn if answer.turn is not None and 0 <= answer.turn <= _INT32_MAX else UNKNOWN_TURN,
        s(answer.trace_id),
        s(answer.span_id),
        _utc(event.feedback_time),
        None if event.answer_time is None else _utc(event.answer_time),
        s(segment.app),
        s(segment.model),
        s(segment.prompt_version),
        row.segment_source,
        event.kind,
        float(event.value),
        event.scale,
        event.negative,
        min(max(event.rating_bucket, 0), 5),
        s(event.comment),
        s(event.reason),
        event.source,
        row.position.topic,
        row.position.partition,
        row.position.offset,
        _utc(row.received_at),
        row.version,
    ]


def _utc(t: datetime) -> datetime:
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
