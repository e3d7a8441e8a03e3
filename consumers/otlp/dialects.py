"""Which spans are LLM calls, and what each GenAI dialect calls their fields: a pure mapping from a `Span` (and the
log records joined to it) to a `GenAICall`, or to the reason it is skipped.

Precedence, first match wins, field by field:

    content    gen_ai.input.messages / gen_ai.output.messages (current semantic conventions; on the span or in a
               gen_ai.client.inference.operation.details log record)
               > legacy events (gen_ai.user.message, gen_ai.choice, gen_ai.content.prompt / .completion)
               > OpenLLMetry (gen_ai.prompt.{i}.*, gen_ai.completion.{i}.*)
               > OpenInference (llm.input_messages.{i}.message.*, llm.output_messages.{i}.message.*)
    kind       gen_ai.operation.name > openinference.span.kind > llm.request.type
    event id   gen_ai.response.id > trace id and span id (a re-delivered span scores once)
    conversation  gen_ai.conversation.id > session.id > the trace id
    app        the configured attribute (span, then resource) > service.name
    model      gen_ai.response.model > gen_ai.request.model > llm.model_name
    prompt version  the configured attributes, in order (span, then resource)"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:  # the settings read this module's defaults; the protobuf modules load only with the reader
    from consumers.otlp.wire import Attributes, LogRecord, Span

LLM_OPERATIONS = frozenset({"chat", "generate_content", "text_completion"})
DEFAULT_PROMPT_VERSION_ATTRIBUTES = ("gen_ai.prompt.version", "llm.prompt_template.version", "gen_ai.agent.version")
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
# Legacy GenAI events that hold one message each: as log records they wait to be joined to their span.
MESSAGE_EVENTS = frozenset(
    {"gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message", "gen_ai.choice"}
)
_OPENLLMETRY_TYPES = {"chat": "chat", "completion": "text_completion"}
_INDEXED = re.compile(r"^(?P<prefix>.+?)\.(?P<i>\d+)\.(?P<rest>.+)$")


@dataclass(frozen=True)
class MappingOptions:
    """What the operator configures: the attribute naming the app (else `service.name`) and the prompt-version
    attributes, looked up in order."""

    app_attribute: str | None = None
    prompt_version_attributes: Sequence[str] = DEFAULT_PROMPT_VERSION_ATTRIBUTES


class Message(msgspec.Struct, frozen=True, gc=False):  # a struct: made per message of every call, cheaper to build
    """One turn: its role and its text parts joined."""

    role: str
    text: str


@dataclass(frozen=True)
class GenAICall:
    """An LLM call's fields, before the monitor's own validation."""

    event_id: str
    conversation_id: str
    trace_id: str  # of the span that recorded the call (hex), kept so a published score can point at it
    span_id: str
    time_unix_nano: int
    app: str
    model: str
    prompt_version: str
    system: str  # the system instructions, '' when the call has none
    messages: tuple[Message, ...]  # the input turns (the conversation so far), then the first output turn
    dialect: str


class NoContent(msgspec.Struct, frozen=True, gc=False):  # a struct: made for every LLM span, cheaper to build
    """An LLM call recorded without its text (content capture is off): what it can still be counted under."""

    trace_id: str
    span_id: str
    time_unix_nano: int
    app: str
    model: str
    prompt_version: str


@dataclass(frozen=True)
class Skipped:
    """A span that is not scored: `kind` is a stable label (`agent`, `tool`, `no_content`, ...)."""

    kind: str


# The kinds a skipped span is counted under (a metric label, so a fixed set): the GenAI operations and OpenInference
# span kinds that are not an LLM call; any other value of those attributes counts as `other_genai`.
SKIPPED_KINDS = frozenset(
    {
        "embeddings", "execute_tool", "create_agent", "invoke_agent", "invoke_workflow", "retrieval",
        "chain", "tool", "agent", "retriever", "reranker", "embedding", "guardrail", "evaluator", "prompt",
    }
)  # fmt: skip


def span_kind(attributes: Attributes) -> str:
    """The span's GenAI kind: `llm` for a scorable call, else one of `SKIPPED_KINDS`, `other_genai`, or `other` for
    a span that is no GenAI span."""
    operation = attributes.get("gen_ai.operation.name")
    if isinstance(operation, str) and operation:
        return "llm" if operation in LLM_OPERATIONS else _skipped(operation)
    openinference = attributes.get("openinference.span.kind")
    if isinstance(openinference, str) and openinference:
        return "llm" if openinference.upper() == "LLM" else _skipped(openinference.lower())
    request_type = attributes.get("llm.request.type")
    if isinstance(request_type, str) and request_type:
        return "llm" if request_type in _OPENLLMETRY_TYPES else _skipped(request_type)
    return "other"


def _skipped(kind: str) -> str:
    return kind if kind in SKIPPED_KINDS else "other_genai"


DEFAULT_OPTIONS = MappingOptions()


def map_span(
    span: Span, logs: Iterable[LogRecord] = (), options: MappingOptions = DEFAULT_OPTIONS
) -> GenAICall | NoContent | Skipped:
    """The call a span records, with content from its attributes, its events or the log records joined to it."""
    kind = span_kind(span.attributes)
    if kind != "llm":
        return Skipped(kind)
    header = call_header(span, options)
    found = _content(span, list(logs))
    if found is None:
        return header
    dialect, system, messages = found
    event_id, conversation_id = call_ids(span)
    return GenAICall(
        event_id=event_id,
        conversation_id=conversation_id,
        trace_id=span.trace_id,
        span_id=span.span_id,
        time_unix_nano=header.time_unix_nano,
        app=header.app,
        model=header.model,
        prompt_version=header.prompt_version,
        system=system,
        messages=messages,
        dialect=dialect,
    )


def call_ids(span: Span) -> tuple[str, str]:
    """The event id and the conversation id of the call a span records."""
    a, trace = span.attributes, span.trace_id
    return (
        _text(a.get("gen_ai.response.id")) or f"otel:{trace}/{span.span_id}",
        _text(a.get("gen_ai.conversation.id")) or _text(a.get("session.id")) or trace,
    )


def call_header(span: Span, options: MappingOptions) -> NoContent:
    """What a span says about its call besides the content."""
    a = span.attributes
    return NoContent(
        trace_id=span.trace_id,
        span_id=span.span_id,
        time_unix_nano=span.end_time_unix_nano or span.start_time_unix_nano,
        app=_lookup((options.app_attribute,) if options.app_attribute else (), a, span.resource)
        or _text(span.resource.get("service.name")),
        model=_text(a.get("gen_ai.response.model"))
        or _text(a.get("gen_ai.request.model"))
        or _text(a.get("llm.model_name")),
        prompt_version=_lookup(options.prompt_version_attributes, a, span.resource),
    )


def _lookup(names: Iterable[str], *scopes: Mapping[str, Any]) -> str:
    for name in names:
        for scope in scopes:
            if value := _text(scope.get(name)):
                return value
    return ""


def _content(span: Span, logs: list[LogRecord]) -> tuple[str, str, tuple[Message, ...]] | None:
    """(dialect, system instructions, messages) from the first dialect that has both a question and an answer."""
    for dialect, read in (
        ("gen_ai", _current),
        ("gen_ai_events", _legacy_events),
        ("openllmetry", _openllmetry),
        ("openinference", _openinference),
    ):
        got = read(span, logs)
        if got is not None:
            system, inputs, outputs = got
            if any(m.role == "user" and m.text.strip() for m in inputs) and outputs:
                return dialect, system, (*inputs, outputs[0])
    return None


Read = tuple[str, list[Message], list[Message]]  # system instructions, input turns, output turns


def _current(span: Span, logs: list[LogRecord]) -> Read | None:
    sources: list[Attributes] = [span.attributes]
    for log in logs:  # content in the details event: as attributes, or (older util-genai) in a map body
        if log.event_name == DETAILS_EVENT or log.attributes.get("event.name") == DETAILS_EVENT:
            sources.append(log.attributes)
            if isinstance(log.body, dict):
                sources.append(log.body)
    for a in sources:
        inputs = semconv_messages(_maybe_json(a.get("gen_ai.input.messages")))
        outputs = semconv_messages(_maybe_json(a.get("gen_ai.output.messages")))
        if inputs or outputs:
            return semconv_system(a.get("gen_ai.system_instructions")), inputs, outputs
    return None


def semconv_messages(value: Any) -> list[Message]:
    """`[{role, parts: [{type: text, content}]}]`, structured (a JSON string parsed already)."""
    if not isinstance(value, list):
        return []
    out = []
    for m in value:
        if isinstance(m, dict) and isinstance(m.get("role"), str):
            out.append(Message(m["role"], _parts_text(m.get("parts"))))
    return out


def semconv_system(value: Any) -> str:
    """The system instructions: a string, or text parts (structured or as a JSON string)."""
    value = _maybe_json(value)
    if isinstance(value, str):
        return value
    return _parts_text(value)


def _parts_text(parts: Any) -> str:
    if isinstance(parts, str):
        return parts
    if not isinstance(parts, list):
        return ""
    texts = []
    for p in parts:
        if isinstance(p, dict) and p.get("type") == "text":
            text = p.get("content", p.get("text"))
            if isinstance(text, str):
                texts.append(text)
    return "\n".join(texts)


# Where the dialects after the current one keep content on a span: span events of these names, and indexed attributes
# (`prefix.{i}.rest`) of these prefixes
LEGACY_CONTENT_EVENTS = frozenset({*MESSAGE_EVENTS, "gen_ai.content.prompt", "gen_ai.content.completion"})
_INDEXED_PREFIXES = ("gen_ai.prompt", "gen_ai.completion", "llm.input_messages", "llm.output_messages")
_INDEXED_STARTS = tuple(prefix + "." for prefix in _INDEXED_PREFIXES)


def later_dialect_content(span: Span) -> bool:
    """Whether the span has anything a dialect after the current one reads content from (a legacy content event, an
    indexed message attribute): False means only `gen_ai.input.messages` / `.output.messages` can give it content."""
    if any(e.name in LEGACY_CONTENT_EVENTS for e in span.events):
        return True
    a = span.attributes
    return any(
        key.startswith(_INDEXED_STARTS) and (m := _INDEXED.match(key)) is not None and m["prefix"] in _INDEXED_PREFIXES
        for key in a
    )


def _legacy_events(span: Span, logs: list[LogRecord]) -> Read | None:
    """The GenAI events of semantic conventions before 1.37: on the span, or as log records joined to it."""
    events = [(e.name, e.attributes, None) for e in span.events]
    events += [(log.event_name or _text(log.attributes.get("event.name")), log.attributes, log.body) for log in logs]
    system: list[str] = []
    inputs: list[Message] = []
    outputs: list[Message] = []
    for name, attributes, body in events:
        fields = body if isinstance(body, dict) else attributes
        if name in _LEGACY_MESSAGE_ROLES:
            role = _LEGACY_MESSAGE_ROLES[name]
            text = _content_text(fields.get("content"))
            if role == "system":
                system.append(text)
            else:
                inputs.append(Message(role, text))
        elif name == "gen_ai.choice":
            message = _maybe_json(fields.get("message"))
            if isinstance(message, dict):
                outputs.append(Message(str(message.get("role") or "assistant"), _content_text(message.get("content"))))
        elif name == "gen_ai.content.prompt":
            inputs += _role_content_list(attributes.get("gen_ai.prompt"))
        elif name == "gen_ai.content.completion":
            outputs += _role_content_list(attributes.get("gen_ai.completion"))
    if not inputs and not outputs:
        return None
    return _joined(system), inputs, outputs


# The legacy events of one input message each, by the role they stand for
_LEGACY_MESSAGE_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def _joined(system: list[str]) -> str:
    """Several system messages (a prompt and a later instruction) as one text, as a chat event's are joined."""
    return "\n\n".join(text for text in system if text.strip())


