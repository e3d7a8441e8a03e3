"""Which segment a feedback event counts in, and which answer it is about (pure).

The segment comes from the first that has it: the feedback event itself (its app, model and prompt version), the
answer's scored row, the answer's record read back from Kafka. Feedback often arrives before its answer is judged,
long after it, or for an answer sampling skipped, so the answer is looked for only when the feedback does not say
enough by itself: no segment, no event id, or a negative verdict (which may get the answer judged)."""

from __future__ import annotations

from dataclasses import dataclass

from consumers.decode import DecodedEvent
from monitor.feedback.answers import StoredAnswer
from schemas.feedback import FEEDBACK_SAMPLE_RULE, FeedbackEvent, Segment, SegmentSource


@dataclass(frozen=True, slots=True)
class Settled:
    """Where a feedback row counts (`segment` None: unresolved) and the answer's event id ("" if unknown)."""

    segment: Segment | None
    source: SegmentSource
    answer_event_id: str


def needs_answer(feedback: FeedbackEvent) -> bool:
    """Whether the answer must be looked for: the feedback lacks a segment or an event id, or it is negative (the
    answer is judged if nobody did)."""
    return feedback.segment is None or not feedback.answer.event_id or feedback.negative


def settle(feedback: FeedbackEvent, stored: StoredAnswer | None, read: DecodedEvent | None) -> Settled:
    """The segment and answer id from the feedback itself, else the stored row, else the record read back."""
    # The answer found wins over the reference: an OpenTelemetry rating names its answer by span, stored by response id.
    answer_id = (stored.event_id if stored else "") or (read.event_id if read else "") or feedback.answer.event_id
    if feedback.segment is not None:
        return Settled(feedback.segment, "feedback", answer_id)
    if stored is not None:
        return Settled(stored.segment, "scored", answer_id)
    if read is not None:
        return Settled(Segment(read.app, read.model, read.prompt_version), "kafka", answer_id)
    return Settled(None, "unresolved", answer_id)


def judged_already(stored: StoredAnswer | None) -> bool:
    """Whether the answer has a live row, or one judged for earlier feedback."""
    return stored is not None and (stored.judged or stored.sample_rule == FEEDBACK_SAMPLE_RULE)


def needs_read(feedback: FeedbackEvent, stored: StoredAnswer | None) -> bool:
    """Whether the answer's record is to be read back from Kafka: no row settles its segment, or a negative verdict
    may get it judged."""
    return stored is None or (feedback.negative and not judged_already(stored))


def should_judge(feedback: FeedbackEvent, stored: StoredAnswer | None, read: DecodedEvent | None) -> bool:
    """Whether the answer is to be judged for this feedback: negative, judged neither live nor for earlier feedback,
    and its record was read back (the budget decides after)."""
    return feedback.negative and read is not None and not judged_already(stored)
