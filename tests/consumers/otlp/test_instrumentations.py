"""Spans from real instrumentation code: the Anthropic SDK's own spans, OpenLLMetry and OpenInference, each around a
real `anthropic` client calling the suite's fake Messages API, encoded as the Collector writes them and decoded."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import anthropic
import pytest
from anthropic.types import AssistantMessageParam, MessageParam, UserMessageParam
from opentelemetry.sdk.trace import TracerProvider

from consumers.otlp.join import LogJoin, Lonely, Met
from consumers.otlp.records import (
    RecordContext,
    decode_logs_record,
    decode_traces_record,
    joined_call,
)
from consumers.otlp.wire import Encoding
from schemas.events import Turn
from tests.consumers.otlp.collector import collector_logs_record, collector_record, recorded_logs, recorded_spans
from tests.fake_messages_api import API_KEY, FakeMessagesAPI, Reply

QUESTION, ANSWER = "When did order A17 ship?", "Order A17 shipped on 3 March."
CONTEXT = RecordContext("otlp_spans", 0, 0, None)


@contextmanager
def _instrumented(instrumentor: Any, provider: TracerProvider) -> Iterator[None]:
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield
    finally:
        instrumentor.uninstrument()


def _openllmetry(provider: TracerProvider) -> AbstractContextManager[None]:
    from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor

    return _instrumented(AnthropicInstrumentor(), provider)


def _openinference(provider: TracerProvider) -> AbstractContextManager[None]:
    from openinference.instrumentation.anthropic import AnthropicInstrumentor

    return _instrumented(AnthropicInstrumentor(), provider)


def _sdk_off(_provider: TracerProvider) -> AbstractContextManager[None]:
    return nullcontext()


# instrumentation: (how it is switched on, the client's own OpenTelemetry option, the dialect read)
Client = Callable[[TracerProvider], Any]
SOURCES: dict[str, tuple[Callable[[TracerProvider], AbstractContextManager[None]], Client, str]] = {
    "anthropic_sdk": (
        _sdk_off,
        lambda p: {"tracer_provider": p, "traces": {"content_mode": "content"}, "conversation_id": "conv-42"},
        "gen_ai",
    ),
    "openllmetry": (_openllmetry, lambda _p: False, "gen_ai"),
    "openinference": (_openinference, lambda _p: False, "openinference"),
}


def _call(api: FakeMessagesAPI, provider: TracerProvider, source: str, history: Sequence[Turn] = ()) -> str:
    switch, option, _ = SOURCES[source]
    messages: list[MessageParam] = [
        UserMessageParam(role="user", content=t.text)
        if t.role == "user"
        else AssistantMessageParam(role="assistant", content=t.text)
        for t in history
    ]
    messages.append(UserMessageParam(role="user", content=QUESTION))
    api.script(Reply(ANSWER))
    with switch(provider):
        client = anthropic.Anthropic(base_url=api.base_url, api_key=API_KEY, open_telemetry=option(provider))
        reply = client.messages.create(
            model="claude-test",
            max_tokens=64,
            system="Be brief.",
            messages=messages,
        )
    return reply.id


@pytest.mark.parametrize("encoding", ["otlp_proto", "otlp_json"])
@pytest.mark.parametrize("source", SOURCES)
def test_a_real_instrumentation_s_span_is_scored_with_its_labels(
    source: str, encoding: Encoding, fake_messages_api: FakeMessagesAPI
) -> None:
    """The instrumented call becomes one event: question, answer, app, model, response id and conversation."""
    with recorded_spans("support-bot") as (provider, exporter):
        response_id = _call(fake_messages_api, provider, source)
        spans = exporter.get_finished_spans()
    out = decode_traces_record(collector_record(spans, encoding), encoding, CONTEXT)
    [event] = out.events
    assert (event.question, event.response) == (QUESTION, ANSWER)
    assert (event.app, event.model) == ("support-bot", "claude-test")
    assert (event.context, event.system, event.turn) == ((), "Be brief.", 0)
    assert out.dialects == {SOURCES[source][2]: 1}
    if source == "anthropic_sdk":
        assert (event.event_id, event.conversation_id) == (response_id, "conv-42")
    elif source == "openllmetry":
        assert event.event_id == response_id  # OpenInference records no response id: trace and span ids stand in
    else:
        assert event.event_id.startswith("otel:")


@pytest.mark.parametrize("encoding", ["otlp_proto", "otlp_json"])
@pytest.mark.parametrize("source", SOURCES)
def test_a_real_instrumentation_s_follow_up_carries_its_earlier_turns_and_system_prompt(
    source: str, encoding: Encoding, fake_messages_api: FakeMessagesAPI
) -> None:
    """A follow-up call (two earlier exchanges in `messages`, a `system` prompt) becomes an event whose context is
    those exchanges, oldest first, whose system instructions are the prompt and whose turn index is 2."""
    history = (
        Turn("user", "Which kettles ship to Spain?"),
        Turn("assistant", "The blue and the steel kettle."),
        Turn("user", "And to Portugal?"),
        Turn("assistant", "Only the steel one."),
    )
    with recorded_spans("support-bot") as (provider, exporter):
        _call(fake_messages_api, provider, source, history)
        spans = exporter.get_finished_spans()
    [event] = decode_traces_record(collector_record(spans, encoding), encoding, CONTEXT).events
    assert (event.question, event.response) == (QUESTION, ANSWER)
    assert (event.context, event.system, event.turn) == (history, "Be brief.", 2)


def test_without_content_capture_the_sdk_s_span_counts_as_no_content(fake_messages_api: FakeMessagesAPI) -> None:
    """The SDK's default span holds no text: it is counted as `no_content`, not scored and not dead-lettered."""
    with recorded_spans() as (provider, exporter):
        fake_messages_api.script(Reply(ANSWER))
        client = anthropic.Anthropic(
            base_url=fake_messages_api.base_url, api_key=API_KEY, open_telemetry={"tracer_provider": provider}
        )
        client.messages.create(model="claude-test", max_tokens=64, messages=[{"role": "user", "content": QUESTION}])
        spans = exporter.get_finished_spans()
    out = decode_traces_record(collector_record(spans, "otlp_proto"), "otlp_proto", CONTEXT)
    assert out.events == [] and out.skipped == {"no_content": 1}


