"""The decoder's fast path (msgspec) against its reference path (json.loads and pydantic): the same event or the
same `DecodeError` (reason and detail) for any value, and the common events take the fast path."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import consumers.decode as decode_module
from consumers.decode import _fast, decode_event, decode_fields
from monitor.devtools.traffic import generate_events
from schemas.errors import DecodeError
from schemas.events import KafkaPosition
from tests.conftest import EXAMPLES
from tests.properties import examples

POS = KafkaPosition(topic="conv", partition=2, offset=41)
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TS_MS = int((NOW - timedelta(minutes=5)).timestamp() * 1000)


def outcome(value: bytes, *, reference: bool) -> object:
    """The event, or (reason, detail) of the `DecodeError`, by the reference path only or by both paths."""
    try:
        if reference:
            with patch.object(decode_module, "_fast", lambda _: None):
                return decode_event(value, position=POS, record_timestamp_ms=TS_MS, now=NOW)
        return decode_event(value, position=POS, record_timestamp_ms=TS_MS, now=NOW)
    except DecodeError as e:
        return (e.reason, e.detail)


def same(value: bytes) -> None:
    """Assert that both ways of decoding `value` agree, down to the types of the metadata values."""
    fast, ref = outcome(value, reference=False), outcome(value, reference=True)
    assert fast == ref, value
    if not isinstance(ref, tuple):
        assert type(fast) is type(ref)
        assert [type(v) for v in fast.metadata.values()] == [type(v) for v in ref.metadata.values()]  # type: ignore[attr-defined]


# ---- JSON text with control over what json.dumps would normalise: repeated keys, escapes, spacing ------------


@dataclass(frozen=True)
class Obj:
    """A JSON object as written: its pairs in order, repeated keys allowed."""

    pairs: tuple[tuple[str, Any], ...]


@st.composite
def text_of(draw: st.DrawFn, value: Any) -> str:
    """`value` as JSON text, each string escaped one of several valid ways, with random spacing."""
    ws = st.sampled_from(["", " ", "\n", "\t", "  "])
    if isinstance(value, Obj):
        items = [f"{draw(text_of(k))}{draw(ws)}:{draw(ws)}{draw(text_of(v))}" for k, v in value.pairs]
        return "{" + draw(ws) + ("," + draw(ws)).join(items) + draw(ws) + "}"
    if isinstance(value, list):
        return "[" + ",".join(draw(text_of(v)) for v in value) + "]"
    if isinstance(value, str):
        style = draw(st.sampled_from(["ascii", "utf8", "u0022"]))
        out = json.dumps(value, ensure_ascii=style == "ascii")
        return out[0] + out[1:-1].replace('\\"', "\\u0022") + out[-1] if style == "u0022" else out
    if isinstance(value, float) and value != value:
        return "NaN"
    return json.dumps(value)


texts = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        [
            "",
            " ",
            "ok",
            'say "hi"',
            "a\\b",
            "x:y",
            "\x00",
            "\ud800",
            "\udc00x",
            "\U0001f600",
            "é",
            "a" * 257,
            "a" * 256,
            "\n",
        ]
    ),
)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True), texts
)
timestamps = st.one_of(
    st.datetimes(
        min_value=datetime(1990, 1, 1), max_value=datetime(2300, 1, 1), timezones=st.sampled_from([None, UTC])
    ).map(lambda d: d.isoformat()),
    st.sampled_from(
        [
            "2026-12-01T11:00:00Z",
            "2026-12-01 11:00:00",
            "2026-12-01",
            "1764586800",
            "2026-12-01T11:00:00.1234567Z",
            "2026-13-01T00:00:00Z",
        ]
    ),
    st.integers(0, 2**41),
    texts,
)


def objects(keys: list[str], values: st.SearchStrategy[Any], max_size: int = 4) -> st.SearchStrategy[Obj]:
    """Objects of pairs from `keys` (repeats allowed) with `values`."""
    return st.lists(st.tuples(st.sampled_from(keys), values), max_size=max_size).map(lambda pairs: Obj(tuple(pairs)))


parts = objects(
    ["type", "text", "source"], st.one_of(st.sampled_from(["text", "image"]), texts, st.none(), st.integers()), 3
)
contents = st.one_of(texts, st.none(), st.integers(), st.lists(parts, max_size=3))
messages = objects(
    ["role", "content", "name"], st.one_of(st.sampled_from(["user", "assistant", "system"]), contents), 3
)
nested = st.recursive(
    scalars, lambda inner: st.one_of(st.lists(inner, max_size=3), objects(["a", "b"], inner, 2)), max_leaves=4
)
FIELD_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "event_id": st.one_of(texts, st.none(), st.integers()),
    "conversation_id": st.one_of(texts, st.none()),
    "timestamp": st.one_of(timestamps, st.none()),
    "app": st.one_of(texts, st.none(), st.sampled_from(["support-bot"])),
    "model": st.one_of(texts, st.none()),
    "prompt_version": st.one_of(texts, st.none()),
    "metadata": st.one_of(
        st.none(),
        objects(["channel", "seq", "", "k\x00", "x"], st.one_of(scalars, nested), 4),
        st.lists(scalars, max_size=2),
    ),
    "user_message": st.one_of(texts, st.none(), st.integers()),
    "response": st.one_of(texts, st.none()),
    "messages": st.one_of(st.lists(messages, max_size=4), st.none(), texts),
    "extra": nested,
}


@st.composite
def documents(draw: st.DrawFn) -> bytes:
    """A JSON object over the event's field names (some repeated), encoded as UTF-8 (lone surrogates passed through)."""
    keys = draw(st.lists(st.sampled_from(list(FIELD_VALUES)), max_size=8))
    if draw(st.booleans()):
        keys = [k for k in keys if k != "messages"] + ["user_message", "response"]
    doc = Obj(tuple((k, draw(FIELD_VALUES[k])) for k in keys))
    return draw(text_of(doc)).encode("utf-8", "surrogatepass")


