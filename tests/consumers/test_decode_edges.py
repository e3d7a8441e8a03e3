"""The decoder at the edges: NUL and lone surrogates, sizes at the limit, deep nesting, a clock far ahead and
duplicate keys. Each input is decoded into storable text or refused with a stable reason and a clear detail."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumers.decode import DEFAULT_MAX_EVENT_BYTES, MAX_JSON_DEPTH, REASONS, decode_event
from schemas.errors import DecodeError
from schemas.events import ConversationEvent, KafkaPosition
from tests.properties import examples

POS = KafkaPosition(topic="conv", partition=0, offset=7)
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
TS = "2026-11-29T09:00:00Z"


def decode(value: bytes, **kw: Any) -> ConversationEvent:
    """Decode `value` at a fixed position, with the monitor's clock at NOW."""
    return decode_event(value, position=POS, record_timestamp_ms=None, now=NOW, **kw)


def refused(value: bytes, **kw: Any) -> DecodeError:
    """The DecodeError that decoding `value` raises."""
    with pytest.raises(DecodeError) as info:
        decode(value, **kw)
    return info.value


def flat(**fields: Any) -> bytes:
    """A valid flat event with `fields` overriding or added (json.dumps writes non-ASCII as \\u escapes)."""
    return json.dumps(
        {"user_message": "When did order A17 ship?", "response": "Order A17 shipped.", "timestamp": TS, **fields}
    ).encode()


def chat(question: Any, answer: Any) -> bytes:
    """A valid chat event with one user and one assistant turn."""
    return json.dumps(
        {"timestamp": TS, "messages": [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]}
    ).encode()


def storable(e: ConversationEvent) -> bool:
    """Whether every string of the event encodes as UTF-8 (what the ClickHouse driver needs)."""
    texts = [
        e.event_id,
        e.conversation_id,
        e.app,
        e.model,
        e.prompt_version,
        e.question,
        e.response,
        *e.metadata,
        *e.metadata.values(),
    ]
    try:
        for t in texts:
            t.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# ---- NUL and lone surrogates ----------------------------------------------------------------------------


def test_nul_in_free_text_is_kept_byte_for_byte() -> None:
    """An escaped NUL in the question, the answer and a metadata value is valid UTF-8 and is kept as sent."""
    e = decode(
        flat(user_message="When\u0000 did it ship?", response="It\u0000 shipped.", metadata={"note": "a\u0000b"})
    )
    assert (e.question, e.response, e.metadata) == (
        "When\u0000 did it ship?",
        "It\u0000 shipped.",
        {"note": "a\u0000b"},
    )


@pytest.mark.parametrize(
    "value",
    [
        flat(user_message="Ship?\ud800", response="Shipped.\udfff", metadata={"note": "x\udc00"}),
        chat("Ship?\ud800", [{"type": "text", "text": "Shipped.\udfff"}]),
        chat([{"type": "text", "text": "Ship?\ud800"}], "Shipped.\udfff"),
    ],
    ids=["flat", "chat-parts-answer", "chat-parts-question"],
)
def test_lone_surrogates_in_free_text_become_replacement_characters(value: bytes) -> None:
    """A lone surrogate in judged text or a metadata value becomes a visible U+FFFD, so the row can be stored."""
    e = decode(value)
    assert e.question == "Ship?\ufffd" and e.response == "Shipped.\ufffd"
    assert set(e.metadata.values()) <= {"x\ufffd"}
    assert storable(e)


def test_a_valid_surrogate_pair_is_one_character_everywhere() -> None:
    """An escaped surrogate pair (an emoji) is joined into one character, accepted in ids and kept in text."""
    e = decode(
        b'{"event_id": "e-\\ud83d\\ude00", "user_message": "Ship?", "response": "Yes \\ud83d\\ude00", "timestamp": "'
        + TS.encode()
        + b'"}'
    )
    assert e.event_id == "e-\U0001f600" and e.response == "Yes \U0001f600"


@pytest.mark.parametrize("field", ["event_id", "conversation_id", "app", "model", "prompt_version"])
@pytest.mark.parametrize(
    ("char", "named"),
    [("\u0000", "U+0000 (NUL)"), ("\ud800", "U+D800 (a lone surrogate)"), ("\udfff", "U+DFFF (a lone surrogate)")],
)
def test_nul_or_lone_surrogate_in_an_id_or_label_is_dead_lettered(field: str, char: str, named: str) -> None:
    """An id or label with a NUL or a lone surrogate is invalid_event naming the field and the character: replacing
    it could merge two ids into one row."""
    err = refused(flat(**{field: f"x{char}y"}))
    assert err.reason == "invalid_event"
    assert f"{field}: " in err.detail and f"{named} at index 1" in err.detail


