"""Generated users' feedback: deterministic, more negative on padded and off-topic answers, each a valid feedback
object sent after the answer it names and keyed by its conversation, and the same conversations as without it."""

from __future__ import annotations

import json
import random
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from consumers.decode import decode_event
from consumers.feedback import FeedbackOptions, decode_feedback
from monitor.devtools.feedback_traffic import (
    NEGATIVE_CHANCE,
    Answer,
    FeedbackMix,
    FeedbackQueue,
    Quality,
    feedback_object,
    interleave,
)
from monitor.devtools.outgoing import Outgoing, keyed_by_conversation
from monitor.devtools.traffic import generate_events, generate_records
from schemas.errors import DecodeError
from schemas.events import KafkaPosition
from schemas.feedback import FeedbackEvent

NOW = datetime(2026, 3, 3, 12, 0, tzinfo=UTC)
OPTIONS = FeedbackOptions(frozenset({"user_feedback"}), frozenset({"user_rating"}))


def _is_feedback(record: Outgoing) -> bool:
    return b'"type": "feedback"' in record.value


def _decoded(record: Outgoing, offset: int = 0) -> FeedbackEvent:
    return decode_feedback(
        record.value, topic="t", partition=0, offset=offset, record_timestamp_ms=None, options=OPTIONS, now=NOW
    )


def test_the_same_seed_gives_the_same_records_and_the_conversations_of_generate_events() -> None:
    """A seed gives the same records every time (feedback included); another seed other ones; the conversations are
    generate_events' values whatever the feedback share, and without feedback there are only those."""
    mix = FeedbackMix(0.5)
    first = list(generate_records(400, seed=3, now=NOW, feedback=mix))
    assert first == list(generate_records(400, seed=3, now=NOW, feedback=mix))
    assert first != list(generate_records(400, seed=4, now=NOW, feedback=mix))
    events = list(generate_events(400, seed=3, now=NOW))
    assert [r.value for r in first if not _is_feedback(r)] == events
    assert [r.value for r in generate_records(400, seed=3, now=NOW)] == events
    assert 150 <= sum(map(_is_feedback, first)) <= 250  # half of ~390 valid answers


def test_every_feedback_decodes_and_follows_the_answer_it_names_keyed_by_its_conversation() -> None:
    """Each feedback record decodes as our JSON feedback, names an answer sent before it, carries that answer's
    conversation as its key and a timestamp seconds to minutes after the answer's; each conversation record is keyed
    by its conversation id, a malformed one unkeyed."""
    answers: dict[str, tuple[str, datetime]] = {}  # event id -> conversation, time
    kinds: Counter[str] = Counter()
    with_segment = 0
    for offset, record in enumerate(generate_records(2000, seed=5, now=NOW, feedback=FeedbackMix(0.4))):
        if _is_feedback(record):
            feedback = _decoded(record, offset)
            conversation, at = answers[feedback.answer.event_id]  # a KeyError: feedback before its answer
            assert record.key == conversation.encode() and record.topic is None
            assert feedback.answer_time == at
            assert timedelta(seconds=3) <= feedback.feedback_time - at <= timedelta(minutes=5)
            kinds[feedback.kind] += 1
            with_segment += feedback.segment is not None
            continue
        try:
            event = decode_event(
                record.value,
                position=KafkaPosition(topic="t", partition=0, offset=offset),
                record_timestamp_ms=None,
                now=NOW,
            )
        except DecodeError:
            assert record.key is None
            continue
        assert record.key == event.conversation_id.encode()
        answers[event.event_id] = (event.conversation_id, event.event_time)
    total = kinds.total()
    assert 0.3 * len(answers) < total < 0.5 * len(answers)
    assert 0.2 < kinds["rating"] / total < 0.4 and 0.35 < with_segment / total < 0.65


def _negative_share(quality: Quality, n: int = 4000) -> float:
    rng = random.Random(f"quality/{quality}")
    answer = Answer("e", "c", NOW, "app", "model", "v1", quality)
    negative = 0
    for i in range(n):
        record = Outgoing(json.dumps(feedback_object(rng, answer, FeedbackMix(1.0))).encode())
        negative += _decoded(record, i).negative
    return negative / n


def test_padded_and_off_topic_answers_are_disliked_far_more_often() -> None:
    """The share of negative feedback (thumbs down, or a rating of 1-2 of 5) is near its quality's chance: low on good
    answers, several times higher on padded ones and higher still off topic."""
    shares = {q: _negative_share(q) for q in ("good", "padded", "off_topic")}
    for quality, share in shares.items():
        assert share == pytest.approx(NEGATIVE_CHANCE[quality], abs=0.03), shares  # type: ignore[index]
    assert shares["padded"] > 4 * shares["good"] and shares["off_topic"] > shares["padded"]


def test_the_padding_prompt_version_gets_more_thumbs_down() -> None:
    """In generated traffic, v13 (which pads half its answers) gets a larger share of negative feedback than v12."""
    version: dict[str, str] = {}
    negative: dict[str, list[bool]] = {"v12": [], "v13": []}
    for offset, record in enumerate(generate_records(6000, seed=9, now=NOW, feedback=FeedbackMix(0.5))):
        if _is_feedback(record):
            feedback = _decoded(record, offset)
            negative[version[feedback.answer.event_id]].append(feedback.negative)
        elif record.key is not None:
            event = json.loads(record.value)
            version[event["event_id"]] = event["prompt_version"]
    v12, v13 = (sum(n) / len(n) for n in (negative["v12"], negative["v13"]))
    assert v13 > v12 + 0.08, (v12, v13)


def test_with_a_clock_feedback_waits_until_its_timestamp() -> None:
    """With a clock, a feedback record is held until the clock reaches its timestamp, then sent; the rest at the end;
    its content is the clock-free queue's."""
    now = [NOW]
    mix = FeedbackMix(1.0, topic="feedback", delay_s=(2.0, 10.0))
    answers = [(Outgoing(b"a", b"c"), Answer(f"e{i}", "c", NOW, "a", "m", "v", "good")) for i in range(20)]
    queue = FeedbackQueue(mix, 1, clock=lambda: now[0])
    for record, answer in answers:
        queue.add(answer)
    assert list(queue.due()) == []
    now[0] = NOW + timedelta(seconds=6)
    due = list(queue.due())
    assert due and all(json.loads(r.value)["timestamp"] <= "2026-03-03T12:00:06.000Z" for r in due)
    rest = list(queue.rest())
    assert len(due) + len(rest) == 20 and all(r.topic == "feedback" for r in due + rest)
    unclocked = [r for r in interleave(answers, FeedbackQueue(mix, 1)) if r.value != b"a"]
    assert sorted(r.value for r in unclocked) == sorted(r.value for r in due + rest)


def test_a_file_line_is_keyed_by_its_conversation_id() -> None:
    """`produce --file` keys a line by its JSON conversation_id; a line without one, or not JSON, goes unkeyed."""
    assert keyed_by_conversation(b'{"conversation_id": "c-1", "x": 1}') == Outgoing(
        b'{"conversation_id": "c-1", "x": 1}', b"c-1"
    )
    for line in (b"not json", b"[1]", b'{"conversation_id": 3}', b'{"conversation_id": ""}'):
        assert keyed_by_conversation(line) == Outgoing(line)


def test_a_share_outside_0_to_1_is_refused() -> None:
    """A feedback share (or any other share of the mix) outside 0..1 is a clear error."""
    with pytest.raises(ValueError, match="share must be between 0 and 1"):
        FeedbackMix(1.5)
