"""Our JSON feedback object (docs/input.md, Feedback): every field read into a `FeedbackEvent`, each malformed value
refused as `invalid_feedback` with one line naming the field, and feedback told apart from conversation events on a
topic that carries both."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumers.decode import REASONS, decode_event
from consumers.feedback import MAX_COMMENT_CHARS, FeedbackOptions, decode_feedback, is_feedback_json
from monitor.devtools.traffic import generate_events
from schemas.errors import DecodeError
from schemas.events import KafkaPosition
from schemas.feedback import AnswerRef, FeedbackEvent, Segment
from tests.properties import examples

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
RECORD_MS = int((NOW - timedelta(minutes=1)).timestamp() * 1000)
OPTIONS = FeedbackOptions(frozenset({"thumbs"}), frozenset({"rating"}))
TS = "2026-11-29T11:58:00Z"


def value(**fields: Any) -> bytes:
    """A feedback object: `type` and an answer id unless overridden (a None value leaves the field out)."""
    document = {"type": "feedback", "event_id": "evt-1", **fields}
    return json.dumps({k: v for k, v in document.items() if v is not None}).encode()


def decode(raw: bytes, options: FeedbackOptions = OPTIONS, **kw: Any) -> FeedbackEvent:
    """Decode at topic `fb`, partition 3, offset 41, with the record's time a minute before NOW."""
    kw.setdefault("record_timestamp_ms", RECORD_MS)
    return decode_feedback(raw, topic="fb", partition=3, offset=41, options=options, now=NOW, **kw)


def refused(raw: bytes, **kw: Any) -> DecodeError:
    """The DecodeError decoding `raw` raises."""
    with pytest.raises(DecodeError) as info:
        decode(raw, **kw)
    return info.value


def test_every_field_is_read() -> None:
    """Ids, verdict, comment, reason, both timestamps, the segment and the answer's record land in their fields."""
    event = decode(
        value(
            feedback_id="fb-9",
            conversation_id="conv-2",
            turn=3,
            rating=2,
            scale=5,
            comment="Wrong order number.",
            reason="wrong_answer",
            timestamp=TS,
            answer_timestamp="2026-11-29T11:57:30+01:00",
            app="support-bot",
            model="assistant-large",
            prompt_version="v12",
            answer={"topic": "conversations", "partition": 4, "offset": 1200},
        )
    )
    assert event == FeedbackEvent(
        feedback_id="fb-9",
        answer=AnswerRef(
            event_id="evt-1", conversation_id="conv-2", turn=3, topic="conversations", partition=4, offset=1200
        ),
        feedback_time=datetime(2026, 11, 29, 11, 58, tzinfo=UTC),
        kind="rating",
        value=2.0,
        scale=5,
        negative=True,
        source="json",
        comment="Wrong order number.",
        reason="wrong_answer",
        segment=Segment("support-bot", "assistant-large", "v12"),
        answer_time=datetime(2026, 11, 29, 10, 57, 30, tzinfo=UTC),
    )


def test_the_defaults_need_only_an_answer_and_a_verdict() -> None:
    """Without them: the id names the record, the time is the record's, no segment, no comment, no answer position."""
    event = decode(value(thumbs="up"))
    assert event.feedback_id == "kafka:fb/3/41"
    assert event.feedback_time == datetime.fromtimestamp(RECORD_MS / 1000, UTC)
    assert (event.kind, event.value, event.scale, event.negative) == ("thumbs", 1.0, 1, False)
    assert (event.segment, event.comment, event.reason, event.answer_time) == (None, "", "", None)
    assert event.answer == AnswerRef(event_id="evt-1")
    assert decode(value(thumbs="up", comment=None, app=None, timestamp=None)) == event  # a null is an absent field


@pytest.mark.parametrize(
    ("thumbs", "up"), [("up", True), ("down", False), (1, True), (0, False), (True, True), (False, False)]
)
def test_thumbs_in_each_spelling(thumbs: Any, up: bool) -> None:
    """ "up"/"down", 1/0 and true/false are thumbs up/down; down is negative."""
    event = decode(value(thumbs=thumbs))
    assert (event.kind, event.value, event.negative) == ("thumbs", 1.0 if up else 0.0, not up)
    assert event.rating_bucket == 0 and event.rating_unit is None


