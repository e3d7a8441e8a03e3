"""Users' feedback through the service. Each feedback event, on its partition's tasks:
  1. find its answer when it does not say enough by itself (`monitor.feedback.segments.needs_answer`): the scored row
     in the store, else the answer's record read back from Kafka; an answer not found is looked for again until
     MONITOR_FEEDBACK_RESOLVE_WAIT_S has passed since the feedback arrived (its record may not be in Kafka yet);
  2. a negative verdict on an answer nobody judged live gets it judged, within MONITOR_FEEDBACK_JUDGE_BUDGET, as a
     row of its own (`sample_rule` 'feedback'), with the answer's Kafka position and a ticket of the feedback record;
  3. its comment is redacted (or dropped, MONITOR_STORE_TEXT=none) and its row goes to the feedback sink, whose
     acknowledgement finishes the feedback record's ticket.
Nothing is lost silently: a feedback event whose answer is never found is stored as `unresolved` and counted."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import structlog

from consumers.decode import DecodedEvent
from consumers.offsets import OffsetTracker, Ticket
from consumers.sampling import DecisionKind, SampleDecision
from monitor.backoff import Backoff
from monitor.feedback.answer_reader import AgedOut, AnswerReader, Found, NotFound
from monitor.feedback.answers import AnswerIndex, StoredAnswer
from monitor.feedback.judge_budget import HourlyBudget
from monitor.feedback.rows import FeedbackRow
from monitor.feedback.segments import judged_already, needs_answer, needs_read, settle, should_judge
from monitor.feedback.settings import FeedbackSettings
from monitor.feedback.sink import FeedbackSink
from monitor.privacy.spans import Redactor
from monitor.runtime.metrics import Metrics
from monitor.runtime.partition_tasks import PartitionTasks
from monitor.runtime.rows import TextPolicy
from monitor.store.async_store import AsyncStore
from monitor.store.erased_ids import was_erased
from schemas.errors import DecodeError, RedactionFailed, StoreError
from schemas.events import KafkaPosition
from schemas.feedback import FeedbackEvent

log = structlog.get_logger("monitor.runtime.feedback_flow")

# Waits between looks for an answer not found yet: 4 s doubling to 2 minutes (each look may read thousands of records).
RESOLVE_BACKOFF = Backoff(base_s=4.0, max_s=120.0)
# A judge ticket's part: far below the feedback events' own (-1, -2, ...) of the same record.
_JUDGE_PART = -1_000_000

JudgeAnswer = Callable[[DecodedEvent, SampleDecision, Ticket, KafkaPosition], None]
DeadLetter = Callable[[DecodeError], None]


@dataclass(frozen=True, slots=True)
class FeedbackParts:
    """What the feedback flow works with, built from the feedback slice by `monitor.runtime.service`."""

    settings: FeedbackSettings
    store: AsyncStore
    index: AnswerIndex
    reader: AnswerReader
    sink: FeedbackSink[Ticket]
    budget: HourlyBudget


class FeedbackFlow:
    """`start(feedback, ticket, position)` handles one feedback event on its partition's tasks."""

    def __init__(
        self,
        parts: FeedbackParts,
        *,
        redactor: Redactor | None,
        text_policy: TextPolicy,
        tracker: OffsetTracker,
        tasks: PartitionTasks,
        metrics: Metrics,
        judge: JudgeAnswer,
        clock: Callable[[], float] = time.time,
        backoff: Backoff = RESOLVE_BACKOFF,
    ) -> None:
        self.parts, self.redactor, self.text_policy = parts, redactor, text_policy
        self.tracker, self.tasks, self.metrics, self.judge = tracker, tasks, metrics, judge
        self.clock, self.backoff = clock, backoff

    def start(self, feedback: FeedbackEvent, ticket: Ticket, position: KafkaPosition, dead_letter: DeadLetter) -> None:
        """Handle `feedback` (read at `position`, tracked by `ticket`) on its partition's tasks; one that fails (its
        comment's redactor raised, or a bug) goes to `dead_letter`, so its ticket finishes and nothing stalls."""
        self.metrics.feedback_received.labels(feedback.source, feedback.kind).inc()
        work = self._guarded(feedback, ticket, position, dead_letter)
        self.tasks.spawn(ticket.tp, work, name=f"feedback-{feedback.feedback_id}")

    async def _guarded(
        self, feedback: FeedbackEvent, ticket: Ticket, position: KafkaPosition, dead_letter: DeadLetter
    ) -> None:
        try:
            await self._handle(feedback, ticket, position)
        except DecodeError as e:
            dead_letter(e)
        except Exception as e:  # a bug must not hold the partition's offsets back: the record is dead-lettered
            log.error(
                "feedback_failed", feedback_id=feedback.feedback_id, error=type(e).__name__,
                topic=position.topic, partition=position.partition, offset=position.offset,
            )  # fmt: skip
            dead_letter(DecodeError("feedback_failed", f"feedback {feedback.feedback_id}: {type(e).__name__}"))

    async def _handle(self, feedback: FeedbackEvent, ticket: Ticket, position: KafkaPosition) -> None:
        received = self.clock()
        stored, read = None, None
        if needs_answer(feedback):
            stored, read = await self._answer(feedback, received)
        answer = read.event if read is not None else None
        if read is not None and should_judge(feedback, stored, answer):
            await self._judge(feedback, read, ticket)
        elif feedback.negative:
            outcome = "already_judged" if judged_already(stored) else "no_answer"
            self.metrics.feedback_judging.labels(outcome).inc()
        settled = settle(feedback, stored, answer)
        row = FeedbackRow(
            event=replace(feedback, comment=self._comment(feedback)),
            segment=settled.segment,
            segment_source=settled.source,
            position=position,
            received_at=datetime.fromtimestamp(received, UTC),
            answer_event_id=settled.answer_event_id,
        )
        self.metrics.feedback_stored.labels(settled.source).inc()
        if settled.source == "unresolved":
            log.warning(
                "feedback_unresolved", feedback_id=feedback.feedback_id, answer=feedback.answer.describe(),
                topic=position.topic, partition=position.partition, offset=position.offset,
                note="stored without a segment: neither the feedback, the store nor Kafka had its answer",
            )  # fmt: skip
        self.parts.sink.add(row, ticket)

    async def _answer(self, feedback: FeedbackEvent, received: float) -> tuple[StoredAnswer | None, Found | None]:
        """The answer's scored row, and its record read back from Kafka when the row cannot settle everything;
        looked for again, with backoff, while it is not found and the resolve wait lasts. A store that fails is
        waited for (the feedback's row could not be written either), never taken for a missing answer."""
        retry, around = 0, feedback.answer_time or feedback.feedback_time
        # An answer can only be missing from Kafka for a while after the feedback was given: feedback read from a
        # backlog gets one look, live feedback looks until the wait has passed since it was given.
        deadline = min(received, feedback.feedback_time.timestamp()) + self.parts.settings.resolve_wait_s
        while True:
            read: Found | AgedOut | NotFound | None = None
            try:
                stored = await self.parts.index.find(feedback.answer, around)
            except StoreError as e:
                log.warning("feedback_store_unavailable", feedback_id=feedback.feedback_id, error=str(e)[:300])
                await asyncio.sleep(self.backoff.delay(retry))
                retry += 1
                continue
            if needs_read(feedback, stored):
                read = await self._read(feedback)
            if stored is not None or isinstance(read, Found | AgedOut):
                break
            wait = self.backoff.delay(retry)
            if self.clock() + wait > deadline:
                break
            retry += 1
            await asyncio.sleep(wait)
        if read is not None:
            self._count_read(feedback, read)
        return stored, read if isinstance(read, Found) else None

    async def _read(self, feedback: FeedbackEvent) -> Found | AgedOut | NotFound:
        """The answer's record from Kafka; a broker error is a miss, looked for again within the resolve wait."""
        try:
            return await self.parts.reader.find(feedback.answer, feedback.feedback_time, feedback.answer_time)
        except Exception as e:  # Kafka unavailable, a timeout: the answer is not found this time
            log.warning("feedback_answer_read_failed", feedback_id=feedback.feedback_id, error=type(e).__name__)
            return NotFound(0, f"reading Kafka failed: {type(e).__name__}")

    def _count_read(self, feedback: FeedbackEvent, read: Found | AgedOut | NotFound) -> None:
        outcome = {Found: "found", AgedOut: "aged_out", NotFound: "not_found"}[type(read)]
        self.metrics.feedback_answer_reads.labels(outcome).inc()
        if isinstance(read, AgedOut):
            log.warning(
                "feedback_answer_aged_out", feedback_id=feedback.feedback_id, answer=feedback.answer.describe(),
                topic=read.topic, partition=read.partition,
                earliest=read.earliest.isoformat() if read.earliest else None,
            )  # fmt: skip

    async def _judge(self, feedback: FeedbackEvent, found: Found, ticket: Ticket) -> None:
        """Judge a disliked answer nobody judged, if the hour's budget allows and `forget` did not erase it (the
        record read back is history, like a replay's); its row carries the budget's inclusion probability as its
        rate."""
        event = found.event
        try:
            erased = await self.parts.store.call(lambda s: was_erased(s, event.conversation_id, event.event_id))
        except StoreError:  # unknown: an erased answer must never be judged again, so this one is not
            erased = True
        if erased:
            self.metrics.feedback_judging.labels("erased").inc()
            log.info("feedback_judge_skipped_erased", feedback_id=feedback.feedback_id)
            return
        budget, now = self.parts.budget, self.clock()
        if not budget.take(now):
            self.metrics.feedback_judging.labels("over_budget").inc()
            log.info("feedback_judge_over_budget", feedback_id=feedback.feedback_id, event_id=found.event.event_id)
            return
        decision = SampleDecision(True, budget.inclusion(now), DecisionKind.FEEDBACK)
        judge_ticket = self.tracker.track(ticket.tp, ticket.offset, _JUDGE_PART + ticket.part)
        self.metrics.feedback_judging.labels("judged").inc()
        log.info(
            "feedback_judging", feedback_id=feedback.feedback_id, event_id=found.event.event_id,
            topic=found.position.topic, partition=found.position.partition, offset=found.position.offset,
        )  # fmt: skip
        self.judge(found.event, decision, judge_ticket, found.position)

    def _comment(self, feedback: FeedbackEvent) -> str:
        """The comment as the text policy stores text: redacted, dropped, or as received. Raises `RedactionFailed`
        when the redactor raises: the feedback fails closed, as a sampled event does."""
        comment = feedback.comment
        if not comment or self.text_policy == "none":
            return ""
        if self.text_policy == "full" or self.redactor is None:
            return comment
        try:
            return self.redactor.redact(comment).text
        except Exception as e:
            raise RedactionFailed(feedback.feedback_id, e) from None
