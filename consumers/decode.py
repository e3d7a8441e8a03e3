"""Decoding a Kafka record value into a `ConversationEvent`: a pure function of its arguments (the wall clock is
read only when no `now` is given) that never raises anything but `DecodeError`, whatever the bytes.

Two paths, one outcome. The fast path (msgspec, straight into typed structs) takes the common events: every field
known, each of the types the event schema accepts as is. Anything else, every malformed value included, goes the
reference path (json.loads and the pydantic models), which alone words the errors; the fast path never refuses an
event, it only declines it. So it must accept only what the reference path accepts, with the same result: see
`_fast` for the checks that make it so (tests/consumers/test_decode_paths.py compares the two on arbitrary input)."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, UnsetType
from pydantic import TypeAdapter, ValidationError

from schemas.errors import DecodeError
from schemas.events import (
    MAX_ID_CHARS,
    NO_HISTORY,
    ChatEvent,
    ConversationEvent,
    FlatEvent,
    History,
    KafkaPosition,
    Turn,
    history_of,
    judged_positions,
)

DEFAULT_MAX_EVENT_BYTES = 1_000_000
# An event time this far ahead of the monitor's clock is a bad clock: accepted, it would sit in the alert windows
# of a future hour (and the newest-data views) until real time caught up with it.
DEFAULT_MAX_FUTURE_SKEW_S = 3600.0
# ClickHouse's DateTime64 clamps values outside 1900-2299 silently; anything outside this range is a bad clock
# or a bad encoding, not a conversation.
MIN_EVENT_TIME = datetime(2000, 1, 1, tzinfo=UTC)
MAX_EVENT_TIME = datetime(2200, 1, 1, tzinfo=UTC)
# Real events nest a few levels (chat parts, tool inputs). A fixed bound makes the outcome independent of the
# caller's stack depth and keeps validation and the metadata re-encoding far from Python's recursion limit.
MAX_JSON_DEPTH = 100


# The stable reason codes, documented in docs/input.md (Dead letters) and used as metric labels.
REASONS = (
    "empty_value",
    "oversized",
    "not_utf8",
    "invalid_json",
    "not_object",
    "invalid_event",
    "no_judgeable_pair",
    "invalid_feedback",  # a users' feedback object (consumers.feedback) with a malformed field
)


def _validation_summary(err: ValidationError) -> str:
    parts = []
    for e in err.errors(include_url=False, include_input=False)[:5]:
        loc = ".".join(str(x) for x in e["loc"]) or "(event)"
        parts.append(f"{loc}: {e['msg']}")
    return "; ".join(parts)


def _object_without_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict; raises `DecodeError` on a repeated key, which json.loads would settle silently
    by keeping the last value (another parser might keep the first: the input is ambiguous)."""
    obj = dict(pairs)
    if len(obj) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DecodeError("invalid_json", f"duplicate key {json.dumps(key)[:200]} in an object")
            seen.add(key)
    return obj


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` nests objects or arrays more than `limit` levels deep (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


def _json_error_detail(err: json.JSONDecodeError) -> str:
    # Some messages end in " at" already ("Invalid control character at"): do not say "at at".
    return f"{err.msg.removesuffix(' at')} at line {err.lineno} column {err.colno}"


def parse_object(value: bytes | None, max_bytes: int) -> dict[str, Any]:
    """The record value as a JSON object; raises `DecodeError` (`empty_value`, `oversized`, `not_utf8`, `invalid_json`
    for bad JSON, a repeated key or too deep a nesting, `not_object`)."""
    if value is None or len(value) == 0:
        raise DecodeError("empty_value", "record has no value")
    if len(value) > max_bytes:
        raise DecodeError("oversized", f"value is {len(value)} bytes, limit {max_bytes}")
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DecodeError("not_utf8", f"invalid UTF-8 at byte {e.start}") from None
    try:
        obj = json.loads(text, object_pairs_hook=_object_without_duplicate_keys)
    except json.JSONDecodeError as e:
        raise DecodeError("invalid_json", _json_error_detail(e)) from None
    except RecursionError:
        raise DecodeError("invalid_json", f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    if not isinstance(obj, dict):
        raise DecodeError("not_object", f"top-level JSON value is {type(obj).__name__}, expected an object")
    if _deeper_than(obj, MAX_JSON_DEPTH):
        raise DecodeError("invalid_json", f"nested deeper than {MAX_JSON_DEPTH} levels")
    return obj


_MIN_EPOCH_S, _MAX_EPOCH_S = MIN_EVENT_TIME.timestamp(), MAX_EVENT_TIME.timestamp()
# Epoch seconds (floats) decide only where they cannot differ from the datetimes, this far from a bound.
_EPOCH_MARGIN_S = 1.0


def resolve_event_time(
    timestamp: datetime | None, record_timestamp_ms: int | None, now: datetime | None, max_future_skew_s: float | None
) -> tuple[datetime, float]:
    """The event's own timestamp, else the record's, and its epoch seconds; raises `DecodeError` if missing,
    unstorable or too far ahead."""
    if timestamp is not None:
        event_time = timestamp
    elif record_timestamp_ms is not None and record_timestamp_ms >= 0:
        event_time = datetime.fromtimestamp(record_timestamp_ms / 1000, tz=UTC)
    else:
        raise DecodeError("invalid_event", "no timestamp in the event and none on the Kafka record")
    epoch_s = event_time.timestamp()
    # Compared as floats first (cheaper than aware datetimes); near a bound, as datetimes, exactly.
    inside = (
        _MIN_EPOCH_S + _EPOCH_MARGIN_S <= epoch_s < _MAX_EPOCH_S - _EPOCH_MARGIN_S
        or MIN_EVENT_TIME <= event_time < MAX_EVENT_TIME
    )
    if not inside:
        raise DecodeError(
            "invalid_event",
            f"timestamp {event_time.isoformat()} is outside {MIN_EVENT_TIME.year}-{MAX_EVENT_TIME.year - 1}",
        )
    # The monitor's clock is the reference, not the record's timestamp: that is the producer's CreateTime by
    # default, i.e. possibly the very clock that is wrong.
    if max_future_skew_s is None or (now is None and epoch_s < time.time() + max_future_skew_s - _EPOCH_MARGIN_S):
        return event_time, epoch_s
    now = now or datetime.now(UTC)
    if event_time > now + timedelta(seconds=max_future_skew_s):
        ahead = (event_time - now).total_seconds()
        source = "timestamp" if timestamp is not None else "record timestamp"
        raise DecodeError(
            "invalid_event",
            f"{source} {event_time.isoformat()} is {ahead:.0f} s ahead of the monitor's clock (limit "
            f"{max_future_skew_s:.0f} s): a bad clock",
        )
    return event_time, epoch_s


class DecodedEvent(msgspec.Struct, frozen=True):
    """A decoded, validated event without its Kafka position: what the pipeline samples (cheap to build), and
    `event(position)` is the `ConversationEvent` the judge and the store see."""

    event_id: str
    conversation_id: str
    event_time: datetime
    app: str
    model: str
    prompt_version: str
    metadata: dict[str, str]
    question: str
    response: str
    shape: Literal["flat", "chat"]
    epoch_s: float  # event_time as epoch seconds (the traffic counts' minute)
    # A chat event's history (`schemas.events.History`); flat events keep the defaults.
    context: tuple[Turn, ...] = ()
    system: str = ""
    turn: int = 0

    def event(self, position: KafkaPosition) -> ConversationEvent:
        """The `ConversationEvent` of this event at `position`."""
        return ConversationEvent(
            event_id=self.event_id,
            conversation_id=self.conversation_id,
            event_time=self.event_time,
            app=self.app,
            model=self.model,
            prompt_version=self.prompt_version,
            metadata=self.metadata,
            question=self.question,
            response=self.response,
            shape=self.shape,
            source=position,
            context=self.context,
            system=self.system,
            turn=self.turn,
        )


def decode_event(
    value: bytes | None,
    *,
    position: KafkaPosition,
    record_timestamp_ms: int | None,
    max_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    max_future_skew_s: float | None = DEFAULT_MAX_FUTURE_SKEW_S,
    now: datetime | None = None,
) -> ConversationEvent:
    """Decode one record value (flat or chat shape) into a `ConversationEvent`, or raise `DecodeError`. An event
    time more than `max_future_skew_s` ahead of `now` (default: the wall clock; None disables) is refused."""
    decoded = decode_fields(
        value,
        topic=position.topic,
        partition=position.partition,
        offset=position.offset,
        record_timestamp_ms=record_timestamp_ms,
        max_bytes=max_bytes,
        max_future_skew_s=max_future_skew_s,
        now=now,
    )
    return decoded.event(position)


def decode_fields(
    value: bytes | None,
    *,
    topic: str,
    partition: int,
    offset: int,
    record_timestamp_ms: int | None,
    max_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    max_future_skew_s: float | None = DEFAULT_MAX_FUTURE_SKEW_S,
    now: datetime | None = None,
    fast: bool = True,
) -> DecodedEvent:
    """`decode_event` without building the `ConversationEvent` (the record's position only names an event without
    an id): the same checks, the same `DecodeError`s. `fast=False` skips the fast path (for a value it declined
    already: `decode_common`)."""
    if value is None or len(value) == 0:
        raise DecodeError("empty_value", "record has no value")
    if len(value) > max_bytes:
        raise DecodeError("oversized", f"value is {len(value)} bytes, limit {max_bytes}")
    fields = (_fast(value) if fast else None) or _reference(value, max_bytes)
    return _decoded(fields, topic, partition, offset, record_timestamp_ms, now, max_future_skew_s)


def decode_common(
    value: bytes | None,
    *,
    topic: str,
    partition: int,
    offset: int,
    record_timestamp_ms: int | None,
    max_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    max_future_skew_s: float | None = DEFAULT_MAX_FUTURE_SKEW_S,
    now: datetime | None = None,
) -> DecodedEvent | None:
    """`decode_fields` of a common event (the fast path takes it), else None: `decode_fields(..., fast=False)`
    decides. May raise the time checks' `DecodeError`s, as `decode_fields` would. A common event holds only the event
    schema's fields, so it is never a users' feedback object (`consumers.feedback.is_feedback_json`: a top-level
    `type`): a caller that must tell the two apart can ask this first and probe for feedback only when it declines."""
    if not value or len(value) > max_bytes:
        return None  # `decode_fields` words why (after the caller's feedback probe, which must see it first)
    fields = _fast(value)
    if fields is None:
        return None
    return _decoded(fields, topic, partition, offset, record_timestamp_ms, now, max_future_skew_s)


def _decoded(
    fields: _Fields,
    topic: str,
    partition: int,
    offset: int,
    record_timestamp_ms: int | None,
    now: datetime | None,
    max_future_skew_s: float | None,
) -> DecodedEvent:
    """The event of decoded `fields`, with the defaults that need the record (ids, event time)."""
    event_id, conversation_id, app, model, prompt_version, metadata, question, response, shape, timestamp, history = (
        fields
    )
    # A replay of the same record gets the same id, so it does not double-count.
    event_id = event_id or f"kafka:{topic}/{partition}/{offset}"
    event_time, epoch_s = resolve_event_time(timestamp, record_timestamp_ms, now, max_future_skew_s)
    return DecodedEvent(
        event_id,
        conversation_id or event_id,
        event_time,
        app,
        model,
        prompt_version,
        metadata,
        question,
        response,
        shape,
        epoch_s,
        history.context,
        history.system,
        history.turn,
    )


# (event_id, conversation_id, app, model, prompt_version, metadata, question, response, shape, timestamp, history),
# before the defaults that need the record (ids, event time)
_Fields = tuple[
    str | None,
    str | None,
    str,
    str,
    str,
    dict[str, str],
    str,
    str,
    Literal["flat", "chat"],
    datetime | None,
    History,
]


def _reference(value: bytes, max_bytes: int) -> _Fields:
    """The reference path: json.loads and the pydantic models; raises every `DecodeError` but the time checks."""
    obj = parse_object(value, max_bytes)
    shape: Literal["flat", "chat"] = "chat" if "messages" in obj else "flat"
    try:
        parsed: FlatEvent | ChatEvent = (
            ChatEvent.model_validate(obj) if shape == "chat" else FlatEvent.model_validate(obj)
        )
    except ValidationError as e:
        raise DecodeError("invalid_event", f"{shape} event: {_validation_summary(e)}") from None
    except (RecursionError, ValueError) as e:  # a last resort: the depth bound above should make these unreachable
        raise DecodeError("invalid_event", f"{shape} event: {type(e).__name__}") from None

    history = NO_HISTORY
    if isinstance(parsed, ChatEvent):
        pair = parsed.judged_pair()
        if pair is None:
            raise DecodeError("no_judgeable_pair", "no assistant message with a user message before it")
        question, response = pair
        history = parsed.history()
    else:
        question, response = parsed.user_message, parsed.response
    if not question.strip():
        raise DecodeError("no_judgeable_pair", "the user message is empty")
    p = parsed
    return (
        p.event_id,
        p.conversation_id,
        p.app,
        p.model,
        p.prompt_version,
        p.metadata,
        question,
        response,
        shape,
        p.timestamp,
        history,
    )


# ---- the fast path ---------------------------------------------------------------------------------------------
# Every field of the event schema, each typed as the reference path takes it without coercion; unknown fields are
# refused, so that every key and every string of the document lands in a field (the duplicate-key check needs it).
# gc=False: these structs live for one decode and hold no cycles, so the collector need not track them.


class _Part(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    type: str
    text: str | UnsetType | None = UNSET


class _Message(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    role: str
    content: str | list[_Part] | UnsetType | None = UNSET

    def text(self) -> str:
        """As `ChatMessage.text`."""
        content = self.content
        if content is None or content is UNSET:
            return ""
        if isinstance(content, str):
            return content
        if len(content) == 1:  # the common case, without building a join
            p = content[0]
            return p.text if p.type == "text" and isinstance(p.text, str) else ""
        return "\n".join(p.text for p in content if p.type == "text" and isinstance(p.text, str))


# The models' lengths, checked by msgspec as it decodes (a string out of them is declined, not refused)
_Id = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ID_CHARS)]  # the ids and the app
_Label = Annotated[str, msgspec.Meta(max_length=MAX_ID_CHARS)]  # the model and the prompt version


class _Envelope(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    event_id: _Id | UnsetType | None = UNSET
    conversation_id: _Id | UnsetType | None = UNSET
    timestamp: str | UnsetType | None = UNSET
    app: _Id | UnsetType | None = UNSET
    model: _Label | UnsetType | None = UNSET
    prompt_version: _Label | UnsetType | None = UNSET
    metadata: dict[str, str] | UnsetType | None = UNSET
    user_message: str | UnsetType = UNSET
    response: str | UnsetType = UNSET
    messages: list[_Message] | UnsetType | None = UNSET


class _ScalarEnvelope(_Envelope, forbid_unknown_fields=True):
    """The second try, for metadata with values other than strings (the reference path turns scalars into text)."""

    metadata: dict[str, str | int | float | bool | None] | UnsetType | None = UNSET  # type: ignore[assignment]


_DECODERS = (msgspec.json.Decoder(_Envelope), msgspec.json.Decoder(_ScalarEnvelope))
# `\u0000` or `\u0022` anywhere: one regex scan finds either at half the cost of a substring test for `\u00`
_NUL_OR_QUOTE_ESCAPE = re.compile(rb"\\u00(?:00|22)").search
_ENCODER = msgspec.json.Encoder()
# pydantic's own datetime validator, as the envelope's `timestamp` field parses a string (lax mode)
_PARSE_DATETIME = TypeAdapter(datetime).validator.validate_python


def parse_utc_time(text: str) -> datetime | None:
    """`text` as the event's timestamp field parses it (pydantic's datetime, in UTC; one without an offset is UTC, as
    `EventEnvelope._aware_utc` says), or None where pydantic refuses it. The common forms are parsed by
    `datetime.fromisoformat`, which gives the same datetime in UTC at under half the cost (no `astimezone` from
    pydantic's own time zone); anything else, or what `fromisoformat` refuses, by pydantic."""
    # Only the common forms "YYYY-MM-DDTHH:MM:SSZ", "...SS.fffZ" and "...SS.ffffffZ" (UTC to the second, milli- or
    # microsecond, as JavaScript, Java and most clients write it) go to `fromisoformat`, which takes many forms pydantic
    # refuses (week dates like 2026-W49-1, any separator, basic forms without dashes): the length, and each separator in
    # place (one expression: a loop costs more than the parse).
    n = len(text)
    if (
        (n == 27 or n == 24 or n == 20)
        and text[n - 1] == "Z"
        and text[10] == "T"
        and text[4] == "-"
        and text[7] == "-"
        and text[13] == ":"
        and text[16] == ":"
        and (n == 20 or text[19] == ".")
    ):
        try:
            return datetime.fromisoformat(text)  # 'Z': tzinfo is UTC itself
        except ValueError:
            pass  # pydantic decides (and refuses: a day or an hour out of range)
    try:
        parsed: datetime = _PARSE_DATETIME(text)
    except ValidationError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _scalar_text(value: str | int | float | bool) -> str:
    # As `schemas.events._scalar_to_str` for the scalars the fast path admits (bool before int: True is an int).
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _decode_structs(value: bytes) -> _Envelope | None:
    """The value as structs (metadata values as strings, else as scalars), or None where msgspec refuses it."""
    for decoder in _DECODERS:
        try:
            return decoder.decode(value)
        except msgspec.ValidationError:
            continue
        except msgspec.DecodeError:
            return None
    return None


def _fast(value: bytes) -> _Fields | None:
    """The fields of a common event, or None: declined, and the reference path decides (and words why). It accepts
    only what the reference path accepts, with the same result (see the comments)."""
    # - msgspec's grammar is the standard one, stricter than json.loads (no NaN, no lone surrogates, no numbers past a
    #   double), and it refuses invalid UTF-8 (overlong forms, encoded surrogates) as `bytes.decode` does: it fails
    #   rather than differs;
    # - a repeated key, which the reference refuses and msgspec settles silently, shows in the quote bytes: every key
    #   and string lands in a field, so re-encoding the structs writes two quotes per string plus one per quote inside
    #   (written `\"`), as the value has them, unless a string went missing with a repeated key (a quote written
    #   `\u0022` would not count: declined);
    # - no NUL (only `\u0000` can write one) and no lone surrogate (msgspec refuses them): the identifier and text
    #   rules have nothing to refuse or replace; lengths are checked as the models check them;
    # - the timestamp is parsed as the model parses it (`parse_utc_time`: pydantic's validator, or the same result).
    if _NUL_OR_QUOTE_ESCAPE(value):
        return None
    raw = _decode_structs(value)
    if raw is None or _ENCODER.encode(raw).count(b'"') != value.count(b'"'):
        return None  # refused by msgspec, or a repeated key
    # Null or absent: the model's default; a string is within the model's lengths (msgspec checked them).
    event_id = None if raw.event_id is UNSET else raw.event_id
    conversation_id = None if raw.conversation_id is UNSET else raw.conversation_id
    app = "default" if raw.app is None or raw.app is UNSET else raw.app
    model = "" if raw.model is None or raw.model is UNSET else raw.model
    prompt_version = "" if raw.prompt_version is None or raw.prompt_version is UNSET else raw.prompt_version
    md = raw.metadata
    if md is None or md is UNSET:
        metadata: dict[str, str] = {}
    elif isinstance(raw, _ScalarEnvelope):
        metadata = {k: _scalar_text(v) for k, v in md.items() if v is not None}
    else:
        metadata = md
    shape: Literal["flat", "chat"]
    history = NO_HISTORY
    if raw.messages is UNSET:
        shape = "flat"
        question, response = raw.user_message, raw.response
        if question is UNSET or response is UNSET:
            return None
    else:
        shape = "chat"
        chat = _chat_fields(raw.messages)
        if chat is None:
            return None
        question, response, history = chat
    if not question or question.isspace():  # `not question.strip()` (the same whitespace), without a copy
        return None
    timestamp: datetime | None = None
    if isinstance(raw.timestamp, str):
        timestamp = parse_utc_time(raw.timestamp)
        if timestamp is None:
            return None
    return (
        event_id,
        conversation_id,
        app,
        model,
        prompt_version,
        metadata,
        question,
        response,
        shape,
        timestamp,
        history,
    )


def _chat_fields(messages: list[_Message] | None) -> tuple[str, str, History] | None:
    """As `ChatEvent.judged_pair` and `ChatEvent.history`, for a list of at least one message (else None:
    declined), by the same functions and finding the pair once."""
    if not messages:
        return None
    found = judged_positions(messages)
    if found is None:
        return None
    question_at, answer_at = found
    # The first turn (nothing before the question, the common case) needs no pass over the history.
    history = history_of(messages, question_at, answer_at) if answer_at > 1 else NO_HISTORY
    return messages[question_at].text(), messages[answer_at].text(), history
