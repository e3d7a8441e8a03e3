"""Users' feedback in our JSON shape (docs/input.md, Feedback): a pure function from a Kafka record value to a
`schemas.feedback.FeedbackEvent` that raises nothing but `DecodeError`, and a cheap test that tells a feedback
object from a conversation event on a topic that carries both.

Strict: a value of the wrong type or out of range is refused with reason `invalid_feedback` and a one-line detail
naming the field (unknown fields are ignored, as in events; a null is an absent field). The bytes are read by
`consumers.decode.parse_object`, so a record that is no JSON object gets the same reasons as an event."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType
from pydantic import TypeAdapter, ValidationError

from consumers.decode import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_FUTURE_SKEW_S, parse_object, resolve_event_time
from schemas.errors import DecodeError
from schemas.events import MAX_ID_CHARS, identifier_problem, replace_lone_surrogates
from schemas.feedback import AnswerRef, FeedbackEvent, FeedbackKind, Segment

REASON = "invalid_feedback"
FEEDBACK_TYPE = "feedback"
DEFAULT_RATING_SCALE = 5
MIN_RATING_SCALE, MAX_RATING_SCALE = 2, 100
# A comment longer than this is cut (not refused: the verdict it comes with still counts).
MAX_COMMENT_CHARS = 2000
MAX_REASON_CHARS = 64  # a reason is a code (a label of the store), not prose: the prose goes in the comment
MAX_TOPIC_CHARS = 249  # Kafka's own limit on a topic name
THUMBS_UP, THUMBS_DOWN = 1.0, 0.0
THUMBS_SCALE = 1  # a thumbs value is 0 or 1: its scale's top is 1


@dataclass(frozen=True)
class FeedbackOptions:
    """How feedback is read: which OpenTelemetry evaluation names are thumbs and which are ratings (and the top of
    their scale), and the point of a rating's scale, mapped to 0..1, at or below which it counts as negative."""

    thumbs_evaluations: frozenset[str]
    rating_evaluations: frozenset[str]
    rating_scale: int = DEFAULT_RATING_SCALE
    negative_rating_at_most: float = 0.25


def rating_is_negative(value: float, scale: int, options: FeedbackOptions) -> bool:
    """Whether a rating of `value` on 1..`scale` is at or below the configured negative point of its scale."""
    return (value - 1) / (scale - 1) <= options.negative_rating_at_most


# ---- telling feedback from events -------------------------------------------------------------------------------


class _Probe(msgspec.Struct, gc=False):
    """The top-level keys that decide what a record is: `Raw` keeps msgspec from building the messages."""

    type: Any = None
    messages: msgspec.Raw | UnsetType = UNSET
    user_message: msgspec.Raw | UnsetType = UNSET
    response: msgspec.Raw | UnsetType = UNSET


_PROBE = msgspec.json.Decoder(_Probe)


def is_feedback_json(value: bytes | None) -> bool:
    """Whether `value` is our JSON feedback object: a top-level `"type": "feedback"` and none of a conversation
    event's judged fields (`messages`, `user_message`, `response`), so an event that happens to carry a `type` field
    of its own stays an event. Cheap: a value without the bytes `"type"` and `feedback` is never parsed."""
    if not value or b"feedback" not in value or b'"type"' not in value:  # the rarer bytes first: one scan
        return False
    try:
        probe = _PROBE.decode(value)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False  # not a JSON object: the event decoder words why
    return (
        probe.type == FEEDBACK_TYPE
        and probe.messages is UNSET
        and probe.user_message is UNSET
        and probe.response is UNSET
    )


# ---- decoding ---------------------------------------------------------------------------------------------------


