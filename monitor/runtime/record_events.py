"""The events of one Kafka record, by its topic's format: one of the monitor's own JSON events, or those of an
OpenTelemetry export request (its other spans counted by kind, and those without content counted in the traffic and
named once a minute; with a join, handed to it to wait for their log records), and on the feedback topics the users'
feedback a record holds (our JSON feedback object, or OpenTelemetry `gen_ai.evaluation.result` log records). Raises
`DecodeError` for a record to dead-letter."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import import_module
from typing import TYPE_CHECKING, Any

from aiokafka import TopicPartition
from aiokafka.structs import ConsumerRecord

from consumers.decode import DecodedEvent, decode_common, decode_fields
from consumers.feedback import FeedbackOptions, decode_feedback, is_feedback_json
from consumers.otlp.dialects import MappingOptions
from consumers.settings import KafkaSettings, TopicFormat
from monitor.judging.traffic_counts import TrafficCounter
from monitor.runtime.metrics import Metrics
from monitor.runtime.no_content import NoContentNotice
from schemas.errors import DecodeError
from schemas.feedback import FeedbackEvent

if TYPE_CHECKING:
    from monitor.runtime.span_join import SpanJoin


@dataclass(slots=True)
class RecordItems:
    """What one record holds: conversation events (an event's index is its ticket's `part`) and feedback events."""

    events: list[DecodedEvent]
    feedback: list[FeedbackEvent] = field(default_factory=list)


class RecordDecoder:
    """Decodes records for the pipeline, with each topic's format read from the Kafka slice once."""

    def __init__(
        self,
        kafka: KafkaSettings,
        metrics: Metrics,
        traffic: TrafficCounter,
        join: SpanJoin | None = None,
        *,
        feedback_topics: tuple[str, ...] = (),
        feedback: FeedbackOptions | None = None,
    ) -> None:
        self.kafka = kafka
        self.metrics = metrics
        self.traffic = traffic
        self.join = join
        self.no_content = join.notice if join is not None else NoContentNotice()
        self._formats: dict[str, TopicFormat] = {}
        self._options = MappingOptions(kafka.otlp_app_attribute, kafka.otlp_prompt_version_attributes)
        self.feedback_topics = frozenset(feedback_topics)
        self.feedback = feedback or FeedbackOptions(frozenset(), frozenset())
        # The OpenTelemetry reader loads protobuf and opentelemetry-proto (~2 MB resident), which JSON topics never use:
        # it loads here when a topic is OTLP (the first record waits for no import), else never.
        if any(self._format(topic).encoding is not None for topic in (*kafka.topics, *feedback_topics)):
            import_module("consumers.otlp.records")

    def items(self, tp: TopicPartition, record: ConsumerRecord[Any, Any]) -> RecordItems:
        """The record's conversation events and, on a feedback topic, its feedback events."""
        fmt = self._format(tp.topic)
        if fmt.encoding is not None:
            return self._decode(tp, record, fmt)
        kafka = self.kafka
        # A common event is never a feedback object (it has no `type`): the feedback probe, a scan of the value, is
        # for the rest only.
        event = decode_common(
            record.value, topic=tp.topic, partition=tp.partition, offset=record.offset,
            record_timestamp_ms=record.timestamp, max_bytes=kafka.max_event_bytes,
            max_future_skew_s=kafka.max_future_skew_s,
        )  # fmt: skip
        if event is not None:
            return RecordItems([event])
        if is_feedback_json(record.value):
            if tp.topic not in self.feedback_topics:
                raise DecodeError(
                    "invalid_feedback", f"a feedback event on topic {tp.topic}, which is not in MONITOR_FEEDBACK_TOPICS"
                )
            found = decode_feedback(
                record.value, topic=tp.topic, partition=tp.partition, offset=record.offset,
                record_timestamp_ms=record.timestamp, options=self.feedback, max_bytes=kafka.max_event_bytes,
                max_future_skew_s=kafka.max_future_skew_s,
            )  # fmt: skip
            return RecordItems([], [found])
        return self._decode(tp, record, fmt, fast=False)  # declined by the fast path already

    def _format(self, topic: str) -> TopicFormat:
        fmt = self._formats.get(topic)
        if fmt is None:
            fmt = self._formats[topic] = self.kafka.format_of(topic)
        return fmt

    def events(self, tp: TopicPartition, record: ConsumerRecord[Any, Any]) -> list[DecodedEvent]:
        """The record's conversation events as they decode, with no side effect: nothing counted, no feedback, no span
        held for a join (what reading an answer back from Kafka needs)."""
        return self._decode(tp, record, self._format(tp.topic), observe=False).events

    def _decode(
        self,
        tp: TopicPartition,
        record: ConsumerRecord[Any, Any],
        fmt: TopicFormat,
        *,
        observe: bool = True,
        fast: bool = True,
    ) -> RecordItems:
        kafka = self.kafka
        if fmt.encoding is None:
            event = decode_fields(
                record.value, topic=tp.topic, partition=tp.partition, offset=record.offset,
                record_timestamp_ms=record.timestamp, max_bytes=kafka.max_event_bytes,
                max_future_skew_s=kafka.max_future_skew_s, fast=fast,
            )  # fmt: skip
            return RecordItems([event])
        from consumers.otlp import records as otlp  # here, not on import: only OTLP topics need the reader

        reads_feedback = observe and tp.topic in self.feedback_topics
        context = otlp.RecordContext(
            tp.topic, tp.partition, record.offset, record.timestamp, options=self._options,
            max_bytes=kafka.max_event_bytes, max_future_skew_s=kafka.max_future_skew_s,
            feedback=self.feedback if reads_feedback else None,
        )  # fmt: skip
        join = self.join if observe else None
        found = otlp.decode_otlp_record(record.value, fmt.holds == "logs", fmt.encoding, context, hold=join is not None)
        if not observe:
            return RecordItems(found.events)
        for kind, n in found.skipped.items():
            self.metrics.child(self.metrics.otlp_skipped, tp.topic, kind).inc(n)
        if found.no_content:
            from monitor.runtime.span_join import count_no_content  # loads the reader too: OTLP topics only

            for call in found.no_content:
                count_no_content(self.traffic, call)
            self.no_content.seen(tp.topic, len(found.no_content))
        if join is not None:
            join.hold(tp, found, context, first_part=len(found.events))
        return RecordItems(found.events, found.feedback)