@pytest.mark.parametrize(
    ("rating", "scale", "at_most", "negative", "bucket"),
    [
        (1, None, 0.25, True, 1),
        (2, None, 0.25, True, 2),  # 2 of 5 is 0.25 of the way: at the threshold counts
        (3, None, 0.25, False, 3),
        (5, None, 0.25, False, 5),
        (3, 10, 0.25, True, 2),  # (3-1)/9 = 0.22
        (4, 10, 0.25, False, 2),  # 0.33
        (2, 2, 0.25, False, 5),
        (1, 2, 0.0, True, 1),
        (4.5, 5, 0.25, False, 5),
        (3, None, 0.5, True, 3),
    ],
)
def test_a_rating_maps_to_its_scale_and_the_negative_threshold(
    rating: float, scale: int | None, at_most: float, negative: bool, bucket: int
) -> None:
    """A rating is negative at or below `negative_rating_at_most` of its scale mapped to 0..1; the scale defaults to
    5; the 1-5 bucket is the nearest."""
    options = FeedbackOptions(frozenset(), frozenset(), negative_rating_at_most=at_most)
    event = decode(value(rating=rating, scale=scale), options)
    top = scale or 5
    assert (event.kind, event.value, event.scale, event.negative) == ("rating", rating, top, negative)
    assert event.rating_unit == (rating - 1) / (top - 1) and event.rating_bucket == bucket


@pytest.mark.parametrize(
    ("fields", "answer"),
    [
        ({"event_id": "evt-7"}, AnswerRef(event_id="evt-7")),
        ({"event_id": None, "response_id": "chatcmpl-123"}, AnswerRef(event_id="chatcmpl-123")),
        ({"event_id": None, "conversation_id": "conv-1", "turn": 0}, AnswerRef(conversation_id="conv-1", turn=0)),
        ({"conversation_id": "conv-1"}, AnswerRef(event_id="evt-1", conversation_id="conv-1")),
        (
            {"answer": {"topic": "conv", "partition": 0}},
            AnswerRef(event_id="evt-1", topic="conv", partition=0),
        ),
    ],
)
def test_the_answer_is_named_by_event_id_response_id_or_conversation_and_turn(
    fields: dict[str, Any], answer: AnswerRef
) -> None:
    """`response_id` is another name for `event_id`; a conversation and turn name it too; the answer's record
    position is carried when given (its offset is optional)."""
    assert decode(value(thumbs="down", **fields)).answer == answer


def test_a_time_far_ahead_of_the_monitors_clock_is_refused() -> None:
    """The event time checks apply: a feedback timestamp (or a record timestamp) more than the skew ahead of the
    monitor's clock, or outside 2000-2199, is refused naming the field; the skew can be widened or disabled."""
    ahead = (NOW + timedelta(hours=2)).isoformat()
    err = refused(value(thumbs="up", timestamp=ahead))
    assert err.reason == "invalid_feedback" and err.detail.startswith("timestamp: timestamp 2026-11-29T14:00:00+00:00")
    assert "ahead of the monitor's clock" in err.detail
    record_ahead = int((NOW + timedelta(hours=2)).timestamp() * 1000)
    assert refused(value(thumbs="up"), record_timestamp_ms=record_ahead).detail.startswith(
        "timestamp: record timestamp"
    )
    assert decode(value(thumbs="up", timestamp=ahead), max_future_skew_s=None).feedback_time == NOW + timedelta(hours=2)
    assert refused(value(thumbs="up", answer_timestamp=ahead)).detail.startswith("answer_timestamp: ")
    assert refused(value(thumbs="up", timestamp="1999-12-31T23:00:00Z")).detail.endswith("is outside 2000-2199")
    assert refused(value(thumbs="up"), record_timestamp_ms=None).detail == (
        "timestamp: no timestamp in the event and none on the Kafka record"
    )


