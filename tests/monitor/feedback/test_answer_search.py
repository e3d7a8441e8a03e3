"""Where and when an answer's record is looked for, and how it is recognised (pure): the time windows, the key's
partition, the ways a feedback event names its answer, and when a partition has lost records a window asked for."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from aiokafka.structs import OffsetAndTimestamp

from consumers.decode import DecodedEvent
from monitor.feedback.answer_search import Window, is_answer, key_partition, search_windows, window_aged_out
from schemas.feedback import AnswerRef

LOOKBACK_S = 86_400.0

FB = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_with_the_answer_s_time_it_is_read_from_just_before_it_to_past_the_feedback() -> None:
    """From 5 s before the answer to a minute past the feedback (or past the answer, if the feedback's time is
    earlier: a skewed clock), then the rest of the minute before the answer."""
    answered = FB - timedelta(minutes=5)
    assert search_windows(FB, answered, LOOKBACK_S) == (
        Window(answered - timedelta(seconds=5), FB + timedelta(minutes=1)),
        Window(answered - timedelta(minutes=1), answered - timedelta(seconds=5)),
    )
    late = FB + timedelta(minutes=2)
    assert search_windows(FB, late, LOOKBACK_S)[0].until == late + timedelta(minutes=1)


def test_without_it_the_windows_double_newest_first_and_tile_the_lookback() -> None:
    """The last minute, then back to 2, 4, 8, ... minutes: adjacent, newest first, the last cut at the lookback."""
    minute = timedelta(minutes=1)
    day = search_windows(FB, None, LOOKBACK_S)
    assert day[:3] == (
        Window(FB - minute, FB + minute),
        Window(FB - 2 * minute, FB - minute),
        Window(FB - 4 * minute, FB - 2 * minute),
    )
    assert all(newer.since == older.until for newer, older in itertools.pairwise(day))
    assert (day[-1].since, day[-2].since) == (FB - timedelta(days=1), FB - 1024 * minute)
    assert search_windows(FB, None, 300.0) == (
        Window(FB - minute, FB + minute),
        Window(FB - 2 * minute, FB - minute),
        Window(FB - 4 * minute, FB - 2 * minute),
        Window(FB - 5 * minute, FB - 4 * minute),
    )
    assert search_windows(FB, None, 30.0) == (Window(FB - timedelta(seconds=30), FB + minute),)


def _event(**fields: Any) -> DecodedEvent:
    base: dict[str, Any] = dict(
        event_id="e", conversation_id="c", event_time=FB, app="a", model="m", prompt_version="v", metadata={},
        question="q", response="r", shape="flat", epoch_s=FB.timestamp(),
    )  # fmt: skip
    return DecodedEvent(**{**base, **fields})


def test_an_answer_is_named_by_id_by_conversation_and_turn_or_by_span_ids() -> None:
    """Each way of naming an answer picks it, and only it; a conversation without a turn names none."""
    spans = {"otel.trace_id": "AB" * 16, "otel.span_id": "cd" * 8}
    assert is_answer(_event(event_id="e1"), AnswerRef(event_id="e1"))
    assert not is_answer(_event(event_id="e2"), AnswerRef(event_id="e1"))
    assert is_answer(_event(conversation_id="c1", turn=2), AnswerRef(conversation_id="c1", turn=2))
    assert not is_answer(_event(conversation_id="c1", turn=1), AnswerRef(conversation_id="c1", turn=2))
    assert not is_answer(_event(conversation_id="c1", turn=0), AnswerRef(conversation_id="c1"))
    assert is_answer(_event(metadata=spans), AnswerRef(trace_id="ab" * 16, span_id="CD" * 8))
    assert not is_answer(_event(metadata=spans), AnswerRef(trace_id="ab" * 16, span_id="ce" * 8))
    assert not is_answer(_event(), AnswerRef())


def test_aged_out_when_the_log_starts_after_what_the_window_asked_for() -> None:
    """Records deleted (the log starts at 500) and the first one kept is newer than the window's start: aged out.
    A log never trimmed, a window that starts inside what is kept, or a window past the end: not aged out. A log
    emptied by deletion: aged out."""
    since = 1_000_000
    assert window_aged_out(500, 900, OffsetAndTimestamp(500, since + 60_000), since)
    assert not window_aged_out(0, 900, OffsetAndTimestamp(0, since + 60_000), since)
    assert not window_aged_out(500, 900, OffsetAndTimestamp(640, since + 60_000), since)
    assert not window_aged_out(500, 900, OffsetAndTimestamp(500, since), since)
    assert not window_aged_out(500, 900, None, since)
    assert not window_aged_out(500, 900, OffsetAndTimestamp(0, -1), since)  # tansu's "no record that late"
    assert window_aged_out(500, 500, None, since)


def test_the_key_partition_matches_the_java_client_s() -> None:
    """Keys over 1000 partitions land where Kafka's Java partitioner puts them (the reference values kafka-python
    and aiokafka test against)."""
    java = {"a": 524, "ab": 434, "abc": 107, "123456789": 566, "\x00 ": 742}
    assert {key: key_partition(key, 1000) for key in java} == java
