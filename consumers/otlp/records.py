"""One Collector record into the events it holds: each LLM span with content becomes one of the monitor's chat
events and decodes through `consumers.decode`, so an OpenTelemetry event passes the very checks a JSON event passes.
The rest is counted by kind, never dead-lettered: agent, tool and other spans; spans without content; a span that
fails those checks (its siblings are still scored); and a second span of one call (the same response id, from a
second instrumentation). Across records, the store's idempotent inserts keep one row per event id. Only a record
that is no OTLP request at all raises.

With `hold` (the monitor reads both spans and log records), a span without content and the one-message GenAI log
records are handed back to wait for each other (`consumers.otlp.join`) instead of being counted.

A traces record takes a shorter way to the same outcome: a span that is no LLM call is counted by kind from its
attributes alone (`wire.read_spans_if`), and a common LLM span becomes its event without the chat JSON
(`consumers.otlp.span_event`); what that declines is mapped and decoded as above."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import msgspec

from consumers.decode import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_FUTURE_SKEW_S, DecodedEvent, decode_fields
from consumers.feedback import FeedbackOptions
from consumers.otlp.dialects import (
    DEFAULT_OPTIONS,
    DETAILS_EVENT,
    MESSAGE_EVENTS,
    GenAICall,
    MappingOptions,
    NoContent,
    Skipped,
    map_span,
    span_kind,
)
from consumers.otlp.feedback import InvalidFeedback, feedback_of, is_evaluation_result
from consumers.otlp.join import SpanKey
from consumers.otlp.span_event import SpanEvent, span_event
from consumers.otlp.span_keys import SPAN_ID_KEY as SPAN_ID_KEY  # the judged span, in the row's metadata
from consumers.otlp.span_keys import TRACE_ID_KEY as TRACE_ID_KEY
from consumers.otlp.wire import Attributes, Encoding, LogRecord, Span, read_logs, read_spans_if
from schemas.errors import DecodeError
from schemas.feedback import FeedbackEvent

_encode = msgspec.json.Encoder().encode


@dataclass
class RecordEvents:
    """What one record held: its events, in span order, the users' feedback among its log records, and what it
    skipped, by kind (`agent`, `tool`, `no_content`, `duplicate`, `invalid_span:<reason>`, `evaluation`,
    `invalid_feedback:<why>`, ...)."""

    events: list[DecodedEvent] = field(default_factory=list)
    feedback: list[FeedbackEvent] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    dialects: Counter[str] = field(default_factory=Counter)
    no_content: list[NoContent] = field(default_factory=list)  # the calls counted as `no_content`
    # With `hold`: spans without content, message log records by span, and the calls scored (their keys settled)
    waiting_spans: list[Span] = field(default_factory=list)
    waiting_logs: dict[SpanKey, list[LogRecord]] = field(default_factory=dict)
    scored: list[SpanKey] = field(default_factory=list)


@dataclass(frozen=True)
class RecordContext:
    """Where a record came from and the decoder's limits: what every event of it is checked with. Without
    `feedback` options, `gen_ai.evaluation.result` log records are counted as `evaluation`, never read."""

    topic: str
    partition: int
    offset: int
    record_timestamp_ms: int | None
    options: MappingOptions = DEFAULT_OPTIONS
    max_bytes: int = DEFAULT_MAX_EVENT_BYTES
    max_future_skew_s: float | None = DEFAULT_MAX_FUTURE_SKEW_S
    now: datetime | None = None
    feedback: FeedbackOptions | None = None


def decode_traces_record(
    value: bytes | None, encoding: Encoding, context: RecordContext, *, hold: bool = False
) -> RecordEvents:
    """The events of one `ExportTraceServiceRequest` record; raises `DecodeError` only when the record is no OTLP
    traces request in `encoding`."""
    out = RecordEvents()
    seen: set[str] = set()
    for span in read_spans_if(value, encoding, _is_llm):
        if not isinstance(span, Span):  # the attributes of a span that is no LLM call, as map_span skips it
            out.skipped[span_kind(span)] += 1
            continue
        fast = _fast(span, context)
        mapped = map_span(span, (), context.options) if fast is None else fast  # declined: the full mapping
        if hold and isinstance(mapped, NoContent):
            out.waiting_spans.append(span)
        else:
            _add_one(out, mapped, context, seen)
    if hold:
        out.scored = _keys(out.events)
    return out


def _is_llm(attributes: Attributes) -> bool:
    return span_kind(attributes) == "llm"


def _fast(span: Span, context: RecordContext) -> SpanEvent | NoContent | None:
    return span_event(
        span, context.options, record_timestamp_ms=context.record_timestamp_ms, max_bytes=context.max_bytes,
        max_future_skew_s=context.max_future_skew_s, now=context.now,
    )  # fmt: skip


def decode_logs_record(
    value: bytes | None, encoding: Encoding, context: RecordContext, *, hold: bool = False
) -> RecordEvents:
    """The events of one `ExportLogsServiceRequest` record: each `gen_ai.client.inference.operation.details` log
    record holds a whole call (its attributes are the span's, with the content). A one-message GenAI event waits for
    its span with `hold`, else it counts as `unjoined_event`; a `gen_ai.evaluation.result` that is users' feedback
    (`consumers.otlp.feedback`) is read into `feedback`, any other evaluation counts as `evaluation`; other log
    records count as `other`. Raises `DecodeError` only when the record is no OTLP logs request in `encoding`."""
    out = RecordEvents()
    details: list[GenAICall | NoContent | Skipped] = []
    feedback_ids: set[str] = set()
    for log in read_logs(value, encoding):
        name = log.event_name or str(log.attributes.get("event.name") or "")
        if is_evaluation_result(log):
            _add_feedback(out, log, context, feedback_ids)
        elif name == DETAILS_EVENT:
            time = log.time_unix_nano
            span = Span(log.trace_id, log.span_id, name, 0, time, time, log.attributes, (), log.resource, "")
            details.append(map_span(span, (), context.options))
        elif hold and name in MESSAGE_EVENTS and log.trace_id and log.span_id:
            out.waiting_logs.setdefault((log.trace_id, log.span_id), []).append(log)
        else:
            out.skipped["unjoined_event" if name.startswith("gen_ai.") else "other"] += 1
    _add(out, details, context)
    if hold:
        out.scored = _keys(out.events)
    return out


def _add_feedback(out: RecordEvents, log: LogRecord, context: RecordContext, seen: set[str]) -> None:
    found = (
        None
        if context.feedback is None
        else feedback_of(
            log,
            context.feedback,
            record_timestamp_ms=context.record_timestamp_ms,
            max_future_skew_s=context.max_future_skew_s,
            now=context.now,
        )
    )
    if found is None:
        out.skipped["evaluation"] += 1
    elif isinstance(found, InvalidFeedback):
        out.skipped[f"invalid_feedback:{found.why}"] += 1
    elif found.feedback_id in seen:  # one record holding the same evaluation twice: stored and counted once
        out.skipped["duplicate"] += 1
    else:
        seen.add(found.feedback_id)
        out.feedback.append(found)


def decode_otlp_record(
    value: bytes | None, logs: bool, encoding: Encoding, context: RecordContext, *, hold: bool = False
) -> RecordEvents:
    """The events of one record of an OTLP topic (of log records if `logs`, else of spans). A value larger than
    `context.max_bytes` is refused whole as `oversized` (the Collector's own default cap is 1,000,000 bytes)."""
    if value is not None and len(value) > context.max_bytes:
        raise DecodeError("oversized", f"value is {len(value)} bytes, limit {context.max_bytes}")
    if logs:
        return decode_logs_record(value, encoding, context, hold=hold)
    return decode_traces_record(value, encoding, context, hold=hold)


def _keys(events: list[DecodedEvent]) -> list[SpanKey]:
    return [(e.metadata[TRACE_ID_KEY], e.metadata[SPAN_ID_KEY]) for e in events]


def joined_call(span: Span, logs: Iterable[LogRecord], context: RecordContext) -> RecordEvents:
    """The event of a span and the log records joined to it (or its `no_content`), decoded as its own record's."""
    out = RecordEvents()
    _add(out, (map_span(span, logs, context.options),), context)
    return out


def _add(out: RecordEvents, calls: Iterable[GenAICall | NoContent | Skipped], context: RecordContext) -> None:
    seen: set[str] = set()
    for mapped in calls:
        _add_one(out, mapped, context, seen)


def _add_one(
    out: RecordEvents, mapped: GenAICall | SpanEvent | NoContent | Skipped, context: RecordContext, seen: set[str]
) -> None:
    """Count or keep one call; `seen` holds the event ids of the record's calls with content so far."""
    if isinstance(mapped, Skipped):
        out.skipped[mapped.kind] += 1
        return
    if isinstance(mapped, NoContent):
        out.skipped["no_content"] += 1
        out.no_content.append(mapped)
        return
    event_id = mapped.event.event_id if isinstance(mapped, SpanEvent) else mapped.event_id
    if event_id in seen:  # two instrumentations of one call (the SDK's own span and a wrapper's)
        out.skipped["duplicate"] += 1
        return
    seen.add(event_id)
    if isinstance(mapped, SpanEvent):
        event = mapped.event
    else:
        try:
            event = call_event(mapped, context)
        except DecodeError as e:
            out.skipped[f"invalid_span:{e.reason}"] += 1
            return
    out.events.append(event)
    out.dialects[mapped.dialect] += 1


def call_event(call: GenAICall, context: RecordContext) -> DecodedEvent:
    """The call through the monitor's own decoding, as an event of the record `context` names."""
    return decode_fields(
        _as_chat_event(call),
        topic=context.topic,
        partition=context.partition,
        offset=context.offset,
        record_timestamp_ms=context.record_timestamp_ms,
        max_bytes=context.max_bytes,
        max_future_skew_s=context.max_future_skew_s,
        now=context.now,
    )


def _as_chat_event(call: GenAICall) -> bytes:
    """The call as the monitor's chat JSON (`schemas.events.ChatEvent`): its input turns, the conversation so far,
    become the event's history, and its system instructions a system message in front of them, so that decoding
    gives them to the event's `system` as it does a chat event's own."""
    messages = [{"role": m.role, "content": m.text} for m in call.messages]
    if call.system:
        messages.insert(0, {"role": "system", "content": call.system})
    document: dict[str, object] = {
        "event_id": call.event_id,
        "conversation_id": call.conversation_id,
        "app": call.app or None,
        "model": call.model,
        "prompt_version": call.prompt_version,
        "messages": messages,
        # The system instructions are no metadata: as `system` they are capped with the context and stored under
        # the text policy (MONITOR_STORE_TEXT), where metadata values are stored whatever the policy.
        "metadata": {TRACE_ID_KEY: call.trace_id, SPAN_ID_KEY: call.span_id},
    }
    if call.time_unix_nano:
        document["timestamp"] = datetime.fromtimestamp(call.time_unix_nano / 1e9, UTC).isoformat()
    try:
        return _encode(document)
    except UnicodeEncodeError:  # a lone surrogate (OTLP/JSON can carry one): escaped, as a JSON event would carry it,
        return json.dumps(document).encode()  # so decoding replaces it in text and refuses it in an id, as for JSON
