"""A Collector traces record decodes into the events of its LLM spans, whatever the GenAI dialect and encoding;
other spans are counted by kind, and only a record that is no OTLP at all is refused."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.trace import Tracer

from consumers.otlp.dialects import DEFAULT_OPTIONS, MappingOptions
from consumers.otlp.records import (
    SPAN_ID_KEY,
    TRACE_ID_KEY,
    RecordContext,
    RecordEvents,
    decode_traces_record,
)
from consumers.otlp.wire import Encoding, read_spans, to_otlp_json
from schemas.errors import DecodeError
from schemas.events import Turn
from tests.consumers.otlp.collector import collector_record, recorded_spans

ENCODINGS: tuple[Encoding, ...] = ("otlp_proto", "otlp_json")
QUESTION, ANSWER = "When did order A17 ship?", "Order A17 shipped on 3 March."
NOW = datetime(2030, 1, 1, tzinfo=UTC)
# What every dialect's call below holds before the judged question, and its system instructions
HELLO, HI = "Hello", "Hi, how can I help?"
HISTORY = (Turn("user", HELLO), Turn("assistant", HI))
SYSTEM = "Be brief."


def _gen_ai(tracer: Tracer) -> None:
    with tracer.start_as_current_span("chat claude") as span:
        span.set_attributes(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "anthropic",
                "gen_ai.request.model": "claude-req",
                "gen_ai.response.model": "claude-resp",
                "gen_ai.response.id": "msg_current",
                "gen_ai.conversation.id": "conv-1",
                "gen_ai.prompt.version": "v7",
                "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be brief."}]),
                "gen_ai.input.messages": json.dumps(
                    [
                        {"role": "user", "parts": [{"type": "text", "content": "Hello"}]},
                        {"role": "assistant", "parts": [{"type": "text", "content": "Hi, how can I help?"}]},
                        {"role": "user", "parts": [{"type": "text", "content": QUESTION}]},
                    ]
                ),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}], "finish_reason": "stop"}]
                ),
            }
        )


def _legacy_events(tracer: Tracer) -> None:
    with tracer.start_as_current_span("chat claude") as span:
        span.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.request.model": "claude-req"})
        span.add_event("gen_ai.system.message", {"content": "Be brief."})
        span.add_event("gen_ai.user.message", {"content": HELLO})
        span.add_event("gen_ai.assistant.message", {"content": HI})
        span.add_event("gen_ai.user.message", {"content": QUESTION})
        span.add_event("gen_ai.choice", {"index": 0, "message": json.dumps({"role": "assistant", "content": ANSWER})})


def _openllmetry(tracer: Tracer) -> None:
    with tracer.start_as_current_span("anthropic.chat") as span:
        span.set_attributes(
            {
                "llm.request.type": "chat",
                "gen_ai.system": "Anthropic",
                "gen_ai.request.model": "claude-req",
                "gen_ai.response.id": "msg_openllmetry",
                "gen_ai.prompt.0.role": "system",
                "gen_ai.prompt.0.content": "Be brief.",
                "gen_ai.prompt.1.role": "user",
                "gen_ai.prompt.1.content": HELLO,
                "gen_ai.prompt.2.role": "assistant",
                "gen_ai.prompt.2.content": HI,
                "gen_ai.prompt.3.role": "user",
                "gen_ai.prompt.3.content": json.dumps([{"type": "text", "text": QUESTION}]),
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.content": ANSWER,
            }
        )


def _openinference(tracer: Tracer) -> None:
    with tracer.start_as_current_span("Messages") as span:
        span.set_attributes(
            {
                "openinference.span.kind": "LLM",
                "llm.model_name": "claude-oi",
                "session.id": "sess-9",
                "llm.prompt_template.version": "t3",
                "llm.input_messages.0.message.role": "system",
                "llm.input_messages.0.message.content": "Be brief.",
                "llm.input_messages.1.message.role": "user",
                "llm.input_messages.1.message.content": HELLO,
                "llm.input_messages.2.message.role": "assistant",
                "llm.input_messages.2.message.contents.0.message_content.type": "text",
                "llm.input_messages.2.message.contents.0.message_content.text": HI,
                "llm.input_messages.3.message.role": "user",
                "llm.input_messages.3.message.contents.0.message_content.type": "text",
                "llm.input_messages.3.message.contents.0.message_content.text": QUESTION,
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": ANSWER,
            }
        )


# dialect: (how its spans are written, the dialect read, model, prompt version, conversation id, or None: trace id)
DIALECTS: dict[str, tuple[Callable[[Tracer], None], str, str, str, str | None]] = {
    "gen_ai": (_gen_ai, "gen_ai", "claude-resp", "v7", "conv-1"),
    "legacy_events": (_legacy_events, "gen_ai_events", "claude-req", "", None),
    "openllmetry": (_openllmetry, "openllmetry", "claude-req", "", None),
    "openinference": (_openinference, "openinference", "claude-oi", "t3", "sess-9"),
}


def _decode(value: bytes, encoding: Encoding, options: MappingOptions = DEFAULT_OPTIONS) -> RecordEvents:
    return decode_traces_record(value, encoding, RecordContext("otlp_spans", 0, 5, None, options=options, now=NOW))


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("dialect", DIALECTS)
def test_each_dialect_and_encoding_gives_the_question_answer_and_labels(dialect: str, encoding: Encoding) -> None:
    """The last user message and the answer, with the app from service.name and the dialect's model, prompt version
    and conversation; the earlier turns are the event's context and the system message its system instructions (not
    metadata)."""
    write, read_as, model, prompt_version, conversation = DIALECTS[dialect]
    with recorded_spans("support-bot") as (provider, exporter):
        tracer = provider.get_tracer("tests")
        write(tracer)
        [finished] = exporter.get_finished_spans()
    out = _decode(collector_record([finished], encoding), encoding)
    [event] = out.events
    trace_id = format(finished.context.trace_id, "032x")
    assert (event.question, event.response) == (QUESTION, ANSWER)
    assert (event.app, event.model, event.prompt_version) == ("support-bot", model, prompt_version)
    assert event.conversation_id == (conversation or trace_id)
    assert (event.context, event.system, event.turn) == (HISTORY, SYSTEM, 1)
    assert event.metadata == {
        TRACE_ID_KEY: trace_id,
        SPAN_ID_KEY: f"{finished.context.span_id:016x}",
    }
    assert out.dialects == {read_as: 1} and not out.skipped
    assert event.event_time == datetime.fromtimestamp(finished.end_time / 1e9, UTC)  # type: ignore[operator]


# A conversation with a tool round trip and a second instruction, in each dialect: the user asks, the assistant only
# calls a tool (no text), the tool answers, the assistant replies, a developer note follows, and the judged question.
TOOL_RESULT, REPLY, NOTE = "Order A17: shipped 3 March.", "It shipped.", "Answer with dates."


def _gen_ai_tools(tracer: Tracer) -> None:
    def text(role: str, content: str) -> dict[str, object]:
        return {"role": role, "parts": [{"type": "text", "content": content}]}

    with tracer.start_as_current_span("chat claude") as span:
        span.set_attributes(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.system_instructions": json.dumps([{"type": "text", "content": SYSTEM}]),
                "gen_ai.input.messages": json.dumps(
                    [
                        text("user", HELLO),
                        {"role": "assistant", "parts": [{"type": "tool_call", "id": "t1", "name": "lookup"}]},
                        {"role": "tool", "parts": [{"type": "text", "content": TOOL_RESULT}]},
                        text("assistant", REPLY),
                        text("system", NOTE),
                        text("user", QUESTION),
                    ]
                ),
                "gen_ai.output.messages": json.dumps([text("assistant", ANSWER)]),
            }
        )


def _legacy_events_tools(tracer: Tracer) -> None:
    with tracer.start_as_current_span("chat claude") as span:
        span.set_attribute("gen_ai.operation.name", "chat")
        span.add_event("gen_ai.system.message", {"content": SYSTEM})
        span.add_event("gen_ai.user.message", {"content": HELLO})
        span.add_event("gen_ai.assistant.message", {"tool_calls": json.dumps([{"id": "t1", "type": "function"}])})
        span.add_event("gen_ai.tool.message", {"content": TOOL_RESULT, "id": "t1"})
        span.add_event("gen_ai.assistant.message", {"content": REPLY})
        span.add_event("gen_ai.system.message", {"content": NOTE})
        span.add_event("gen_ai.user.message", {"content": QUESTION})
        span.add_event("gen_ai.choice", {"index": 0, "message": json.dumps({"role": "assistant", "content": ANSWER})})


def _openllmetry_tools(tracer: Tracer) -> None:
    turns = [
        ("system", SYSTEM), ("user", HELLO), ("assistant", None), ("tool", TOOL_RESULT), ("assistant", REPLY),
        ("system", NOTE), ("user", QUESTION),
    ]  # fmt: skip
    attributes: dict[str, str] = {"llm.request.type": "chat", "gen_ai.completion.0.content": ANSWER}
    for i, (role, content) in enumerate(turns):
        attributes[f"gen_ai.prompt.{i}.role"] = role
        if content is None:
            attributes[f"gen_ai.prompt.{i}.tool_calls.0.name"] = "lookup"
        else:
            attributes[f"gen_ai.prompt.{i}.content"] = content
    with tracer.start_as_current_span("anthropic.chat") as span:
        span.set_attributes(attributes)


def _openinference_tools(tracer: Tracer) -> None:
    turns = [
        ("system", SYSTEM), ("user", HELLO), ("assistant", None), ("tool", TOOL_RESULT), ("assistant", REPLY),
        ("system", NOTE), ("user", QUESTION),
    ]  # fmt: skip
    attributes: dict[str, str] = {"openinference.span.kind": "LLM", "llm.output_messages.0.message.content": ANSWER}
    for i, (role, content) in enumerate(turns):
        attributes[f"llm.input_messages.{i}.message.role"] = role
        if content is None:
            attributes[f"llm.input_messages.{i}.message.tool_calls.0.tool_call.function.name"] = "lookup"
        else:
            attributes[f"llm.input_messages.{i}.message.content"] = content
    with tracer.start_as_current_span("Messages") as span:
        span.set_attributes(attributes)


TOOL_DIALECTS: dict[str, Callable[[Tracer], None]] = {
    "gen_ai": _gen_ai_tools,
    "gen_ai_events": _legacy_events_tools,
    "openllmetry": _openllmetry_tools,
    "openinference": _openinference_tools,
}


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("dialect", TOOL_DIALECTS)
def test_each_dialect_s_history_keeps_tool_results_and_every_system_message(dialect: str, encoding: Encoding) -> None:
    """The tool's result is a context turn, the assistant turn that only called the tool (no text) is left out, and
    both system messages (the instructions and a later note) are the event's system instructions."""
    with recorded_spans() as (provider, exporter):
        TOOL_DIALECTS[dialect](provider.get_tracer("tests"))
        spans = exporter.get_finished_spans()
    out = _decode(collector_record(spans, encoding), encoding)
    [event] = out.events
    assert out.dialects == {dialect: 1}
    assert (event.question, event.response) == (QUESTION, ANSWER)
    assert event.context == (Turn("user", HELLO), Turn("tool", TOOL_RESULT), Turn("assistant", REPLY))
    assert (event.system, event.turn) == (f"{SYSTEM}\n\n{NOTE}", 1)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_the_event_id_is_the_response_id_else_the_trace_and_span_ids(encoding: Encoding) -> None:
    """A re-delivered span gets the same id: the response id when the span has one, else its trace and span ids."""
    with recorded_spans() as (provider, exporter):
        tracer = provider.get_tracer("tests")
        _gen_ai(tracer)
        _legacy_events(tracer)
        with_id, without_id = exporter.get_finished_spans()
    out = _decode(collector_record([with_id, without_id], encoding), encoding)
    assert [e.event_id for e in out.events] == [
        "msg_current",
        f"otel:{without_id.context.trace_id:032x}/{without_id.context.span_id:016x}",
    ]


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_agent_tool_and_other_spans_are_counted_by_kind_and_their_llm_sibling_scored(encoding: Encoding) -> None:
    """In a batch of an agent, a tool call, a chain, an HTTP span, an unknown operation, a span without content and
    an LLM call, only the call becomes an event; the rest are counted by kind (a fixed set of labels)."""
    with recorded_spans() as (provider, exporter):
        tracer = provider.get_tracer("tests")
        with tracer.start_as_current_span("invoke_agent helper") as agent:
            agent.set_attribute("gen_ai.operation.name", "invoke_agent")
            with tracer.start_as_current_span("execute_tool lookup") as tool:
                tool.set_attribute("gen_ai.operation.name", "execute_tool")
            with tracer.start_as_current_span("chain") as chain:
                chain.set_attribute("openinference.span.kind", "CHAIN")
            with tracer.start_as_current_span("GET /orders"):
                pass
            with tracer.start_as_current_span("made up") as odd:  # any other value: one bounded label
                odd.set_attribute("gen_ai.operation.name", "user-chosen-" + "x" * 40)
            with tracer.start_as_current_span("chat claude") as quiet:  # content capture off: no text at all
                quiet.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.request.model": "claude-req"})
            _gen_ai(tracer)
        spans = exporter.get_finished_spans()
    out = _decode(collector_record(spans, encoding), encoding)
    assert [e.event_id for e in out.events] == ["msg_current"]
    assert out.skipped == {
        "invoke_agent": 1, "execute_tool": 1, "chain": 1, "other": 1, "other_genai": 1, "no_content": 1
    }  # fmt: skip


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_one_span_that_fails_the_event_checks_is_counted_and_its_siblings_scored(encoding: Encoding) -> None:
    """A span whose model name is no valid label is skipped as `invalid_span:invalid_event`, not the whole record."""
    with recorded_spans() as (provider, exporter):
        tracer = provider.get_tracer("tests")
        with tracer.start_as_current_span("chat claude") as bad:
            bad.set_attributes(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": "x" * 10_000,
                    "gen_ai.prompt.0.role": "user",
                    "gen_ai.prompt.0.content": QUESTION,
                    "gen_ai.completion.0.content": ANSWER,
                }
            )
        _openinference(tracer)
        spans = exporter.get_finished_spans()
    out = _decode(collector_record(spans, encoding), encoding)
    assert [e.model for e in out.events] == ["claude-oi"]
    assert out.skipped == {"invalid_span:invalid_event": 1}