ids = st.one_of(
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=8),
    st.sampled_from(["a", 'q"x', "x" * 256, "x" * 257, "\x00", ""]),
)
free = st.one_of(
    st.text(st.characters(codec="utf-8"), max_size=10), st.sampled_from(["q?", 'say "hi"', " ", "a\\b", "\U0001f600"])
)
plain_values: dict[str, st.SearchStrategy[Any]] = {
    "event_id": ids,
    "conversation_id": st.one_of(ids, st.none()),
    "timestamp": st.one_of(
        st.datetimes(
            min_value=datetime(2020, 1, 1), max_value=datetime(2026, 12, 1), timezones=st.sampled_from([None, UTC])
        ).map(lambda d: d.isoformat()),
        timestamps,
        st.none(),
    ),
    "app": st.one_of(ids, st.none()),
    "model": ids,
    "prompt_version": st.one_of(ids, st.none()),
    "metadata": st.one_of(
        st.none(),
        st.dictionaries(st.sampled_from(["channel", "seq", "x", "é"]), scalars, max_size=3).map(
            lambda d: Obj(tuple(d.items()))
        ),
    ),
}


@st.composite
def plausible_documents(draw: st.DrawFn) -> bytes:
    """Mostly valid events of either shape (every optional field or not, sometimes a key twice), as UTF-8 JSON."""
    pairs = [(k, draw(v)) for k, v in plain_values.items() if draw(st.booleans())]
    if draw(st.booleans()):
        pairs += [("user_message", draw(free)), ("response", draw(free))]
    else:
        part = st.builds(
            lambda t, x: Obj((("type", t), ("text", x))),
            st.sampled_from(["text", "text", "image"]),
            st.one_of(free, st.none()),
        )
        content = st.one_of(free, st.lists(part, max_size=3), st.none())
        turn = st.builds(
            lambda r, c: Obj((("role", r), ("content", c))), st.sampled_from(["user", "assistant", "system"]), content
        )
        ask, answer = (
            st.builds(lambda c, r=r: Obj((("role", r), ("content", c))), content) for r in ("user", "assistant")
        )
        turns = draw(
            st.one_of(
                st.lists(turn, min_size=1, max_size=4),
                st.tuples(st.lists(turn, max_size=2), ask, answer).map(lambda t: [*t[0], t[1], t[2]]),
            )
        )
        pairs.append(("messages", turns))
    if pairs and draw(st.integers(0, 5)) == 0:  # a key twice, with the same or another value
        key, _ = draw(st.sampled_from(pairs))
        pairs.insert(
            draw(st.integers(0, len(pairs))), (key, draw(st.one_of(st.just(dict(pairs)[key]), free, st.none())))
        )
    return draw(text_of(Obj(tuple(draw(st.permutations(pairs)))))).encode("utf-8", "surrogatepass")