def decode_feedback(
    value: bytes | None,
    *,
    topic: str,
    partition: int,
    offset: int,
    record_timestamp_ms: int | None,
    options: FeedbackOptions,
    max_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    max_future_skew_s: float | None = DEFAULT_MAX_FUTURE_SKEW_S,
    now: datetime | None = None,
) -> FeedbackEvent:
    """The feedback event of one record value, or `DecodeError`: the JSON reasons of `consumers.decode` for a value
    that is no JSON object, `invalid_feedback` naming the field for the rest. Without a `timestamp` the record's
    is used; a time more than `max_future_skew_s` ahead of `now` (default: the wall clock) is refused."""
    obj = parse_object(value, max_bytes)
    if obj.get("type") != FEEDBACK_TYPE:
        kind = obj.get("type")
        got = json.dumps(kind)[:40] if isinstance(kind, str) else _shown(kind)  # a type is a code, not a user's words
        raise _invalid(f'type: expected "{FEEDBACK_TYPE}", got {got}')
    fields = _Fields(obj)
    feedback_id = fields.identifier("feedback_id") or f"kafka:{topic}/{partition}/{offset}"
    answer = _answer(fields)
    thumbs, rating, scale = obj.get("thumbs"), obj.get("rating"), obj.get("scale")
    if thumbs is not None and rating is not None:
        raise _invalid("thumbs and rating: give one of them, not both")
    kind_of: FeedbackKind
    if thumbs is not None:
        if scale is not None:
            raise _invalid("scale: only a rating has a scale")
        up = _thumbs(thumbs)
        kind_of, value_of, scale_of, negative = "thumbs", THUMBS_UP if up else THUMBS_DOWN, THUMBS_SCALE, not up
    elif rating is not None:
        scale_of = _scale(scale)
        value_of = _rating(rating, scale_of)
        kind_of, negative = "rating", rating_is_negative(value_of, scale_of, options)
    else:
        raise _invalid("thumbs or rating: one of them is required")
    feedback_time = _time("timestamp", fields.timestamp("timestamp"), record_timestamp_ms, now, max_future_skew_s)
    answer_timestamp = fields.timestamp("answer_timestamp")
    answer_time = (
        None if answer_timestamp is None else _time("answer_timestamp", answer_timestamp, None, now, max_future_skew_s)
    )
    comment = fields.text("comment")
    reason = fields.identifier("reason", max_chars=MAX_REASON_CHARS)
    return FeedbackEvent(
        feedback_id=feedback_id,
        answer=answer,
        feedback_time=feedback_time,
        kind=kind_of,
        value=value_of,
        scale=scale_of,
        negative=negative,
        source="json",
        comment=clean_comment(comment or ""),
        reason=reason or "",
        segment=_segment(fields),
        answer_time=answer_time,
    )


def clean_comment(text: str) -> str:
    """A user's comment as stored: lone surrogates replaced (free text), cut at `MAX_COMMENT_CHARS`."""
    return replace_lone_surrogates(text[:MAX_COMMENT_CHARS])


def _invalid(detail: str) -> DecodeError:
    return DecodeError(REASON, detail)


def _shown(value: Any) -> str:
    """A value for a one-line detail: its JSON type, and the value itself when it is short and not text (text could
    be a user's words)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        text = repr(value)
        return text if len(text) <= 24 else f"a number of {len(text)} digits"
    if isinstance(value, str):
        return "a string"
    return "an object" if isinstance(value, dict) else "an array"


class _Fields:
    """Typed reads of the object's fields, each refusing with a detail that names the field."""

    def __init__(self, obj: dict[str, Any], prefix: str = "") -> None:
        self.obj = obj
        self.prefix = prefix

    def text(self, name: str) -> str | None:
        value = self.obj.get(name)
        if value is None or isinstance(value, str):
            return value
        raise _invalid(f"{self.prefix}{name}: expected a string, got {_shown(value)}")

    def identifier(self, name: str, *, max_chars: int = MAX_ID_CHARS, allow_empty: bool = False) -> str | None:
        """An id or a label (schemas.events' rules: no NUL, no lone surrogate, at most `max_chars` characters)."""
        value = self.text(name)
        if value is None:
            return None
        if not value and not allow_empty:
            raise _invalid(f"{self.prefix}{name}: must not be empty")
        if len(value) > max_chars:
            raise _invalid(f"{self.prefix}{name}: {len(value)} characters, at most {max_chars}")
        if problem := identifier_problem(value):
            raise _invalid(f"{self.prefix}{name}: {problem}")
        return value

    def integer(self, name: str) -> int | None:
        value = self.obj.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise _invalid(f"{self.prefix}{name}: expected an integer, got {_shown(value)}")
        if value < 0:
            raise _invalid(f"{self.prefix}{name}: must be 0 or more, got {value}")
        return value

    def timestamp(self, name: str) -> datetime | None:
        value = self.text(name)
        if value is None:
            return None
        try:
            parsed: datetime = _PARSE_DATETIME(value)
        except ValidationError:
            raise _invalid(f"{name}: not an RFC 3339 date and time") from None
        # As events' timestamps: one without an offset is UTC.
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


