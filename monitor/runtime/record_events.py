"""The events of one Kafka record, by its topic's format: one of the monitor's own JSON events, or those of an
OpenTelemetry export request (its other spans counted by kind, and those without content counted in the traffic and
named once a minute; with a join, handed to it to wait for their log records). Raises `DecodeError` for a record to
dead-letter."""

from __future__ import annotations

from typing import Any

from aiokafka import TopicPartition
from aiokafka.structs import ConsumerRecord

from consumers.decode import DecodedEvent, decode_fields
from consumers.otlp.dialects import MappingOptions
from consumers.otlp.records import RecordContext, decode_otlp_record
from consumers.settings import KafkaSettings, TopicFormat
from monitor.judging.traffic_counts import TrafficCounter
from monitor.runtime.metrics import Metrics
from monitor.runtime.no_content import NoContentNotice
from monitor.runtime.span_join import SpanJoin, count_no_content


class RecordDecoder:
    """Decodes records for the pipeline, with each topic's format read from the Kafka slice once."""

    def __init__(
        self, kafka: KafkaSettings, metrics: Metrics, traffic: TrafficCounter, join: SpanJoin | None = None
    ) -> None:
        self.kafka = kafka
        self.metrics = metrics
        self.traffic = traffic
        self.join = join
        self.no_content = join.notice if join is not None else NoContentNotice()
        self._formats: dict[str, TopicFormat] = {}
        self._options = MappingOptions(kafka.otlp_app_attribute, kafka.otlp_prompt_version_attributes)

    def events(self, tp: TopicPartition, record: ConsumerRecord[Any, Any]) -> list[DecodedEvent]:
        """The record's events, in their order in the record (an event's index is its ticket's `part`)."""
        fmt = self._formats.get(tp.topic)
        if fmt is None:
            fmt = self._formats[tp.topic] = self.kafka.format_of(tp.topic)
        kafka = self.kafka
        if fmt.encoding is None:
            event = decode_fields(
                record.value, topic=tp.topic, partition=tp.partition, offset=record.offset,
                record_timestamp_ms=record.timestamp, max_bytes=kafka.max_event_bytes,
                max_future_skew_s=kafka.max_future_skew_s,
            )  # fmt: skip
            return [event]
        context = RecordContext(
            tp.topic, tp.partition, record.offset, record.timestamp, options=self._options,
            max_bytes=kafka.max_event_bytes, max_future_skew_s=kafka.max_future_skew_s,
        )  # fmt: skip
        join = self.join
        found = decode_otlp_record(record.value, fmt.holds == "logs", fmt.encoding, context, hold=join is not None)
        for kind, n in found.skipped.items():
            self.metrics.child(self.metrics.otlp_skipped, tp.topic, kind).inc(n)
        if found.no_content:
            for call in found.no_content:
                count_no_content(self.traffic, call)
            self.no_content.seen(tp.topic, len(found.no_content))
        if join is not None:
            join.hold(tp, found, context, first_part=len(found.events))
        return found.events
