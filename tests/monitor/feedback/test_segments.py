"""Which segment a feedback event counts in and which answer it names (pure): the feedback's own segment first, then
the answer's scored row, then its record read back from Kafka, else unresolved; and when the answer is judged."""

from __future__ import annotations

from datetime import UTC, datetime

from consumers.decode import DecodedEvent, decode_fields
from monitor.feedback.answers import StoredAnswer
from monitor.feedback.segments import needs_answer, needs_read, settle, should_judge
from schemas.feedback import AnswerRef, FeedbackEvent, Segment

AT = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
OWN = Segment("own-app", "m0", "v0")
STORED = StoredAnswer("stored-id", Segment("shop", "m1", "v12"), AT, True, "base", 0.5)
UNJUDGED = StoredAnswer("stored-id", Segment("shop", "m1", "v12"), AT, False, "shadow:base", 0.25)
FEEDBACK_JUDGED = StoredAnswer("stored-id", Segment("shop", "m1", "v12"), AT, False, "feedback", 0.25)
READ = decode_fields(
    b'{"event_id": "read-id", "app": "kafka-app", "model": "m2", "prompt_version": "v13", "user_message": "q?", '
    b'"response": "a.", "timestamp": "2026-12-01T10:00:00Z"}',
    topic="t", partition=0, offset=1, record_timestamp_ms=None,
)  # fmt: skip


def _feedback(*, negative: bool = True, segment: Segment | None = None, event_id: str = "ref-id") -> FeedbackEvent:
    return FeedbackEvent(
        "f1", AnswerRef(event_id=event_id, conversation_id="c1", turn=0), AT, "thumbs", 0.0 if negative else 1.0, 1,
        negative, "json", segment=segment,
    )  # fmt: skip


def _where(feedback: FeedbackEvent, stored: StoredAnswer | None, read: DecodedEvent | None) -> tuple[object, str]:
    settled = settle(feedback, stored, read)
    return settled.segment, settled.source


def test_the_segment_comes_from_the_feedback_then_the_scored_row_then_kafka() -> None:
    """Each source is used only when those before it have no segment; nothing at all is unresolved."""
    assert _where(_feedback(segment=OWN), STORED, READ) == (OWN, "feedback")
    assert _where(_feedback(), STORED, READ) == (STORED.segment, "scored")
    assert _where(_feedback(), None, READ) == (Segment("kafka-app", "m2", "v13"), "kafka")
    assert _where(_feedback(), None, None) == (None, "unresolved")


def test_the_answer_found_names_the_answer_over_the_reference() -> None:
    """A span-parented OpenTelemetry rating names its answer `otel:...`; the row found is stored by its response id."""
    assert settle(_feedback(event_id="otel:t/s"), STORED, None).answer_event_id == "stored-id"
    assert settle(_feedback(event_id="otel:t/s"), None, READ).answer_event_id == "read-id"
    assert settle(_feedback(event_id="ref-id"), None, None).answer_event_id == "ref-id"


def test_the_answer_is_looked_for_only_when_the_feedback_does_not_say_enough() -> None:
    """A positive feedback with its segment and event id needs no lookup; no segment, no id or a negative verdict do."""
    assert not needs_answer(_feedback(negative=False, segment=OWN))
    assert needs_answer(_feedback(negative=False))
    assert needs_answer(_feedback(negative=False, segment=OWN, event_id=""))
    assert needs_answer(_feedback(segment=OWN))


def test_only_a_negative_verdict_on_an_answer_nobody_judged_live_is_judged() -> None:
    """Judged: negative, read back, and no live row (none, or only a replay or shadow row); an answer judged for
    earlier feedback is not judged again."""
    assert should_judge(_feedback(), None, READ)
    assert should_judge(_feedback(), UNJUDGED, READ)
    assert not should_judge(_feedback(), STORED, READ)
    assert not should_judge(_feedback(), FEEDBACK_JUDGED, READ)
    assert not should_judge(_feedback(negative=False), None, READ)
    assert not should_judge(_feedback(), None, None)


def test_the_record_is_read_back_only_when_no_row_settles_it_or_it_may_be_judged() -> None:
    """No row: read; a live or feedback-judged row settles a negative verdict too; a shadow row does not."""
    assert needs_read(_feedback(negative=False), None)
    assert not needs_read(_feedback(negative=False), UNJUDGED)
    assert needs_read(_feedback(), UNJUDGED)
    assert not needs_read(_feedback(), STORED)
    assert not needs_read(_feedback(), FEEDBACK_JUDGED)
