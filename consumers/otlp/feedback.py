"""Users' feedback in OpenTelemetry: a `gen_ai.evaluation.result` log record (GenAI semantic conventions) mapped to a
`schemas.feedback.FeedbackEvent`, or to why it is not one. A pure function of the log record.

Which evaluations are users' feedback: those whose `gen_ai.evaluation.name` is one of the configured thumbs or
rating names, and Microsoft Foundry's end-user human evaluations (`internal_properties` says
`microsoft.human_evaluation.source` = `end_user` and `.kind` = `binary` or `likert_5`), whatever their name. Every
other evaluation (an LLM judge's `Relevance`, a reviewer's score in a portal) is someone else's verdict.

    answer     gen_ai.response.id > the record's trace and span ids (`otel:<trace>/<span>`, the answer's span)
    thumbs     score.value 1 | 0 (true | false), or score.label thumbs_up | up | positive | pass (1) and thumbs_down |
               down | negative | fail (0), any case; both given, they must agree
    rating     score.value on 1..the scale (the configured scale; 5 for a `likert_5` human evaluation)
    comment    gen_ai.evaluation.explanation
    time       the record's time (else its observed time, else the Kafka record's)
    id         microsoft.human_evaluation.id when given, else a hash of the log record (trace and span ids, time and
               attributes): a redelivered record keeps its id"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from consumers.decode import resolve_event_time
from consumers.feedback import (
    THUMBS_DOWN,
    THUMBS_SCALE,
    THUMBS_UP,
    FeedbackOptions,
    clean_comment,
    rating_is_negative,
)
from schemas.errors import DecodeError
from schemas.events import MAX_ID_CHARS, identifier_problem
from schemas.feedback import AnswerRef, FeedbackEvent

if TYPE_CHECKING:  # the protobuf modules load only with the reader
    from consumers.otlp.wire import LogRecord

EVALUATION_EVENT = "gen_ai.evaluation.result"
# Where a log record names its event: the Logs API's event name, the older `event.name` attribute, and the attribute
# Azure Monitor's Python logging handler routes custom events by (Foundry's human-evaluation sample emits with it).
_EVENT_NAME_ATTRIBUTES = ("event.name", "microsoft.custom_event.name")
_UP_LABELS = frozenset({"thumbs_up", "up", "positive", "pass"})
_DOWN_LABELS = frozenset({"thumbs_down", "down", "negative", "fail"})
_LIKERT_5 = 5

# Why an evaluation record was refused (a metric label, so a fixed set): `invalid_feedback:<why>`
InvalidWhy = Literal["no_answer", "bad_id", "no_score", "bad_score", "error", "bad_time"]


@dataclass(frozen=True)
class InvalidFeedback:
    """A feedback record that cannot be stored: `why` is a stable label, `detail` one line naming the attribute."""

    why: InvalidWhy
    detail: str


def is_evaluation_result(log: LogRecord) -> bool:
    """Whether the log record is a `gen_ai.evaluation.result` event."""
    if log.event_name:
        return log.event_name == EVALUATION_EVENT
    return any(log.attributes.get(key) == EVALUATION_EVENT for key in _EVENT_NAME_ATTRIBUTES)


def feedback_of(
    log: LogRecord,
    options: FeedbackOptions,
    *,
    record_timestamp_ms: int | None,
    max_future_skew_s: float | None,
    now: datetime | None,
) -> FeedbackEvent | InvalidFeedback | None:
    """The users' feedback an evaluation record holds; None for an evaluation that is no users' feedback."""
    a = log.attributes
    name = a.get("gen_ai.evaluation.name")
    name = name if isinstance(name, str) else ""
    human = _human_evaluation(a.get("internal_properties"))
    scale: int | None  # None: thumbs
    if name in options.thumbs_evaluations:
        scale = None
    elif name in options.rating_evaluations:
        scale = options.rating_scale
    elif human is not None and human.get("microsoft.human_evaluation.source") == "end_user":
        kind = human.get("microsoft.human_evaluation.kind")
        if kind == "binary":
            scale = None
        elif kind == "likert_5":
            scale = _LIKERT_5
        else:
            return None
    else:
        return None
    if error := a.get("error.type"):
        return InvalidFeedback("error", f"error.type: the evaluation failed ({_short(error)})")
    answer = _answer(log)
    if isinstance(answer, InvalidFeedback):
        return answer
    score = _score(a.get("gen_ai.evaluation.score.value"), a.get("gen_ai.evaluation.score.label"), scale)
    if isinstance(score, InvalidFeedback):
        return score
    negative = score == THUMBS_DOWN if scale is None else rating_is_negative(score, scale, options)
    try:
        time = resolve_event_time(_nanos_time(log.time_unix_nano), record_timestamp_ms, now, max_future_skew_s)[0]
    except DecodeError as e:
        return InvalidFeedback("bad_time", f"time: {e.detail}")
    explanation = a.get("gen_ai.evaluation.explanation")
    feedback_id = _feedback_id(log, name, human)
    if isinstance(feedback_id, InvalidFeedback):
        return feedback_id
    return FeedbackEvent(
        feedback_id=feedback_id,
        answer=answer,
        feedback_time=time,
        kind="thumbs" if scale is None else "rating",
        value=score,
        scale=THUMBS_SCALE if scale is None else scale,
        negative=negative,
        source="otlp",
        comment=clean_comment(explanation) if isinstance(explanation, str) else "",
    )


def _human_evaluation(value: Any) -> dict[str, Any] | None:
    """Foundry's `internal_properties`: a JSON-encoded object (or, from another encoder, a map)."""
    if isinstance(value, str) and value[:1] == "{":
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return None
    return value if isinstance(value, dict) else None


