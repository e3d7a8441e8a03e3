"""Decoding a Kafka record value into a `ConversationEvent`: a pure function of its arguments (the wall clock is
read only when no `now` is given) that never raises anything but `DecodeError`, whatever the bytes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError

from schemas.errors import DecodeError
from schemas.events import ChatEvent, ConversationEvent, FlatEvent, KafkaPosition

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


# The stable reason codes, documented in the README and used as metric labels.
REASONS = ("empty_value", "oversized", "not_utf8", "invalid_json", "not_object", "invalid_event", "no_judgeable_pair")


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


def _parse_object(value: bytes | None, max_bytes: int) -> dict[str, Any]:
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


def _event_time(parsed: FlatEvent | ChatEvent, record_timestamp_ms: int | None, now: datetime, max_future_skew_s: float | None) -> datetime:
    """The event's own timestamp, else the record's; raises `DecodeError` if missing, unstorable or too far ahead."""
    if parsed.timestamp is not None:
        event_time = parsed.timestamp
    elif record_timestamp_ms is not None and record_timestamp_ms >= 0:
        event_time = datetime.fromtimestamp(record_timestamp_ms / 1000, tz=UTC)
    else:
        raise DecodeError("invalid_event", "no timestamp in the event and none on the Kafka record")
    if not MIN_EVENT_TIME <= event_time < MAX_EVENT_TIME:
        raise DecodeError("invalid_event", f"timestamp {event_time.isoformat()} is outside {MIN_EVENT_TIME.year}-{MAX_EVENT_TIME.year - 1}")
    # The monitor's clock is the reference, not the record's timestamp: that is the producer's CreateTime by
    # default, i.e. possibly the very clock that is wrong.
    if max_future_skew_s is not None and event_time > now + timedelta(seconds=max_future_skew_s):
        ahead = (event_time - now).total_seconds()
        source = "timestamp" if parsed.timestamp is not None else "record timestamp"
        raise DecodeError(
            "invalid_event",
            f"{source} {event_time.isoformat()} is {ahead:.0f} s ahead of the monitor's clock (limit {max_future_skew_s:.0f} s): a bad clock",
        )
    return event_time


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
    obj = _parse_object(value, max_bytes)
    shape = "chat" if "messages" in obj else "flat"
    try:
        parsed: FlatEvent | ChatEvent = ChatEvent.model_validate(obj) if shape == "chat" else FlatEvent.model_validate(obj)
    except ValidationError as e:
        raise DecodeError("invalid_event", f"{shape} event: {_validation_summary(e)}") from None
    except (RecursionError, ValueError) as e:  # a last resort: the depth bound above should make these unreachable
        raise DecodeError("invalid_event", f"{shape} event: {type(e).__name__}") from None

    if isinstance(parsed, ChatEvent):
        pair = parsed.judged_pair()
        if pair is None:
            raise DecodeError("no_judgeable_pair", "no assistant message with a user message before it")
        question, response = pair
    else:
        question, response = parsed.user_message, parsed.response
    if not question.strip():
        raise DecodeError("no_judgeable_pair", "the user message is empty")

    # A replay of the same record gets the same id, so it does not double-count.
    event_id = parsed.event_id or f"kafka:{position.topic}/{position.partition}/{position.offset}"
    event_time = _event_time(parsed, record_timestamp_ms, now or datetime.now(UTC), max_future_skew_s)
    return ConversationEvent(
        event_id=event_id,
        conversation_id=parsed.conversation_id or event_id,
        event_time=event_time,
        app=parsed.app,
        model=parsed.model,
        prompt_version=parsed.prompt_version,
        metadata=parsed.metadata,
        question=question,
        response=response,
        shape=shape,
        source=position,
    )