def _role_content_list(value: Any) -> list[Message]:
    value = _maybe_json(value)
    if not isinstance(value, list):
        return []
    return [
        Message(str(m.get("role") or "assistant"), _content_text(m.get("content")))
        for m in value
        if isinstance(m, dict)
    ]


def _content_text(value: Any) -> str:
    """A message content: a string, or a list of typed blocks (Anthropic's `{type: text, text}` among them)."""
    value = _maybe_json(value) if isinstance(value, str) and value[:1] == "[" else value
    if isinstance(value, str):
        return value
    return _parts_text(value)


def _indexed(attributes: Attributes, prefix: str) -> list[dict[str, Any]]:
    """`prefix.{i}.rest` attributes gathered into one dict per index, in index order."""
    turns: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if key.startswith(prefix + ".") and (m := _INDEXED.match(key)) and m["prefix"] == prefix:
            turns.setdefault(int(m["i"]), {})[m["rest"]] = value
    return [turns[i] for i in sorted(turns)]


def _openllmetry(span: Span, logs: list[LogRecord]) -> Read | None:
    a = span.attributes
    system: list[str] = []
    inputs: list[Message] = []
    outputs: list[Message] = []
    for turn in _indexed(a, "gen_ai.prompt"):
        role, text = str(turn.get("role") or "user"), _content_text(turn.get("content"))
        if role == "system":
            system.append(text)
        else:
            inputs.append(Message(role, text))
    for turn in _indexed(a, "gen_ai.completion"):
        outputs.append(Message(str(turn.get("role") or "assistant"), _content_text(turn.get("content"))))
    if not inputs and not outputs:
        return None
    return _joined(system), inputs, outputs


def _openinference(span: Span, logs: list[LogRecord]) -> Read | None:
    a = span.attributes
    system: list[str] = []
    inputs: list[Message] = []
    outputs: list[Message] = []
    for turn in _indexed(a, "llm.input_messages"):
        role, text = str(turn.get("message.role") or "user"), _openinference_text(turn)
        if role == "system":
            system.append(text)
        else:
            inputs.append(Message(role, text))
    for turn in _indexed(a, "llm.output_messages"):
        outputs.append(Message(str(turn.get("message.role") or "assistant"), _openinference_text(turn)))
    if not inputs and not outputs:
        return None
    return _joined(system), inputs, outputs


def _openinference_text(turn: dict[str, Any]) -> str:
    if isinstance(turn.get("message.content"), str):
        return str(turn["message.content"])
    parts = _indexed(turn, "message.contents")  # message.contents.{j}.message_content.{type,text}
    return "\n".join(
        str(p.get("message_content.text"))
        for p in parts
        if p.get("message_content.type", "text") == "text" and isinstance(p.get("message_content.text"), str)
    )


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return value
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)
