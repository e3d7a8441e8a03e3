"""Spans as an OpenTelemetry Collector's Kafka exporter writes them: finished SDK spans, one whole export request per
record, through the SDK's own OTLP encoders (protobuf, and OTLP/JSON)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from opentelemetry.exporter.otlp.json.common._log_encoder import encode_logs as encode_logs_json
from opentelemetry.exporter.otlp.json.common.trace_encoder import encode_spans as encode_json
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs as encode_logs_proto
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as encode_proto
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from consumers.otlp.wire import Encoding


@contextmanager
def recorded_spans(service: str = "support-bot") -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """A tracer provider whose resource names `service`, and the exporter that keeps its finished spans."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        yield provider, exporter
    finally:
        provider.shutdown()


@contextmanager
def recorded_logs(service: str = "support-bot") -> Iterator[tuple[LoggerProvider, InMemoryLogRecordExporter]]:
    """A logger provider whose resource names `service`, and the exporter that keeps its emitted log records."""
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=Resource.create({"service.name": service}))
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    try:
        yield provider, exporter
    finally:
        provider.shutdown()


def collector_logs_record(logs: Sequence[ReadableLogRecord], encoding: Encoding) -> bytes:
    """One Kafka record value holding all `logs`, as the Collector's Kafka exporter writes its `otlp_logs` topic."""
    if encoding == "otlp_proto":
        return encode_logs_proto(logs).SerializeToString()
    return encode_logs_json(logs).to_json().encode()


def collector_record(spans: Sequence[ReadableSpan], encoding: Encoding) -> bytes:
    """One Kafka record value holding all `spans`, as the Collector's Kafka exporter writes it in `encoding`."""
    if encoding == "otlp_proto":
        return encode_proto(spans).SerializeToString()
    return encode_json(spans).to_json().encode()