@pytest.mark.parametrize("key", ["k\u0000", "k\udfff"])
def test_nul_or_lone_surrogate_in_a_metadata_key_is_dead_lettered(key: str) -> None:
    """A metadata key is a label: with a NUL or a lone surrogate the event is invalid_event, the key shown escaped."""
    err = refused(flat(metadata={key: "v"}))
    assert err.reason == "invalid_event"
    assert "metadata" in err.detail and json.dumps(key) in err.detail
    assert err.detail.isascii()  # safe for the dead-letter header and the log line


def test_a_raw_nul_byte_in_a_string_is_invalid_json_with_a_readable_detail() -> None:
    """An unescaped NUL byte inside a JSON string is invalid_json, and the detail does not stutter ("at at")."""
    err = refused(b'{"user_message": "q\x00", "response": "a"}')
    assert err.reason == "invalid_json"
    assert err.detail == "Invalid control character at line 1 column 20"


_ANY_CHAR = st.characters(exclude_categories=())  # includes lone surrogates and NUL


@settings(max_examples=examples(300), deadline=None)
@given(
    st.sampled_from(["event_id", "conversation_id", "app", "model", "prompt_version", "user_message", "response"]),
    st.text(_ANY_CHAR, max_size=12),
)
def test_any_text_in_any_field_is_storable_or_refused(field: str, text: str) -> None:
    """Any text, surrogates and NULs included, in any string field decodes to storable strings or is refused."""
    try:
        e = decode(flat(**{field: text}))
    except DecodeError as err:
        assert err.reason in REASONS
    else:
        assert storable(e)


# ---- sizes -------------------------------------------------------------------------------------------------


def padded_to(n_bytes: int) -> bytes:
    """A flat event whose answer is padded so that the value is exactly `n_bytes` long."""
    head = flat(response="")
    return flat(response="x" * (n_bytes - len(head)))


def test_a_value_at_the_default_limit_decodes_and_one_byte_more_is_oversized() -> None:
    """A 1,000,000-byte value (the default limit) decodes whole; 1,000,001 bytes is oversized, naming both sizes."""
    assert len(decode(padded_to(DEFAULT_MAX_EVENT_BYTES)).response) == DEFAULT_MAX_EVENT_BYTES - len(flat(response=""))
    err = refused(padded_to(DEFAULT_MAX_EVENT_BYTES + 1))
    assert (
        err.reason == "oversized"
        and err.detail == f"value is {DEFAULT_MAX_EVENT_BYTES + 1} bytes, limit {DEFAULT_MAX_EVENT_BYTES}"
    )


def test_an_answer_of_100k_one_word_sentences_decodes() -> None:
    """An answer of 100,000 one-word sentences (700 kB) is under the limit and decodes whole."""
    answer = " ".join(f"word{i % 10}." for i in range(100_000))
    assert decode(flat(response=answer)).response == answer


# ---- nesting -----------------------------------------------------------------------------------------------


def objects(depth: int) -> str:
    """JSON text of `depth` nested objects."""
    return '{"a": ' * depth + "1" + "}" * depth


def in_metadata(depth: int) -> bytes:
    """A flat event whose whole JSON nests `depth` levels, through a metadata value."""
    return flat(metadata={"k": "PLACEHOLDER"}).replace(b'"PLACEHOLDER"', objects(depth - 2).encode())


def in_chat_part(depth: int) -> bytes:
    """A chat event whose whole JSON nests `depth` levels, through an extra field of a content part."""
    value = chat("Ship?", [{"type": "text", "text": "Shipped.", "extra": "PLACEHOLDER"}])
    return value.replace(b'"PLACEHOLDER"', objects(depth - 5).encode())


@pytest.mark.parametrize("build", [in_metadata, in_chat_part], ids=["metadata", "chat-part"])
@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 990, 10_000])
def test_nesting_deeper_than_the_bound_is_invalid_json(build: Callable[[int], bytes], depth: int) -> None:
    """Nesting past MAX_JSON_DEPTH, whether 101, just under Python's recursion limit or 10,000 deep, is
    invalid_json with one detail (never a RecursionError or an invalid_event that depends on the stack)."""
    err = refused(build(depth))
    assert err.reason == "invalid_json" and err.detail == f"nested deeper than {MAX_JSON_DEPTH} levels"