def test_a_long_comment_is_cut_and_a_lone_surrogate_replaced() -> None:
    """A comment is free text: kept up to its cap, a lone surrogate becomes U+FFFD (storable)."""
    event = decode(value(thumbs="down", comment="x" * (MAX_COMMENT_CHARS + 10)))
    assert event.comment == "x" * MAX_COMMENT_CHARS
    raw = b'{"type": "feedback", "event_id": "e", "thumbs": "down", "comment": "bad \\ud800 answer"}'
    assert decode(raw).comment == "bad \ufffd answer"


IN_C0 = {"topic": "c", "partition": 0}
UNNAMED = "event_id: required (or response_id, or conversation_id with turn) to name the answer"
BOTH_IDS = "event_id and response_id: response_id is another name for event_id, give one"
NUL_AT_1 = "contains U+0000 (NUL) at index 1; ids and labels must be valid Unicode without NUL"
SURROGATE_AT_1 = "contains U+D800 (a lone surrogate) at index 1; ids and labels must be valid Unicode without NUL"


@pytest.mark.parametrize(
    ("fields", "detail"),
    [
        ({"type": "event"}, 'type: expected "feedback", got "event"'),
        ({"type": 3}, 'type: expected "feedback", got 3'),
        ({"thumbs": "up", "rating": 4}, "thumbs and rating: give one of them, not both"),
        ({}, "thumbs or rating: one of them is required"),
        ({"thumbs": "yes"}, 'thumbs: expected "up", "down", 1, 0, true or false, got a string'),
        ({"thumbs": 2}, 'thumbs: expected "up", "down", 1, 0, true or false, got 2'),
        ({"thumbs": 1.0}, 'thumbs: expected "up", "down", 1, 0, true or false, got 1.0'),
        ({"thumbs": "up", "scale": 5}, "scale: only a rating has a scale"),
        ({"rating": 6}, "rating: must be 1..5 (the scale), got 6"),
        ({"rating": 0}, "rating: must be 1..5 (the scale), got 0"),
        ({"rating": 11, "scale": 10}, "rating: must be 1..10 (the scale), got 11"),
        ({"rating": "4"}, "rating: expected a number, got a string"),
        ({"rating": True}, "rating: expected a number, got true"),
        ({"rating": 3, "scale": 1}, "scale: must be 2..100, got 1"),
        ({"rating": 3, "scale": 101}, "scale: must be 2..100, got 101"),
        ({"rating": 3, "scale": 5.0}, "scale: expected an integer, got 5.0"),
        ({"thumbs": "up", "event_id": None}, UNNAMED),
        ({"thumbs": "up", "event_id": None, "conversation_id": "c"}, UNNAMED),
        ({"thumbs": "up", "turn": 2}, "turn: needs conversation_id"),
        ({"thumbs": "up", "conversation_id": "c", "turn": -1}, "turn: must be 0 or more, got -1"),
        ({"thumbs": "up", "conversation_id": "c", "turn": "2"}, "turn: expected an integer, got a string"),
        ({"thumbs": "up", "response_id": "r"}, BOTH_IDS),
        ({"thumbs": "up", "event_id": ""}, "event_id: must not be empty"),
        ({"thumbs": "up", "event_id": 17}, "event_id: expected a string, got 17"),
        ({"thumbs": "up", "event_id": "e" * 257}, "event_id: 257 characters, at most 256"),
        ({"thumbs": "up", "event_id": "a\x00b"}, f"event_id: {NUL_AT_1}"),
        ({"thumbs": "up", "feedback_id": "a\ud800"}, f"feedback_id: {SURROGATE_AT_1}"),
        ({"thumbs": "up", "conversation_id": ["c"], "turn": 1}, "conversation_id: expected a string, got an array"),
        ({"thumbs": "up", "comment": {"text": "x"}}, "comment: expected a string, got an object"),
        ({"thumbs": "up", "reason": "r" * 65}, "reason: 65 characters, at most 64"),
        ({"thumbs": "up", "timestamp": "yesterday"}, "timestamp: not an RFC 3339 date and time"),
        ({"thumbs": "up", "timestamp": 1764412800}, "timestamp: expected a string, got 1764412800"),
        ({"thumbs": "up", "answer_timestamp": "2026-13-01"}, "answer_timestamp: not an RFC 3339 date and time"),
        ({"thumbs": "up", "app": ""}, "app: must not be empty"),
        ({"thumbs": "up", "model": "m\x00"}, f"model: {NUL_AT_1}"),
        ({"thumbs": "up", "prompt_version": 12}, "prompt_version: expected a string, got 12"),
        ({"thumbs": "up", "answer": "conv/0/12"}, "answer: expected an object with topic and partition, got a string"),
        ({"thumbs": "up", "answer": {"topic": "conv"}}, "answer: topic and partition are required"),
        ({"thumbs": "up", "answer": {"topic": "conv", "partition": -1}}, "answer.partition: must be 0 or more, got -1"),
        ({"thumbs": "up", "answer": {**IN_C0, "offset": 1.5}}, "answer.offset: expected an integer, got 1.5"),
        ({"thumbs": "up", "answer": {"topic": "t" * 250, "partition": 0}}, "answer.topic: 250 characters, at most 249"),
    ],
)  # fmt: skip
def test_each_malformed_field_is_refused_with_a_line_naming_it(fields: dict[str, Any], detail: str) -> None:
    """Every malformed value is `invalid_feedback` with a one-line detail that names the field (and never quotes a
    user's text)."""
    err = refused(value(**fields))
    assert (err.reason, err.detail) == ("invalid_feedback", detail)
    assert "\n" not in err.detail and err.reason in REASONS


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (None, "empty_value"),
        (b"", "empty_value"),
        (b"\xff{}", "not_utf8"),
        (b'{"type": "feedback",', "invalid_json"),
        (b'{"type": "feedback", "thumbs": "up", "thumbs": "down", "event_id": "e"}', "invalid_json"),
        (b'["feedback"]', "not_object"),
    ],
)
def test_a_value_that_is_no_json_object_gets_the_event_decoder_s_reason(raw: bytes | None, reason: str) -> None:
    """Empty, invalid UTF-8, invalid JSON (a repeated key included) and non-objects are refused as events are."""
    assert refused(raw).reason == reason  # type: ignore[arg-type]