@pytest.mark.long(seconds=25)
@settings(
    max_examples=examples(2000),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(plausible_documents())
def test_both_paths_agree_on_plausible_events(value: bytes) -> None:
    """Fast and reference paths give the same event or the same DecodeError for mostly valid events of both shapes."""
    same(value)


@pytest.mark.long(seconds=27)
@settings(
    max_examples=examples(2000),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(documents())
@example(b'{"user_message": "q", "response": "a", "user_message": "q"}')
@example(b'{"user_message": "q", "response": "a", "metadata": {"k": "1", "k": "2"}}')
@example(b'{"user_message": "q" , "response": "a", "user_message" : "q"}')
@example(b'{"user_message": "\\"q\\"", "response": "a\\u0022", "response": "a"}')
@example(b'{"user_message": "q", "response": "a", "app": "x\\u0000"}')
# A repeated key whose lost strings are made up by quotes written \u0022: the quote counts match, the escape check
# alone declines it.
@example(b'{"user_message": "q", "response": "a", "response": "\\u0022\\u0022\\u0022\\u0022"}')
@example(b'{"event_id": "", "user_message": "q", "response": "a"}')
@example(b'{"app": "", "user_message": "q", "response": "a"}')
@example(b'{"conversation_id": "", "user_message": "q", "response": "a"}')
@example(b'{"model": "' + b"m" * 257 + b'", "user_message": "q", "response": "a"}')
@example(
    b'{"prompt_version": "' + b"v" * 256 + b'", "app": "' + b"a" * 256 + b'", "user_message": "q", "response": "a"}'
)
@example(b'{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "role": "user"}]}')
def test_both_paths_agree_on_arbitrary_events(value: bytes) -> None:
    """Fast and reference paths give the same event or the same DecodeError for documents of our field names."""
    same(value)


@settings(max_examples=examples(500), deadline=None)
@given(st.binary(max_size=200))
@example(b'{"user_message": "q\xed\xa0\x80", "response": "a"}')
@example(b'{"user_message": "q\xc0\x80", "response": "a"}')
@example(b'{"user_message": "q\xf4\x90\x80\x80", "response": "a"}')
@example(b'{"user_message": "q\xff", "response": "a"}')
def test_both_paths_agree_on_arbitrary_bytes(value: bytes) -> None:
    """Fast and reference paths agree on arbitrary bytes (which all fail the same way)."""
    same(value)


def test_both_paths_agree_on_the_examples_and_generated_traffic() -> None:
    """The example files and the load generator's events (malformed ones included) decode the same both ways."""
    lines = [
        line
        for name in ("events-flat.jsonl", "events-chat.jsonl", "events-malformed.txt")
        for line in (EXAMPLES / name).read_bytes().splitlines()
    ]
    for value in [*lines, *generate_events(300, seed=3, malformed_share=0.1, pii_share=0.2)]:
        same(value)


def test_common_events_take_the_fast_path() -> None:
    """Both shapes as the load generator writes them, and escaped quotes in the text, are decoded by msgspec."""
    values = [
        *generate_events(200, seed=4, malformed_share=0.0, pii_share=0.2),
        b'{"user_message": "say \\"hi\\"", "response": "\\"hi\\""}',
    ]
    assert all(_fast(v) is not None for v in values)
    assert any(b'"messages"' in v for v in values) and any(b'"user_message"' in v for v in values)


@pytest.mark.parametrize(
    "value",
    [
        b'{"user_message": "q", "response": "a", "response": "b"}',
        b'{"user_message": "q", "response": "a", "metadata": {"k": "1", "k": "2"}}',
        b'{"user_message": "q", "response": "a", "unknown": 1}',
        b'{"user_message": "q", "response": "a", "timestamp": 1764586800}',
        b'{"user_message": "q", "response": "\\u0022"}',
        b'{"user_message": "q", "response": "a", "response": "\\u0022\\u0022\\u0022\\u0022"}',
        b'{"event_id": "", "user_message": "q", "response": "a"}',
        b'{"app": "", "user_message": "q", "response": "a"}',
        b'{"model": "' + b"m" * 257 + b'", "user_message": "q", "response": "a"}',
    ],
)
def test_the_fast_path_declines_what_it_cannot_vouch_for(value: bytes) -> None:
    """Repeated keys, unknown fields, numeric timestamps, quotes written as \\u0022 and ids or labels outside the
    model's lengths are left to the reference path."""
    assert _fast(value) is None


def test_decode_fields_is_decode_event_without_the_position() -> None:
    """`decode_fields(...).event(position)` is what `decode_event` returns, defaults from the position included."""
    value = b'{"user_message": "q?", "response": "a."}'
    fields = decode_fields(value, topic="conv", partition=2, offset=41, record_timestamp_ms=TS_MS, now=NOW)
    assert fields.event_id == "kafka:conv/2/41"
    assert fields.event(POS) == decode_event(value, position=POS, record_timestamp_ms=TS_MS, now=NOW)