def test_nesting_at_the_bound_decodes() -> None:
    """Events exactly MAX_JSON_DEPTH levels deep decode; a nested metadata value is kept as JSON text."""
    assert decode(in_metadata(MAX_JSON_DEPTH)).metadata["k"].startswith('{"a":{"a":')
    assert decode(in_chat_part(MAX_JSON_DEPTH)).response == "Shipped."


def test_the_outcome_does_not_depend_on_the_callers_stack_depth() -> None:
    """Deep nesting is judged the same from a shallow stack and from one 500 frames deep."""

    def at_depth(frames: int, value: bytes) -> str:
        if frames > 0:
            return at_depth(frames - 1, value)
        try:
            decode(value)
            return "ok"
        except DecodeError as e:
            return e.reason

    assert sys.getrecursionlimit() >= 1000
    for value, expected in [(in_metadata(MAX_JSON_DEPTH), "ok"), (in_metadata(600), "invalid_json")]:
        assert at_depth(0, value) == at_depth(500, value) == expected


# ---- a clock far ahead -------------------------------------------------------------------------------------


def test_an_event_time_far_ahead_of_the_monitors_clock_is_dead_lettered() -> None:
    """An event timestamp 5 h ahead of the monitor's clock is invalid_event, the detail saying how far and the limit."""
    err = refused(flat(timestamp=(NOW + timedelta(hours=5)).isoformat()))
    assert err.reason == "invalid_event"
    assert "18000 s ahead of the monitor's clock (limit 3600 s)" in err.detail and err.detail.startswith("timestamp ")


def test_a_record_timestamp_far_ahead_is_dead_lettered_too() -> None:
    """Without an event timestamp, a Kafka record timestamp 2 h ahead is refused the same way, and named."""
    value = json.dumps({"user_message": "q", "response": "a"}).encode()
    ahead_ms = int((NOW + timedelta(hours=2)).timestamp() * 1000)
    with pytest.raises(DecodeError) as info:
        decode_event(value, position=POS, record_timestamp_ms=ahead_ms, now=NOW)
    assert info.value.reason == "invalid_event" and info.value.detail.startswith("record timestamp ")


def test_small_skew_and_old_events_are_accepted_and_the_bound_is_a_parameter() -> None:
    """59 min ahead and a year behind (a replay) are accepted; the bound can be tightened or disabled."""
    assert decode(flat(timestamp=(NOW + timedelta(minutes=59)).isoformat())).event_time == NOW + timedelta(minutes=59)
    assert decode(flat(timestamp=(NOW - timedelta(days=365)).isoformat())).event_time == NOW - timedelta(days=365)
    five_hours = flat(timestamp=(NOW + timedelta(hours=5)).isoformat())
    assert decode(five_hours, max_future_skew_s=None).event_time == NOW + timedelta(hours=5)
    assert (
        refused(flat(timestamp=(NOW + timedelta(minutes=2)).isoformat()), max_future_skew_s=60).reason
        == "invalid_event"
    )


def test_the_default_reference_is_the_wall_clock() -> None:
    """Without `now`, the bound is measured from the wall clock: 5 h from now is refused, 5 min from now is not."""
    later = datetime.now(UTC) + timedelta(hours=5)
    with pytest.raises(DecodeError):
        decode_event(flat(timestamp=later.isoformat()), position=POS, record_timestamp_ms=None)
    soon = datetime.now(UTC) + timedelta(minutes=5)
    assert decode_event(flat(timestamp=soon.isoformat()), position=POS, record_timestamp_ms=None).event_time == soon


# ---- duplicate keys ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "key"),
    [
        (b'{"user_message": "q", "response": "a", "response": "b"}', "response"),
        (b'{"user_message": "q", "response": "a", "metadata": {"x": "1", "x": "2"}}', "x"),
        (
            b'{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "role": "user", "content": "a"}]}',
            "role",
        ),
    ],
    ids=["top-level", "metadata", "chat-message"],
)
def test_a_duplicate_key_anywhere_is_invalid_json_naming_it(value: bytes, key: str) -> None:
    """A key repeated in one object is ambiguous (json keeps the last, other parsers the first): invalid_json naming
    the key."""
    err = refused(value)
    assert err.reason == "invalid_json" and err.detail == f'duplicate key "{key}" in an object'


def test_the_same_key_in_different_objects_is_fine() -> None:
    """The same key in sibling or nested objects is not a duplicate."""
    e = decode(
        b'{"timestamp": "'
        + TS.encode()
        + b'", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}'
    )
    assert (e.question, e.response) == ("q", "a")