def test_otlp_json_ids_are_hex_and_match_the_protobuf_record() -> None:
    """OTLP/JSON writes ids as hex, which the reader keeps (protobuf's own JSON parser would read them as base64)."""
    with recorded_spans() as (provider, exporter):
        tracer = provider.get_tracer("tests")
        _legacy_events(tracer)
        spans = exporter.get_finished_spans()
    [from_json] = read_spans(collector_record(spans, "otlp_json"), "otlp_json")
    [from_proto] = read_spans(collector_record(spans, "otlp_proto"), "otlp_proto")
    assert from_json == from_proto
    assert from_json.trace_id == f"{spans[0].context.trace_id:032x}"
    assert from_json.span_id == f"{spans[0].context.span_id:016x}"


def test_the_app_and_prompt_version_attributes_can_be_configured() -> None:
    """A configured app attribute wins over service.name, and the prompt-version list is searched in its order."""
    with recorded_spans("gateway") as (provider, exporter):
        tracer = provider.get_tracer("tests")
        _gen_ai(tracer)
        [span] = exporter.get_finished_spans()
    options = MappingOptions(
        app_attribute="gen_ai.provider.name", prompt_version_attributes=("nope", "gen_ai.prompt.version")
    )
    [event] = _decode(collector_record([span], "otlp_proto"), "otlp_proto", options=options).events
    assert (event.app, event.prompt_version) == ("anthropic", "v7")


