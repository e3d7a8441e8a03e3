"""Decoding a Kafka record value into a `ConversationEvent`: a pure function that never raises anything but
`DecodeError`, whatever the bytes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from schemas.errors import DecodeError
from schemas.events import ChatEvent, ConversationEvent, FlatEvent, KafkaPosition

DEFAULT_MAX_EVENT_BYTES = 1_000_000
# ClickHouse's DateTime64 clamps values outside 1900-2299 silently; anything outside this range is a bad clock
# or a bad encoding, not a conversation.
MIN_EVENT_TIME = datetime(2000, 1, 1, tzinfo=UTC)
MAX_EVENT_TIME = datetime(2200, 1, 1, tzinfo=UTC)


# The stable reason codes, documented in the README and used as metric labels.
REASONS = ("empty_value", "oversized", "not_utf8", "invalid_json", "not_object", "invalid_event", "no_judgeable_pair")


def _validation_summary(err: ValidationError) -> str:
    parts = []
    for e in err.errors(include_url=False, include_input=False)[:5]:
        loc = ".".join(str(x) for x in e["loc"]) or "(event)"
        parts.append(f"{loc}: {e['msg']}")
    return "; ".join(parts)


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
        obj = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as e:
        detail = f"{e.msg} at line {e.lineno} column {e.colno}" if isinstance(e, json.JSONDecodeError) else "nested too deeply"
        raise DecodeError("invalid_json", detail) from None
    if not isinstance(obj, dict):
        raise DecodeError("not_object", f"top-level JSON value is {type(obj).__name__}, expected an object")
    return obj


def decode_event(
    value: bytes | None,
    *,
    position: KafkaPosition,
    record_timestamp_ms: int | None,
    max_bytes: int = DEFAULT_MAX_EVENT_BYTES,
) -> ConversationEvent:
    """Decode one record value (flat or chat shape) into a `ConversationEvent`, or raise `DecodeError`."""
    obj = _parse_object(value, max_bytes)
    shape = "chat" if "messages" in obj else "flat"
    try:
        parsed: FlatEvent | ChatEvent = ChatEvent.model_validate(obj) if shape == "chat" else FlatEvent.model_validate(obj)
    except ValidationError as e:
        raise DecodeError("invalid_event", f"{shape} event: {_validation_summary(e)}") from None
    except (RecursionError, ValueError) as e:  # pathological nesting inside metadata, for instance
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
    if parsed.timestamp is not None:
        event_time = parsed.timestamp
    elif record_timestamp_ms is not None and record_timestamp_ms >= 0:
        event_time = datetime.fromtimestamp(record_timestamp_ms / 1000, tz=UTC)
    else:
        raise DecodeError("invalid_event", "no timestamp in the event and none on the Kafka record")
    if not MIN_EVENT_TIME <= event_time < MAX_EVENT_TIME:
        raise DecodeError("invalid_event", f"timestamp {event_time.isoformat()} is outside {MIN_EVENT_TIME.year}-{MAX_EVENT_TIME.year - 1}")
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
