"""Generated traffic as an OpenTelemetry Collector's Kafka exporter writes it: the events of `traffic` as GenAI spans
(each LLM call inside an agent span, sometimes beside a tool call), many to an `ExportTraceServiceRequest` record,
in one dialect or a mix of all four (`consumers.otlp.dialects`). A malformed event becomes a record that is no OTLP
at all, for the dead-letter topic. Users' feedback on the answers becomes `gen_ai.evaluation.result` log records on a
logs topic (`otlp_outgoing`)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from consumers.otlp.wire import key_values, to_otlp_json
from monitor.devtools.outgoing import Outgoing

Dialect = Literal["gen_ai", "legacy_events", "openllmetry", "openinference"]
DIALECTS: tuple[Dialect, ...] = ("gen_ai", "legacy_events", "openllmetry", "openinference")
NOT_OTLP = b"\x00this record is not an OTLP export request"
_CLIENT, _INTERNAL = Span.SPAN_KIND_CLIENT, Span.SPAN_KIND_INTERNAL


def otlp_records(
    values: Iterable[bytes],
    *,
    encoding: Literal["otlp_proto", "otlp_json"],
    dialect: Dialect | Literal["mixed"] = "mixed",
    per_record: int = 50,
    seed: int = 7,
) -> Iterator[bytes]:
    """Record values holding the events of `values` (the monitor's JSON events) as spans, `per_record` LLM calls to
    a record; `mixed` cycles through the dialects."""
    for record in otlp_outgoing(
        (Outgoing(v) for v in values), encoding=encoding, dialect=dialect, per_record=per_record, seed=seed
    ):
        yield record.value


def otlp_outgoing(
    records: Iterable[Outgoing],
    *,
    encoding: Literal["otlp_proto", "otlp_json"],
    dialect: Dialect | Literal["mixed"] = "mixed",
    per_record: int = 50,
    seed: int = 7,
    evaluations: bool = True,
) -> Iterator[Outgoing]:
    """`otlp_records` for records to send: those for the run's own topic become spans, batched; a record for a topic
    of its own (users' feedback) is sent after the record that holds its answer's span, with `evaluations` a JSON
    feedback object on a generated answer as a `gen_ai.evaluation.result` log record (in an
    `ExportLogsServiceRequest` of its own) parented to the answer's LLM-call span, as Azure AI Foundry emits users'
    feedback; without, as JSON naming the answer as the monitor's OTLP decoder does (its gen_ai.response.id, else
    `otel:<trace>/<span>`)."""
    rng = random.Random(f"{seed}/otlp")
    batch: dict[str, list[Span]] = {}
    held: list[Outgoing] = []  # until the record holding their answers is out
    calls: dict[str, _Call] = {}  # by event id: where each answer's span is
    in_batch = 0
    for i, record in enumerate(records):
        if record.topic is not None:
            held.append(_as_evaluation(record, calls, encoding) if evaluations else _named_as_decoded(record, calls))
            continue
        event = _event(record.value)
        if event is None:
            yield Outgoing(NOT_OTLP)
            continue
        chosen = DIALECTS[i % len(DIALECTS)] if dialect == "mixed" else dialect
        spans = _spans(event, chosen, rng)
        app = str(event.get("app") or "default")
        batch.setdefault(app, []).extend(spans)
        call = spans[-1]
        calls[str(event.get("event_id") or "")] = _Call(call.trace_id, call.span_id, app, chosen in _RESPONSE_ID)
        in_batch += 1
        if in_batch == per_record:
            yield Outgoing(_encode(batch, encoding))
            yield from held
            batch, in_batch, held = {}, 0, []
    if batch:
        yield Outgoing(_encode(batch, encoding))
    yield from held


@dataclass(frozen=True, slots=True)
class _Call:
    trace_id: bytes
    span_id: bytes
    app: str
    has_response_id: bool  # the dialect sets gen_ai.response.id (else the monitor names the answer by its span)


_RESPONSE_ID: frozenset[str] = frozenset({"gen_ai", "openllmetry"})
EVALUATION_EVENT = "gen_ai.evaluation.result"
THUMBS_EVALUATION, RATING_EVALUATION = "user_feedback", "user_rating"  # in the monitor's default sets


def _feedback_call(record: Outgoing, calls: dict[str, _Call]) -> tuple[dict[str, Any], _Call] | None:
    """The JSON feedback object of `record` and the call of the answer it names, when it is one on a known answer."""
    try:
        feedback = json.loads(record.value)
    except ValueError:
        return None
    if not isinstance(feedback, dict) or feedback.get("type") != "feedback":
        return None
    call = calls.get(str(feedback.get("event_id") or ""))
    return None if call is None else (feedback, call)


def _named_as_decoded(record: Outgoing, calls: dict[str, _Call]) -> Outgoing:
    """JSON feedback on an answer whose span carries no gen_ai.response.id, renamed to the id the monitor gives that
    answer (`otel:<trace>/<span>`); anything else as it is."""
    found = _feedback_call(record, calls)
    if found is None or found[1].has_response_id:
        return record
    feedback, call = found
    feedback["event_id"] = f"otel:{call.trace_id.hex()}/{call.span_id.hex()}"
    return Outgoing(json.dumps(feedback).encode(), record.key, record.topic)


def _as_evaluation(record: Outgoing, calls: dict[str, _Call], encoding: Literal["otlp_proto", "otlp_json"]) -> Outgoing:
    """A JSON feedback object on a known answer as an OTLP logs record; anything else as it is."""
    found = _feedback_call(record, calls)
    if found is None:
        return record
    feedback, call = found
    if "rating" in feedback:
        name, score, label = RATING_EVALUATION, float(feedback["rating"]), str(feedback["rating"])
    else:
        up = feedback.get("thumbs") == "up"
        name, score, label = THUMBS_EVALUATION, 1.0 if up else 0.0, "thumbs_up" if up else "thumbs_down"
    attributes: dict[str, Any] = {
        "gen_ai.evaluation.name": name,
        "gen_ai.evaluation.score.value": score,
        "gen_ai.evaluation.score.label": label,
        "gen_ai.evaluation.explanation": feedback.get("comment"),
        "gen_ai.response.id": feedback["event_id"] if call.has_response_id else None,
    }
    log = LogRecord(
        time_unix_nano=_nanos(feedback.get("timestamp")),
        event_name=EVALUATION_EVENT,
        trace_id=call.trace_id,
        span_id=call.span_id,
        attributes=key_values(attributes),
    )
    request = ExportLogsServiceRequest(
        resource_logs=[
            ResourceLogs(
                resource=Resource(attributes=_kvs({"service.name": call.app})),
                scope_logs=[ScopeLogs(log_records=[log])],
            )
        ]
    )
    value = request.SerializeToString() if encoding == "otlp_proto" else to_otlp_json(request)
    return Outgoing(value, record.key, record.topic)


def _event(value: bytes) -> dict[str, Any] | None:
    try:
        event = json.loads(value)
    except ValueError:
        return None
    return event if isinstance(event, dict) and _turns(event) is not None else None


Turn = tuple[str, str]  # role, text


def _turns(event: dict[str, Any]) -> tuple[list[Turn], str] | None:
    """The event's input turns (every message before the last) and its answer (the last message)."""
    if isinstance(event.get("user_message"), str) and isinstance(event.get("response"), str):
        return [("user", event["user_message"])], event["response"]
    messages = event.get("messages")
    if not isinstance(messages, list) or len(messages) < 2:
        return None

    def text(m: Any) -> str:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
        return content if isinstance(content, str) else ""

    inputs = [(str(m.get("role") or "user") if isinstance(m, dict) else "user", text(m)) for m in messages[:-1]]
    return inputs, text(messages[-1])


def _spans(event: dict[str, Any], dialect: Dialect, rng: random.Random) -> list[Span]:
    turns, answer = _turns(event) or ([("user", "")], "")
    trace = rng.getrandbits(128).to_bytes(16, "big")
    agent, call = rng.getrandbits(64).to_bytes(8, "big"), rng.getrandbits(64).to_bytes(8, "big")
    end = _nanos(event.get("timestamp"))
    start = end - 900_000_000
    spans = [
        Span(
            trace_id=trace, span_id=agent, name="invoke_agent assistant", kind=_INTERNAL,
            start_time_unix_nano=start - 100_000_000, end_time_unix_nano=end + 10_000_000,
            attributes=_kvs({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "assistant"}),
        ),
    ]  # fmt: skip
    if rng.random() < 0.3:
        tool = rng.getrandbits(64).to_bytes(8, "big")
        spans.append(
            Span(
                trace_id=trace, span_id=tool, parent_span_id=agent, name="execute_tool order_lookup", kind=_INTERNAL,
                start_time_unix_nano=start - 50_000_000, end_time_unix_nano=start,
                attributes=_kvs({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "order_lookup"}),
            )
        )  # fmt: skip
    attributes, events = _dialect(event, dialect, turns, answer)
    spans.append(
        Span(
            trace_id=trace, span_id=call, parent_span_id=agent, name=f"chat {event.get('model') or 'model'}",
            kind=_CLIENT, start_time_unix_nano=start, end_time_unix_nano=end, attributes=_kvs(attributes),
            events=[Span.Event(name=n, time_unix_nano=end, attributes=_kvs(a)) for n, a in events],
        )
    )  # fmt: skip
    return spans


def _dialect(
    event: dict[str, Any], dialect: Dialect, turns: list[Turn], answer: str
) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    model, version = str(event.get("model") or ""), str(event.get("prompt_version") or "")
    response_id, conversation = str(event.get("event_id") or ""), str(event.get("conversation_id") or "")
    if dialect == "gen_ai":
        inputs = [{"role": role, "parts": [{"type": "text", "content": text}]} for role, text in turns]
        return {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic", "gen_ai.request.model": model,
            "gen_ai.response.model": model, "gen_ai.response.id": response_id, "gen_ai.conversation.id": conversation,
            "gen_ai.prompt.version": version, "gen_ai.input.messages": json.dumps(inputs),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}]
            ),
        }, []  # fmt: skip
    if dialect == "legacy_events":
        message = json.dumps({"role": "assistant", "content": answer})
        return (
            {"gen_ai.operation.name": "chat", "gen_ai.request.model": model, "gen_ai.prompt.version": version},
            [(f"gen_ai.{role}.message", {"content": text}) for role, text in turns]
            + [("gen_ai.choice", {"index": 0, "message": message})],
        )
    if dialect == "openllmetry":
        prompts: dict[str, Any] = {}
        for i, (role, text) in enumerate(turns):
            prompts |= {f"gen_ai.prompt.{i}.role": role, f"gen_ai.prompt.{i}.content": text}
        return {
            "llm.request.type": "chat", "gen_ai.system": "Anthropic", "gen_ai.request.model": model,
            "gen_ai.response.id": response_id, **prompts,
            "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": answer,
            "gen_ai.prompt.version": version,
        }, []  # fmt: skip
    messages: dict[str, Any] = {}
    for i, (role, text) in enumerate(turns):
        messages |= {f"llm.input_messages.{i}.message.role": role, f"llm.input_messages.{i}.message.content": text}
    return {
        "openinference.span.kind": "LLM", "llm.model_name": model, "session.id": conversation,
        "llm.prompt_template.version": version, **messages, "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": answer,
    }, []  # fmt: skip


def _nanos(timestamp: Any) -> int:
    try:
        at = datetime.fromisoformat(str(timestamp).replace("Z", "+00:00"))
    except ValueError:
        at = datetime.now(UTC)
    return int(at.timestamp() * 1e9)


def _kvs(attributes: dict[str, Any]) -> list[KeyValue]:
    return key_values({k: v for k, v in attributes.items() if v != ""})  # an unknown label is left out, not empty


def _encode(batch: dict[str, list[Span]], encoding: Literal["otlp_proto", "otlp_json"]) -> bytes:
    request = ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(attributes=_kvs({"service.name": app})),
                scope_spans=[ScopeSpans(spans=spans)],
            )
            for app, spans in batch.items()
        ]
    )
    return request.SerializeToString() if encoding == "otlp_proto" else to_otlp_json(request)
