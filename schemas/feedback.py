"""Users' own verdicts on answers (thumbs and ratings): the decoded feedback event every input format becomes, the
answer it refers to, and the segment it counts in. Documented for users in docs/feedback.md."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

FeedbackKind = Literal["thumbs", "rating"]
FeedbackSource = Literal["json", "otlp"]
# Where a stored feedback row's segment came from, in the order it is looked for; `unresolved` when none had it.
SegmentSource = Literal["feedback", "scored", "kafka", "unresolved"]
FEEDBACK_TABLE = "feedback"
FEEDBACK_ROLLUP_TABLE = "feedback_rollup_1m"
# A feedback-triggered judgement's `sample_rule`: kept out of the relevancy detectors' streams (biased to bad answers).
FEEDBACK_SAMPLE_RULE = "feedback"


@dataclass(frozen=True, slots=True)
class Segment:
    """The segment an answer counts in."""

    app: str
    model: str
    prompt_version: str


@dataclass(frozen=True, slots=True)
class AnswerRef:
    """How a feedback event names its answer: by `event_id` (for OpenTelemetry input, `gen_ai.response.id`, or
    `otel:<trace_id>/<span_id>` of the answer's span), else by conversation and turn, else by the parent span's ids.
    `topic`/`partition`/`offset` say where the answer's record is when the feedback carries it."""

    event_id: str = ""
    conversation_id: str = ""
    turn: int | None = None
    trace_id: str = ""
    span_id: str = ""
    topic: str = ""
    partition: int | None = None
    offset: int | None = None

    def describe(self) -> str:
        """The reference in words for logs and dead letters (ids only, never text)."""
        if self.event_id:
            return f"event_id={self.event_id}"
        if self.conversation_id:
            return f"conversation_id={self.conversation_id} turn={self.turn}"
        return f"trace_id={self.trace_id} span_id={self.span_id}"


@dataclass(frozen=True, slots=True)
class FeedbackEvent:
    """One decoded feedback event. `value` is 1 (up) or 0 (down) for thumbs, the given rating for ratings on a
    1..`scale` scale; `negative` is the decoder's reading of it (thumbs down, or a rating at or below the
    configured level). `answer_time`, when given, is when the answer was sent (it narrows the read-back)."""

    feedback_id: str
    answer: AnswerRef
    feedback_time: datetime
    kind: FeedbackKind
    value: float
    scale: int
    negative: bool
    source: FeedbackSource
    comment: str = ""
    reason: str = ""
    segment: Segment | None = None
    answer_time: datetime | None = None

    @property
    def rating_bucket(self) -> int:
        """The rating on a 1-5 scale (nearest), for the rollup's histogram; 0 for thumbs."""
        if self.kind != "rating" or self.scale <= 1:
            return 0
        return 1 + round(4 * (self.value - 1) / (self.scale - 1))

    @property
    def rating_unit(self) -> float | None:
        """The rating mapped to 0..1 (None for thumbs)."""
        if self.kind != "rating" or self.scale <= 1:
            return None
        return (self.value - 1) / (self.scale - 1)
