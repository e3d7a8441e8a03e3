"""The join of spans without content to the one-message GenAI log records of their call, as the pipeline runs it:
each held item keeps its record's offset pending (a ticket), and a joined event carries the tickets of every
record it was made from, so none of them is committed before its row is written (at-least-once across topics).

What comes out of the join (`consumers.otlp.join`):
  - a span with content found: its event is `ready` for sampling, its ticket bound to the log records' tickets;
  - a span without: counted as `no_content` (metric, traffic counts, the once-a-minute line), tickets done;
  - log records without a span: counted as unjoined, tickets done.

Not dependent on partitioning for correctness: a rebalance that moves a span's partition drops it here (the next
owner re-reads it), and the log records held for it wait out their time and are counted as unjoined."""

from __future__ import annotations

import time
from collections.abc import Callable, Set
from dataclasses import dataclass

from aiokafka import TopicPartition

from consumers.decode import DecodedEvent
from consumers.offsets import OffsetTracker, Ticket
from consumers.otlp.dialects import NoContent
from consumers.otlp.join import Joined, LogJoin, Lonely
from consumers.otlp.records import RecordContext, RecordEvents, joined_call
from consumers.settings import KafkaSettings
from monitor.judging.traffic_counts import TrafficCounter
from monitor.runtime.metrics import Metrics
from monitor.runtime.no_content import NoContentNotice
from schemas.events import MAX_ID_CHARS


@dataclass(frozen=True)
class Held:
    """A record's share of a waiting call: its ticket, and its context (the span's is the event's)."""

    ticket: Ticket
    context: RecordContext


class SpanJoin:
    """Holds spans and log records until they meet or their wait ends; `ready` collects the events made."""

    def __init__(
        self,
        tracker: OffsetTracker,
        metrics: Metrics,
        traffic: TrafficCounter,
        notice: NoContentNotice,
        *,
        wait_s: float,
        capacity: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tracker = tracker
        self.metrics = metrics
        self.traffic = traffic
        self.notice = notice
        self.clock = clock
        self.join: LogJoin[Held] = LogJoin(wait_s, capacity)
        self.ready: list[tuple[DecodedEvent, Ticket]] = []

    @classmethod
    def of(
        cls, kafka: KafkaSettings, tracker: OffsetTracker, metrics: Metrics, traffic: TrafficCounter
    ) -> SpanJoin | None:
        """The join the topics need: one when they include both OTLP spans and OTLP log records, else None."""
        if not kafka.joins_logs():
            return None
        return cls(
            tracker, metrics, traffic, NoContentNotice(), wait_s=kafka.otlp_join_wait_s,
            capacity=kafka.otlp_join_max_waiting,
        )  # fmt: skip

    def hold(self, tp: TopicPartition, found: RecordEvents, context: RecordContext, first_part: int) -> None:
        """Hold what a record handed back to wait (its parts numbered from `first_part`), and settle its scored
        calls."""
        now, join, part = self.clock(), self.join, first_part
        out: list[Joined[Held]] = []
        for key in found.scored:
            out += join.settle(key)
        for span in found.waiting_spans:
            out += join.add_span(span, Held(self.tracker.track(tp, context.offset, part), context), now)
            part += 1
        for key, logs in found.waiting_logs.items():
            out += join.add_logs(key, logs, Held(self.tracker.track(tp, context.offset, part), context), now)
            part += 1
        self._release(out)

    def due(self) -> None:
        """Release the calls whose wait has ended."""
        if len(self.join):
            self._release(self.join.due(self.clock()))

    def forget(self, tps: Set[TopicPartition]) -> None:
        """Drop what revoked partitions hold (their records are the next owner's)."""
        self.join.forget(lambda held: held.ticket.tp in tps)
        self.metrics.otlp_join_waiting.set(len(self.join))

    def _release(self, out: list[Joined[Held]]) -> None:
        for joined in out:
            if isinstance(joined, Lonely):
                if joined.records:
                    self.metrics.otlp_unjoined.labels(joined.why).inc(joined.records)
                self._done(joined.tokens)
                continue
            self.metrics.otlp_joined.labels(joined.why).inc()
            span = joined.tokens[0]
            made = joined_call(joined.span, joined.logs, span.context)
            topic = span.context.topic
            for kind, n in made.skipped.items():
                self.metrics.child(self.metrics.otlp_skipped, topic, kind).inc(n)
            for call in made.no_content:
                count_no_content(self.traffic, call)
            if made.no_content:
                self.notice.seen(topic, len(made.no_content))
            if not made.events:
                self._done(joined.tokens)
                continue
            self.tracker.bind(span.ticket, (held.ticket for held in joined.tokens[1:]))
            self.ready.append((made.events[0], span.ticket))
        self.metrics.otlp_join_waiting.set(len(self.join))

    def _done(self, tokens: tuple[Held, ...]) -> None:
        for held in tokens:
            self.tracker.done(held.ticket)


def count_no_content(traffic: TrafficCounter, call: NoContent) -> None:
    """Count a call without content in its segment's traffic (`traffic_counts.no_content`)."""
    at = call.time_unix_nano / 1e9 if call.time_unix_nano else time.time()
    app = call.app[:MAX_ID_CHARS] or "default"  # as an event's app decodes
    traffic.add(at, app, call.model[:MAX_ID_CHARS], call.prompt_version[:MAX_ID_CHARS], "no_content")