def test_two_instrumentations_of_one_call_give_one_event(fake_messages_api: FakeMessagesAPI) -> None:
    """The SDK's own span and OpenLLMetry's span of the same call share the response id: the record holds one event."""
    with recorded_spans() as (provider, exporter):
        fake_messages_api.script(Reply(ANSWER))
        with _openllmetry(provider):
            option = {"tracer_provider": provider, "traces": {"content_mode": "content"}}
            client = anthropic.Anthropic(base_url=fake_messages_api.base_url, api_key=API_KEY, open_telemetry=option)
            client.messages.create(model="claude-test", max_tokens=64, messages=[{"role": "user", "content": QUESTION}])
        spans = exporter.get_finished_spans()
    assert len(spans) == 2
    out = decode_traces_record(collector_record(spans, "otlp_proto"), "otlp_proto", CONTEXT)
    assert len(out.events) == 1 and out.skipped == {"duplicate": 1}


def openllmetry_event_records(api: FakeMessagesAPI, encoding: Encoding, parent: str) -> tuple[bytes, bytes]:
    """OpenLLMetry in event mode (`use_attributes=False`) around one call inside a `parent` span: (its traces
    record, its logs record)."""
    from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor

    api.script(Reply(ANSWER))
    with recorded_spans() as (tracer_provider, spans), recorded_logs() as (logger_provider, logs):
        instrumentor = AnthropicInstrumentor(use_attributes=False)
        instrumentor.instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)
        try:
            client = anthropic.Anthropic(base_url=api.base_url, api_key=API_KEY)
            with tracer_provider.get_tracer("app").start_as_current_span(parent):
                client.messages.create(
                    model="claude-test", max_tokens=64, messages=[{"role": "user", "content": QUESTION}]
                )
        finally:
            instrumentor.uninstrument()
        return (
            collector_record(spans.get_finished_spans(), encoding),
            collector_logs_record(logs.get_finished_logs(), encoding),
        )


def test_openllmetry_s_event_mode_messages_name_the_caller_s_span_and_never_join(
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """OpenLLMetry in event mode writes its message log records outside its own span (they carry the caller's span
    id): they wait, never meet the call's span, and both sides come out counted, the span as `no_content`."""
    traces, logs = openllmetry_event_records(fake_messages_api, "otlp_proto", parent="handle request")
    spans_side = decode_traces_record(traces, "otlp_proto", CONTEXT, hold=True)
    logs_side = decode_logs_record(logs, "otlp_proto", CONTEXT, hold=True)
    [span] = spans_side.waiting_spans
    [(key, messages)] = logs_side.waiting_logs.items()
    assert key[0] == span.trace_id and key[1] != span.span_id
    join: LogJoin[str] = LogJoin(wait_s=30, capacity=10)
    assert join.add_span(span, "span", now=0) == [] and join.add_logs(key, messages, "logs", now=0) == []
    met, lonely = join.due(now=30)
    assert isinstance(met, Met) and met.logs == () and lonely == Lonely(key, 2, ("logs",), "waited")
    assert joined_call(met.span, met.logs, CONTEXT).skipped == {"no_content": 1}
