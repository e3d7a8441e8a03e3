"""Where and when to look for an answer's record in Kafka, and which event it is (pure): the time windows to read, the
partition a conversation's key hashes to, whether an event is the answer a feedback event names, and whether a
partition lost records a window asked for. `monitor.feedback.answer_reader` is the shell that reads them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from aiokafka.partitioner import murmur2
from aiokafka.structs import OffsetAndTimestamp

from consumers.decode import DecodedEvent
from consumers.otlp.span_keys import SPAN_ID_KEY, TRACE_ID_KEY
from consumers.time_range import start_offset
from schemas.feedback import AnswerRef

MARGIN = timedelta(minutes=1)  # before the answer's (or feedback's) time, and past the window's end
# An answer's record is written when or just after it is sent: read from a few seconds before its time first, and
# the rest of the minute before it (a producer's clock behind the one that stamped the feedback) only if need be.
ANSWER_SKEW = timedelta(seconds=5)
FIRST_WINDOW = timedelta(minutes=1)  # feedback time only: the newest window, each older one twice as long


@dataclass(frozen=True, slots=True)
class Window:
    """Record timestamps a read covers: from `since` to the first record at or past `until`."""

    since: datetime
    until: datetime

    @property
    def since_ms(self) -> int:
        """The start in epoch milliseconds (Kafka's timestamp unit), never negative."""
        return max(0, int(self.since.timestamp() * 1000))

    @property
    def until_ms(self) -> int:
        """The end in epoch milliseconds."""
        return int(self.until.timestamp() * 1000)


def search_windows(feedback_time: datetime, answer_time: datetime | None, lookback_s: float) -> tuple[Window, ...]:
    """The windows to read, in order. With the answer's time: from a few seconds before it to a minute past the
    later of it and the feedback (its record was written between the two, give or take a producer's delay), then
    the rest of the minute before it.

    Else newest first, each window ending where the newer one starts: the last minute (to a minute past the
    feedback, whose answer may be written after it), then back to 2, 4, 8, ... minutes before the feedback, the last
    cut at the lookback. A window is read forward from its start, so an answer of age A costs at most the records
    of the last 2A (the newer windows, then the part of its own older than it); fixed steps (1 minute, 10 minutes,
    the lookback) would read the whole lookback for an answer 11 minutes old."""
    if answer_time is not None:
        near = Window(answer_time - ANSWER_SKEW, max(answer_time, feedback_time) + MARGIN)
        return near, Window(answer_time - MARGIN, near.since)
    oldest = feedback_time - timedelta(seconds=lookback_s)
    out: list[Window] = []
    until, back = feedback_time + MARGIN, FIRST_WINDOW
    while until > oldest:
        since = max(oldest, feedback_time - back)
        out.append(Window(since, until))
        until, back = since, back * 2
    return tuple(out)


def key_partition(conversation_id: str, partitions: int) -> int:
    """The partition Kafka's default partitioner gives a record keyed by `conversation_id` (UTF-8): murmur2, its
    sign bit cleared, modulo the partition count (Java clients, aiokafka)."""
    hashed: int = murmur2(conversation_id.encode("utf-8"))
    return (hashed & 0x7FFFFFFF) % partitions


def is_answer(event: DecodedEvent, ref: AnswerRef) -> bool:
    """Whether `event` is the answer `ref` names: by event id, by conversation and turn, or by the span ids the
    OpenTelemetry decoder keeps in the metadata (hex, compared without regard to case)."""
    if ref.event_id and event.event_id == ref.event_id:
        return True
    same_turn = event.conversation_id == ref.conversation_id and event.turn == ref.turn
    if ref.conversation_id and same_turn:  # without a turn, none: a conversation has many answers
        return True
    if ref.trace_id and ref.span_id:
        trace, span = event.metadata.get(TRACE_ID_KEY, ""), event.metadata.get(SPAN_ID_KEY, "")
        return trace.lower() == ref.trace_id.lower() and span.lower() == ref.span_id.lower()
    return False


def window_aged_out(log_start: int, log_end: int | None, asked: OffsetAndTimestamp | None, since_ms: int) -> bool:
    """Whether the partition may have lost records of a window starting at `since_ms`: records were deleted (its log
    starts past 0) and the offset asked for is where the log starts, its record newer than the window's start; or
    the log is empty, everything in it deleted. `asked` is `offsets_for_times`' answer for the window's start."""
    if log_start <= 0:
        return False
    if start_offset(asked) is None:
        return log_end is not None and log_end <= log_start
    assert asked is not None
    return bool(asked.offset <= log_start and asked.timestamp > since_ms)