# pydantic's datetime validator: the one the events' `timestamp` is parsed with
_PARSE_DATETIME = TypeAdapter(datetime).validator.validate_python


def _answer(fields: _Fields) -> AnswerRef:
    event_id = fields.identifier("event_id")
    response_id = fields.identifier("response_id")
    if event_id is not None and response_id is not None:
        raise _invalid("event_id and response_id: response_id is another name for event_id, give one")
    event_id = event_id if event_id is not None else response_id
    conversation_id = fields.identifier("conversation_id")
    turn = fields.integer("turn")
    if turn is not None and conversation_id is None:
        raise _invalid("turn: needs conversation_id")
    if event_id is None and turn is None:
        raise _invalid("event_id: required (or response_id, or conversation_id with turn) to name the answer")
    topic, partition, offset = _position(fields.obj.get("answer"))
    return AnswerRef(
        event_id=event_id or "",
        conversation_id=conversation_id or "",
        turn=turn,
        topic=topic,
        partition=partition,
        offset=offset,
    )


def _position(value: Any) -> tuple[str, int | None, int | None]:
    """The answer's record, when the feedback carries it: `{"topic", "partition", "offset"?}`."""
    if value is None:
        return "", None, None
    if not isinstance(value, dict):
        raise _invalid(f"answer: expected an object with topic and partition, got {_shown(value)}")
    fields = _Fields(value, "answer.")
    topic = fields.identifier("topic", max_chars=MAX_TOPIC_CHARS)
    partition = fields.integer("partition")
    if topic is None or partition is None:
        raise _invalid("answer: topic and partition are required")
    return topic, partition, fields.integer("offset")


def _thumbs(value: Any) -> bool:
    """Whether a thumbs value is up: "up" | "down" | 1 | 0 | true | false."""
    if value in ("up", "down"):
        return bool(value == "up")
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return value == 1
    raise _invalid(f'thumbs: expected "up", "down", 1, 0, true or false, got {_shown(value)}')


def _scale(value: Any) -> int:
    if value is None:
        return DEFAULT_RATING_SCALE
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(f"scale: expected an integer, got {_shown(value)}")
    if not MIN_RATING_SCALE <= value <= MAX_RATING_SCALE:
        raise _invalid(f"scale: must be {MIN_RATING_SCALE}..{MAX_RATING_SCALE}, got {value}")
    return value


def _rating(value: Any, scale: int) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _invalid(f"rating: expected a number, got {_shown(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise _invalid(f"rating: expected a finite number, got {value}")
    if not 1 <= value <= scale:
        raise _invalid(f"rating: must be 1..{scale} (the scale), got {_shown(value)}")
    return float(value)


def _time(
    field: str,
    timestamp: datetime | None,
    record_timestamp_ms: int | None,
    now: datetime | None,
    max_future_skew_s: float | None,
) -> datetime:
    """`consumers.decode`'s event time checks (bounds, future skew), refused as feedback naming the field."""
    try:
        return resolve_event_time(timestamp, record_timestamp_ms, now, max_future_skew_s)[0]
    except DecodeError as e:
        raise _invalid(f"{field}: {e.detail}") from None


def _segment(fields: _Fields) -> Segment | None:
    """The segment the feedback names, when it names an app (model and prompt version alone name no segment)."""
    app = fields.identifier("app")
    model = fields.identifier("model", allow_empty=True)
    prompt_version = fields.identifier("prompt_version", allow_empty=True)
    if app is None:
        return None
    return Segment(app=app, model=model or "", prompt_version=prompt_version or "")
