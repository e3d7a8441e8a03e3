"""One Collector traces record into the events it holds: each LLM span with content becomes one of the monitor's
chat events and decodes through `consumers.decode`, so an OpenTelemetry event passes the very checks a JSON event
passes. The rest is counted by kind, never dead-lettered: agent, tool and other spans; spans without content; a span
that fails those checks (its siblings are still scored); and a second span of one call (the same response id, from
a second instrumentation). Across records, the store's idempotent inserts keep one row per event id. Only a record
that is no OTLP request at all raises."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import msgspec

from consumers.decode import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_FUTURE_SKEW_S, DecodedEvent, decode_fields
from consumers.otlp.dialects import DEFAULT_OPTIONS, DETAILS_EVENT, GenAICall, MappingOptions, Skipped, map_span
from consumers.otlp.wire import Encoding, LogRecord, Span, read_logs, read_spans
from schemas.errors import DecodeError

SYSTEM_METADATA_KEY = "gen_ai.system_instructions"
TRACE_ID_KEY, SPAN_ID_KEY = "otel.trace_id", "otel.span_id"  # the judged span, in the row's metadata
_encode = msgspec.json.Encoder().encode


@dataclass
class RecordEvents:
    """What one record held: its events, in span order, and the spans it skipped, by kind (`agent`, `tool`,
    `no_content`, `duplicate`, `invalid_span:<reason>`, ...)."""

    events: list[DecodedEvent] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    dialects: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True)
class RecordContext:
    """Where a record came from and the decoder's limits: what every event of it is checked with."""

    topic: str
    partition: int
    offset: int
    record_timestamp_ms: int | None
    options: MappingOptions = DEFAULT_OPTIONS
    max_bytes: int = DEFAULT_MAX_EVENT_BYTES
    max_future_skew_s: float | None = DEFAULT_MAX_FUTURE_SKEW_S
    now: datetime | None = None


def decode_traces_record(
    value: bytes | None,
    encoding: Encoding,
    context: RecordContext,
    logs_for: Callable[[Span], Iterable[LogRecord]] = lambda _span: (),
) -> RecordEvents:
    """The events of one `ExportTraceServiceRequest` record, with content from the spans or from the log records
    `logs_for` joins to them; raises `DecodeError` only when the record is no OTLP traces request in `encoding`."""
    spans = read_spans(value, encoding)
    return _events((map_span(span, logs_for(span), context.options) for span in spans), context)


def decode_logs_record(value: bytes | None, encoding: Encoding, context: RecordContext) -> RecordEvents:
    """The events of one `ExportLogsServiceRequest` record: each `gen_ai.client.inference.operation.details` log
    record holds a whole call (its attributes are the span's, with the content). Other GenAI events hold one message
    each and are counted as `unjoined_event`; other log records as `other`. Raises `DecodeError` only when the
    record is no OTLP logs request in `encoding`."""
    return _events((_map_log(log, context.options) for log in read_logs(value, encoding)), context)


def decode_otlp_record(value: bytes | None, logs: bool, encoding: Encoding, context: RecordContext) -> RecordEvents:
    """The events of one record of an OTLP topic (of log records if `logs`, else of spans). A value larger than
    `context.max_bytes` is refused whole as `oversized` (the Collector's own default cap is 1,000,000 bytes)."""
    if value is not None and len(value) > context.max_bytes:
        raise DecodeError("oversized", f"value is {len(value)} bytes, limit {context.max_bytes}")
    if logs:
        return decode_logs_record(value, encoding, context)
    return decode_traces_record(value, encoding, context)


def _map_log(log: LogRecord, options: MappingOptions) -> GenAICall | Skipped:
    name = log.event_name or str(log.attributes.get("event.name") or "")
    if name != DETAILS_EVENT:
        return Skipped("unjoined_event" if name.startswith("gen_ai.") else "other")
    time = log.time_unix_nano
    span = Span(log.trace_id, log.span_id, name, 0, time, time, log.attributes, (), log.resource, "")
    return map_span(span, (), options)


def _events(calls: Iterable[GenAICall | Skipped], context: RecordContext) -> RecordEvents:
    out = RecordEvents()
    seen: set[str] = set()
    for mapped in calls:
        if isinstance(mapped, Skipped):
            out.skipped[mapped.kind] += 1
            continue
        if mapped.event_id in seen:  # two instrumentations of one call (the SDK's own span and a wrapper's)
            out.skipped["duplicate"] += 1
            continue
        seen.add(mapped.event_id)
        try:
            event = decode_fields(
                _as_chat_event(mapped),
                topic=context.topic,
                partition=context.partition,
                offset=context.offset,
                record_timestamp_ms=context.record_timestamp_ms,
                max_bytes=context.max_bytes,
                max_future_skew_s=context.max_future_skew_s,
                now=context.now,
            )
        except DecodeError as e:
            out.skipped[f"invalid_span:{e.reason}"] += 1
            continue
        out.events.append(event)
        out.dialects[mapped.dialect] += 1
    return out


def _as_chat_event(call: GenAICall) -> bytes:
    """The call as the monitor's chat JSON (`schemas.events.ChatEvent`)."""
    document: dict[str, object] = {
        "event_id": call.event_id,
        "conversation_id": call.conversation_id,
        "app": call.app or None,
        "model": call.model,
        "prompt_version": call.prompt_version,
        "messages": [{"role": m.role, "content": m.text} for m in call.messages],
    }
    if call.time_unix_nano:
        document["timestamp"] = datetime.fromtimestamp(call.time_unix_nano / 1e9, UTC).isoformat()
    metadata = {TRACE_ID_KEY: call.trace_id, SPAN_ID_KEY: call.span_id}
    if call.system:
        metadata[SYSTEM_METADATA_KEY] = call.system
    document["metadata"] = metadata
    return _encode(document)