@pytest.mark.parametrize(
    ("encoding", "value", "reason"),
    [
        ("otlp_proto", b"", "empty_value"),
        ("otlp_proto", b"\xff\xff\xff\xff", "invalid_otlp"),
        ("otlp_json", b"{not json", "invalid_json"),
        ("otlp_json", b'{"resourceSpans": {}}', "invalid_otlp"),
        ("otlp_json", b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}', "invalid_otlp"),
        ("otlp_json", b"\xff", "not_utf8"),
    ],
)
def test_a_record_that_is_no_otlp_request_is_a_decode_error(encoding: Encoding, value: bytes, reason: str) -> None:
    """Bytes that are no export request in the topic's encoding are refused with a stable reason (dead-lettered)."""
    with pytest.raises(DecodeError) as e:
        _decode(value, encoding)
    assert e.value.reason == reason


def test_the_monitor_s_otlp_json_writer_matches_the_sdk_s_encoder() -> None:
    """`to_otlp_json` of a protobuf request reads back as the SDK's own OTLP/JSON encoding of the same spans does."""
    with recorded_spans() as (provider, exporter):
        tracer = provider.get_tracer("tests")
        _legacy_events(tracer)
        _openinference(tracer)
        spans = exporter.get_finished_spans()
    request = ExportTraceServiceRequest.FromString(collector_record(spans, "otlp_proto"))
    ours = read_spans(to_otlp_json(request), "otlp_json")
    assert ours == read_spans(collector_record(spans, "otlp_json"), "otlp_json")
    assert json.loads(to_otlp_json(request))["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] == (
        f"{spans[0].context.trace_id:032x}"
    )