def test_an_oversized_value_is_refused() -> None:
    """A value over `max_bytes` is `oversized`, before it is parsed."""
    assert refused(value(thumbs="up", comment="x" * 200), max_bytes=100).reason == "oversized"


def test_segment_fields_count_only_with_an_app() -> None:
    """`model` and `prompt_version` without `app` name no segment (they are still checked); with `app` they do."""
    assert decode(value(thumbs="up", model="m", prompt_version="v1")).segment is None
    assert decode(value(thumbs="up", app="bot")).segment == Segment("bot", "", "")


# ---- feedback or conversation event ---------------------------------------------------------------------------


def test_feedback_objects_are_recognised_and_events_are_not() -> None:
    """Our feedback objects (any spacing) are feedback; events, other JSON and non-JSON are not, including an event
    that carries a `type: feedback` field of its own or a part typed `feedback`."""
    assert is_feedback_json(value(thumbs="up"))
    assert is_feedback_json(b'{ "thumbs" : "up" ,"type"  :  "feedback" }')
    assert is_feedback_json(b'{"type": "feedback"}')  # malformed feedback is still feedback: refused as such
    flat = {"user_message": "q", "response": "a"}
    for not_feedback in [
        None,
        b"",
        b"garbage",
        b'["type", "feedback"]',
        b'{"type": "event", "note": "feedback"}',
        b'{"metadata": {"type": "feedback"}, "user_message": "q", "response": "a"}',
        json.dumps({"type": "feedback", **flat}).encode(),
        json.dumps({"type": "feedback", "messages": []}).encode(),
        json.dumps({"type": "feedback", "response": "a"}).encode(),
        json.dumps({"messages": [{"role": "user", "content": [{"type": "feedback", "text": "feedback"}]}]}).encode(),
        b'{"type": "feedback", "x": 1',
    ]:
        assert not is_feedback_json(not_feedback), not_feedback


