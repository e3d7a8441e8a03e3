"""The decoder: both shapes, defaults, and every malformed input dead-lettered with a reason, never a crash."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumers.decode import REASONS, decode_event
from schemas.errors import DecodeError
from schemas.events import KafkaPosition
from tests.conftest import EXAMPLES
from tests.properties import examples

POS = KafkaPosition(topic="conv", partition=2, offset=41)
TS_MS = 1_795_000_000_000


def decode(value: bytes | None, **kw: object) -> object:
    """Decode `value` at a fixed Kafka position and record timestamp."""
    return decode_event(value, position=POS, record_timestamp_ms=TS_MS, **kw)  # type: ignore[arg-type]


def test_flat_examples_decode_with_all_fields() -> None:
    """The flat examples decode with every field, and empty metadata stays an empty dict."""
    lines = (EXAMPLES / "events-flat.jsonl").read_bytes().splitlines()
    events = [decode(line) for line in lines]
    first = events[0]
    assert first.shape == "flat"
    assert first.event_id == "9f1c2a70-0001-4c1e-9a53-000000000001"
    assert first.conversation_id == "conv-1001"
    assert first.event_time == datetime(2026, 11, 29, 9, 0, 1, tzinfo=UTC)
    assert (first.app, first.model, first.prompt_version) == ("support-bot", "assistant-large", "v12")
    assert first.question == "When did order A17 ship?"
    assert first.response == "Order A17 shipped on 3 March."
    assert first.metadata == {"locale": "en-GB", "channel": "web"}
    assert first.source == POS
    assert events[3].metadata == {}


def test_chat_examples_take_final_assistant_and_last_user_before_it() -> None:
    """Chat events pair the final assistant turn with the last user turn before it, as strings or parts."""
    lines = (EXAMPLES / "events-chat.jsonl").read_bytes().splitlines()
    multi_turn, parts = (decode(line) for line in lines)
    assert multi_turn.shape == "chat"
    assert multi_turn.question == "Order B42. What is the return window?"
    assert multi_turn.response.startswith("Order B42 can be returned until 30 December")
    assert parts.question == "What does HTTP status 429 mean?"
    assert parts.response.startswith("429 Too Many Requests")


def test_chat_pair_skips_trailing_user_turn_and_non_text_parts() -> None:
    """A trailing user turn and non-text parts are skipped, and the timestamp is normalised to UTC."""
    event = {
        "conversation_id": "c",
        "timestamp": "2026-11-29T10:00:00+01:00",
        "messages": [
            {"role": "user", "content": [{"type": "image", "source": {}}, {"type": "text", "text": "What is 2+2?"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "x"}, {"type": "text", "text": "4"}]},
            {"role": "user", "content": "thanks"},
        ],
    }
    e = decode(json.dumps(event).encode())
    assert (e.question, e.response) == ("What is 2+2?", "4")
    assert e.event_time == datetime(2026, 11, 29, 9, 0, tzinfo=UTC)  # normalised to UTC


def test_defaults_event_id_timestamp_app_are_deterministic() -> None:
    """Missing ids, timestamp and app default to the Kafka position, record time and 'default', every time."""
    raw = json.dumps({"user_message": "q?", "response": "a."}).encode()
    a, b = decode(raw), decode(raw)
    assert a.event_id == b.event_id == "kafka:conv/2/41"
    assert a.conversation_id == a.event_id
    assert a.event_time == datetime.fromtimestamp(TS_MS / 1000, tz=UTC)
    assert a.app == "default" and a.model == "" and a.prompt_version == ""


def test_naive_timestamp_is_utc_and_metadata_scalars_become_strings() -> None:
    """A naive timestamp is read as UTC, a null app defaults, and metadata values become strings, nulls dropped."""
    raw = json.dumps(
        {
            "user_message": "q",
            "response": "a",
            "timestamp": "2026-11-29T09:00:00",
            "app": None,
            "metadata": {"n": 3, "flag": True, "skip": None, "nested": {"a": 1}},
        }
    ).encode()
    e = decode(raw)
    assert e.event_time == datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
    assert e.app == "default"
    assert e.metadata == {"n": "3", "flag": "true", "nested": '{"a":1}'}


@pytest.mark.parametrize(
    ("line_no", "reason", "detail_part"),
    [
        (0, "invalid_json", "line 1"),
        (1, "invalid_event", "user_message"),
        (2, "invalid_event", "user_message"),
        (3, "no_judgeable_pair", "assistant"),
        (4, "not_object", "list"),
    ],
)
def test_malformed_examples_have_reasons(line_no: int, reason: str, detail_part: str) -> None:
    """Each malformed example line raises a DecodeError with its own reason and a detail naming the fault."""
    line = (EXAMPLES / "events-malformed.txt").read_bytes().splitlines()[line_no]
    with pytest.raises(DecodeError) as info:
        decode(line)
    assert info.value.reason == reason
    assert detail_part in info.value.detail


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "empty_value"),
        (b"", "empty_value"),
        (b"\xff\xfe{}", "not_utf8"),
        (b'"just a string"', "not_object"),
        (b'{"user_message": "   ", "response": "x"}', "no_judgeable_pair"),
        (b'{"messages": []}', "invalid_event"),
        (b'{"messages": [{"role": "assistant", "content": "hi"}]}', "no_judgeable_pair"),
        (b'{"user_message": "q", "response": "a", "timestamp": "yesterday"}', "invalid_event"),
        (b'{"user_message": "q", "response": "a", "event_id": ""}', "invalid_event"),
        (b"[" * 100_000, "invalid_json"),
    ],
)
def test_edge_inputs(value: bytes | None, reason: str) -> None:
    """Empty, non-UTF-8, non-object, blank, bad-field and deeply nested values each raise their own reason."""
    with pytest.raises(DecodeError) as info:
        decode(value)
    assert info.value.reason == reason


def test_oversized_is_rejected_before_parsing() -> None:
    """A value over max_bytes is rejected as oversized, and the same value decodes under a larger limit."""
    big = json.dumps({"user_message": "q", "response": "x" * 5000}).encode()
    with pytest.raises(DecodeError) as info:
        decode(big, max_bytes=1024)
    assert info.value.reason == "oversized"
    assert decode(big, max_bytes=10_000).response == "x" * 5000


def test_missing_timestamp_everywhere_is_an_error_not_a_guess() -> None:
    """Without an event timestamp or a record timestamp, decoding fails as invalid_event instead of guessing."""
    with pytest.raises(DecodeError) as info:
        decode_event(b'{"user_message": "q", "response": "a"}', position=POS, record_timestamp_ms=None)
    assert info.value.reason == "invalid_event"


@settings(max_examples=examples(400), deadline=None)
@given(st.binary(max_size=512))
def test_arbitrary_bytes_never_crash(value: bytes) -> None:
    """Arbitrary bytes either decode or raise a DecodeError with a known reason, never another exception."""
    try:
        decode(value)
    except DecodeError as e:
        assert e.reason in REASONS


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)
_fields = st.sampled_from(
    [
        "event_id",
        "conversation_id",
        "timestamp",
        "app",
        "model",
        "prompt_version",
        "metadata",
        "user_message",
        "response",
        "messages",
        "role",
        "content",
        "type",
        "text",
    ]
)


@settings(max_examples=examples(400), deadline=None)
@given(st.dictionaries(_fields, _json | st.lists(st.dictionaries(_fields, _json, max_size=4), max_size=4), max_size=8))
def test_arbitrary_json_objects_with_our_field_names_never_crash(obj: dict[str, object]) -> None:
    """Arbitrary objects with our field names decode to a judgeable, tz-aware event or a known DecodeError."""
    try:
        e = decode(json.dumps(obj).encode())
    except DecodeError as err:
        assert err.reason in REASONS
    else:
        assert e.question.strip()
        assert e.event_time.tzinfo is not None


def test_dead_letter_value_fits_the_producer() -> None:
    """A keyless tombstone becomes an empty value, and an oversized value is cut with its size in a header."""
    from consumers.deadletter import H_ORIGINAL_BYTES, fit_value

    assert fit_value(None, None, 100) == (b"", [])  # Kafka refuses a record with neither key nor value
    assert fit_value(None, b"k", 100) == (None, [])
    assert fit_value(b"x" * 50, None, 100) == (b"x" * 50, [])
    assert fit_value(b"x" * 150, None, 100) == (b"x" * 100, [(H_ORIGINAL_BYTES, b"150")])


@pytest.mark.parametrize("ts", ["9999-12-31T00:00:00Z", "0001-01-01T00:00:00Z", "1969-07-20T20:17:00Z"])
def test_timestamps_outside_the_storable_range_are_dead_lettered(ts: str) -> None:
    """Timestamps outside the storable range (year 9999, year 1, before 1970) are invalid_event."""
    with pytest.raises(DecodeError) as info:
        decode(json.dumps({"user_message": "q", "response": "a", "timestamp": ts}).encode())
    assert info.value.reason == "invalid_event" and "outside" in info.value.detail