def _answer(log: LogRecord) -> AnswerRef | InvalidFeedback:
    response_id = log.attributes.get("gen_ai.response.id")
    conversation_id = log.attributes.get("gen_ai.conversation.id")
    conversation_id = conversation_id if isinstance(conversation_id, str) else ""
    if _id_problem(conversation_id):
        conversation_id = ""  # context only: the answer is named by the ids below
    trace_id, span_id = _valid_id(log.trace_id), _valid_id(log.span_id)
    if isinstance(response_id, str) and response_id:
        if problem := _id_problem(response_id):
            return InvalidFeedback("bad_id", f"gen_ai.response.id: {problem}")
        event_id = response_id
    elif trace_id and span_id:
        event_id = f"otel:{trace_id}/{span_id}"
    else:
        return InvalidFeedback("no_answer", "no gen_ai.response.id and no trace and span ids: the answer is unnamed")
    return AnswerRef(event_id=event_id, conversation_id=conversation_id, trace_id=trace_id, span_id=span_id)


def _score(value: Any, label: Any, scale: int | None) -> float | InvalidFeedback:
    """The value of a thumbs (`scale` None: 1 up, 0 down) or of a rating on 1..`scale`."""
    if isinstance(value, bool):
        number: float | None = float(value)
    elif isinstance(value, int | float):
        number = float(value)
    elif value is None:
        number = None
    else:
        return InvalidFeedback("bad_score", f"gen_ai.evaluation.score.value: not a number ({_short(value)})")
    if number is not None and not math.isfinite(number):  # NaN and the infinities: OTLP/JSON's special values
        return InvalidFeedback("bad_score", f"gen_ai.evaluation.score.value: {number} is not a finite number")
    if scale is not None:
        if isinstance(value, bool):
            return InvalidFeedback("bad_score", "gen_ai.evaluation.score.value: a rating is a number, not a boolean")
        if number is None:
            return InvalidFeedback("no_score", "gen_ai.evaluation.score.value: a rating needs one")
        if not 1 <= number <= scale:
            return InvalidFeedback("bad_score", f"gen_ai.evaluation.score.value: {number:g} is outside 1..{scale}")
        return number
    by_value = None if number is None else {THUMBS_UP: True, THUMBS_DOWN: False}.get(number)
    if number is not None and by_value is None:
        return InvalidFeedback("bad_score", f"gen_ai.evaluation.score.value: {number:g} is no thumbs (1 or 0)")
    by_label = None
    if isinstance(label, str) and label:
        folded = label.lower()
        by_label = True if folded in _UP_LABELS else False if folded in _DOWN_LABELS else None
        if by_label is None and by_value is None:
            return InvalidFeedback("bad_score", f"gen_ai.evaluation.score.label: {_short(label)} is no thumbs")
    if by_value is not None and by_label is not None and by_value != by_label:
        return InvalidFeedback("bad_score", f"score.value {number:g} and score.label {_short(label)} disagree")
    up = by_value if by_value is not None else by_label
    if up is None:
        return InvalidFeedback("no_score", "gen_ai.evaluation.score.value or .label: a thumbs needs one")
    return THUMBS_UP if up else THUMBS_DOWN


def _id_problem(text: str) -> str | None:
    """Why `text` cannot be an id (schemas.events' rules), or None."""
    if len(text) > MAX_ID_CHARS:
        return f"{len(text)} characters, at most {MAX_ID_CHARS}"
    return identifier_problem(text)


def _valid_id(hex_id: str) -> str:
    """A trace or span id, '' when absent or all zeros (OpenTelemetry's invalid id)."""
    return hex_id if hex_id.strip("0") else ""


def _nanos_time(time_unix_nano: int) -> datetime | None:
    if time_unix_nano <= 0:
        return None  # the Kafka record's time stands in
    return datetime.fromtimestamp(time_unix_nano / 1e9, tz=UTC)


def _feedback_id(log: LogRecord, name: str, human: dict[str, Any] | None) -> str | InvalidFeedback:
    given = human.get("microsoft.human_evaluation.id") if human is not None else None
    if isinstance(given, str) and given:
        if problem := _id_problem(given):
            return InvalidFeedback("bad_id", f"internal_properties: microsoft.human_evaluation.id: {problem}")
        return given
    # The whole record but its resource: the same record redelivered gets the same id, two evaluations differ
    key = json.dumps([log.trace_id, log.span_id, log.time_unix_nano, name, log.attributes], sort_keys=True, default=str)
    return "otel-eval:" + hashlib.blake2b(key.encode(), digest_size=16).hexdigest()


def _short(value: Any) -> str:
    """A value for a one-line detail, at most 40 characters of it."""
    return json.dumps(value if isinstance(value, str | int | float | bool) else str(value))[:40]