POS = KafkaPosition(topic="conv", partition=0, offset=1)
_texts = st.one_of(
    st.text(max_size=20),
    st.sampled_from(['"type": "feedback"', "feedback", '{"type":"feedback"}', "type", "thumbs down"]),
)
_labels = st.one_of(st.none(), st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=8))
_parts = st.lists(
    st.fixed_dictionaries({"type": st.sampled_from(["text", "feedback", "image"]), "text": _texts}), max_size=3
)
_messages = st.tuples(
    st.lists(
        st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system"]), "content": _texts}), max_size=3
    ),
    st.one_of(_texts.filter(str.strip), _parts.map(lambda p: [*p, {"type": "text", "text": "q?"}])),
    st.one_of(_texts, _parts),
).map(lambda t: [*t[0], {"role": "user", "content": t[1]}, {"role": "assistant", "content": t[2]}])


@st.composite
def conversation_events(draw: st.DrawFn) -> bytes:
    """Valid conversation events of both shapes, some with a top-level `type` (even "feedback"), `feedback` in their
    text, metadata or parts, in any key order."""
    document: dict[str, Any] = {}
    if draw(st.booleans()):
        document["user_message"] = draw(_texts.filter(str.strip))
        document["response"] = draw(_texts)
    else:
        document["messages"] = draw(_messages)
    extras = {
        "type": st.sampled_from(["feedback", "event", "chat", "Feedback"]),
        "event_id": _labels,
        "app": _labels,
        "metadata": st.dictionaries(st.sampled_from(["type", "kind", "feedback"]), st.sampled_from(["feedback", "1"])),
        "thumbs": st.sampled_from(["up", "down", 1]),
        "rating": st.integers(1, 5),
        "comment": _texts,
    }
    for key, strategy in extras.items():
        if draw(st.booleans()):
            document[key] = draw(strategy)
    pairs = draw(st.permutations(list(document.items())))
    return json.dumps(dict(pairs), ensure_ascii=draw(st.booleans())).encode()


@settings(max_examples=examples(1000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversation_events())
def test_no_conversation_event_is_taken_for_feedback(raw: bytes) -> None:
    """Whatever a valid conversation event carries besides its judged fields, it decodes as an event and is never
    classified as feedback."""
    decode_event(raw, position=POS, record_timestamp_ms=RECORD_MS, now=NOW)  # a valid event: raises otherwise
    assert not is_feedback_json(raw)


def test_generated_traffic_is_never_feedback() -> None:
    """The demo's traffic generator (events and deliberately malformed records) holds no feedback."""
    assert not any(is_feedback_json(raw) for raw in generate_events(500, seed=11, malformed_share=0.1))


@st.composite
def feedback_objects(draw: st.DrawFn) -> bytes:
    """Valid feedback objects with any optional fields, in any key order."""
    document: dict[str, Any] = {"type": "feedback"}
    document.update(
        draw(
            st.sampled_from(
                [{"event_id": "e1"}, {"response_id": "r1"}, {"conversation_id": "c1", "turn": 2}, {"event_id": "e"}]
            )
        )
    )
    if draw(st.booleans()):
        document["thumbs"] = draw(st.sampled_from(["up", "down", 1, 0, True, False]))
    else:
        scale = draw(st.integers(2, 100))
        document.update(rating=draw(st.integers(1, scale)), scale=scale)
    for key, strategy in {"comment": _texts, "app": _labels, "reason": st.sampled_from(["slow", "wrong"])}.items():
        if draw(st.booleans()):
            document[key] = draw(strategy)
    return json.dumps(dict(draw(st.permutations(list(document.items()))))).encode()


@settings(max_examples=examples(500), deadline=None)
@given(feedback_objects())
def test_every_valid_feedback_object_is_recognised_and_decodes(raw: bytes) -> None:
    """The converse: a valid feedback object is classified as feedback and decodes."""
    assert is_feedback_json(raw)
    assert decode(raw).source == "json"
