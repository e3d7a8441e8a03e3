"""Content in log records: OpenTelemetry's GenAI utilities (opentelemetry-util-genai) in event mode put the whole
call into a `gen_ai.client.inference.operation.details` log record and leave the span without text."""

from __future__ import annotations

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.util.genai.handler import TelemetryHandler
from opentelemetry.util.genai.types import InputMessage, OutputMessage, TextPart

from consumers.otlp.join import LogJoin, Lonely, Met
from consumers.otlp.records import RecordContext, decode_logs_record, decode_traces_record, joined_call
from consumers.otlp.wire import Encoding
from schemas.events import Turn
from tests.consumers.otlp.collector import collector_logs_record, collector_record, recorded_logs, recorded_spans

QUESTION, ANSWER = "When did order A17 ship?", "Order A17 shipped on 3 March."
CONTEXT = RecordContext("otlp_logs", 1, 7, None)
HISTORY = (Turn("user", "Hello"), Turn("assistant", "Hi, how can I help?"))


def _call(tracer_provider: TracerProvider, logger_provider: LoggerProvider) -> None:
    handler = TelemetryHandler(tracer_provider=tracer_provider, logger_provider=logger_provider)
    with handler.inference("anthropic", request_model="claude-test", conversation_id="conv-7") as call:
        call.system_instruction.append(TextPart(content="Be brief."))
        call.input_messages = [
            *(InputMessage(role=t.role, parts=[TextPart(content=t.text)]) for t in HISTORY),
            InputMessage(role="user", parts=[TextPart(content=QUESTION)]),
        ]
        call.output_messages = [OutputMessage(role="assistant", parts=[TextPart(content=ANSWER)])]
        call.response_id = "msg_util"


@pytest.mark.parametrize("encoding", ["otlp_proto", "otlp_json"])
def test_the_details_log_record_is_scored_and_its_span_counts_as_no_content(
    encoding: Encoding, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The logs topic's record gives the event (ids, app, model, conversation, the earlier turns and the system
    instructions from the log record); the traces topic's span of the same call has no text and is counted, so
    nothing is scored twice."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "EVENT_ONLY")  # content in events only
    with (
        recorded_spans("support-bot") as (tracer_provider, spans),
        recorded_logs("support-bot") as (logger_provider, logs),
    ):
        _call(tracer_provider, logger_provider)
        finished_spans, emitted = spans.get_finished_spans(), logs.get_finished_logs()
    out = decode_logs_record(collector_logs_record(emitted, encoding), encoding, CONTEXT)
    [event] = out.events
    assert (event.event_id, event.question, event.response) == ("msg_util", QUESTION, ANSWER)
    assert (event.app, event.model, event.conversation_id) == ("support-bot", "claude-test", "conv-7")
    assert (event.context, event.system, event.turn) == (HISTORY, "Be brief.", 1)
    traced = decode_traces_record(collector_record(finished_spans, encoding), encoding, CONTEXT)
    assert traced.events == [] and traced.skipped == {"no_content": 1}
    # Joined with a logs topic: the span waits, and the details record's call settles it (no `no_content`)
    held = decode_traces_record(collector_record(finished_spans, encoding), encoding, CONTEXT, hold=True)
    [span] = held.waiting_spans
    join: LogJoin[str] = LogJoin(wait_s=30, capacity=10)
    assert join.add_span(span, "span", now=0) == []
    [key] = decode_logs_record(collector_logs_record(emitted, encoding), encoding, CONTEXT, hold=True).scored
    assert join.settle(key) == [Lonely(key, 0, ("span",), "late")]


def test_other_log_records_are_counted_not_scored() -> None:
    """A plain application log and a legacy one-message GenAI event are counted by kind."""
    with recorded_logs() as (provider, logs):
        logger = provider.get_logger("app")
        logger.emit(body="order lookup took 20 ms")
        logger.emit(event_name="gen_ai.user.message", body={"content": QUESTION})
        emitted = logs.get_finished_logs()
    out = decode_logs_record(collector_logs_record(emitted, "otlp_proto"), "otlp_proto", CONTEXT)
    assert out.events == [] and out.skipped == {"other": 1, "unjoined_event": 1}


@pytest.mark.parametrize("encoding", ["otlp_proto", "otlp_json"])
def test_legacy_event_log_records_joined_to_their_span_give_its_content(encoding: Encoding) -> None:
    """Legacy GenAI events written as log records inside the span (gen_ai.system.message, gen_ai.user.message,
    gen_ai.assistant.message, gen_ai.choice) give the span its question, answer, earlier turns and system
    instructions once joined to it by trace and span id."""
    with recorded_spans() as (tracer_provider, spans), recorded_logs() as (logger_provider, logs):
        logger = logger_provider.get_logger("app")
        with tracer_provider.get_tracer("app").start_as_current_span("chat claude-test") as span:
            span.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.request.model": "claude-test"})
            logger.emit(event_name="gen_ai.system.message", body={"content": "Be brief."})
            for turn in HISTORY:
                logger.emit(event_name=f"gen_ai.{turn.role}.message", body={"content": turn.text})
            logger.emit(event_name="gen_ai.user.message", body={"content": QUESTION})
            logger.emit(
                event_name="gen_ai.choice", body={"index": 0, "message": {"role": "assistant", "content": ANSWER}}
            )
        logs_record = collector_logs_record(logs.get_finished_logs(), encoding)
        spans_record = collector_record(spans.get_finished_spans(), encoding)
    assert decode_traces_record(spans_record, encoding, CONTEXT).skipped == {"no_content": 1}  # not held: counted
    logs_side = decode_logs_record(logs_record, encoding, CONTEXT, hold=True)
    spans_side = decode_traces_record(spans_record, encoding, CONTEXT, hold=True)
    assert spans_side.skipped == {} and logs_side.skipped == {}
    join: LogJoin[str] = LogJoin(wait_s=30, capacity=10)
    [(key, waiting_logs)] = logs_side.waiting_logs.items()
    assert join.add_logs(key, waiting_logs, "logs@7", now=0) == []
    [met] = join.add_span(spans_side.waiting_spans[0], "spans@3", now=1)
    assert isinstance(met, Met) and met.why == "complete" and met.tokens == ("spans@3", "logs@7")
    out = joined_call(met.span, met.logs, CONTEXT)
    [event] = out.events
    assert (event.question, event.response, event.model) == (QUESTION, ANSWER, "claude-test")
    assert (event.context, event.system, event.turn) == (HISTORY, "Be brief.", 1)
    assert out.dialects == {"gen_ai_events": 1}
