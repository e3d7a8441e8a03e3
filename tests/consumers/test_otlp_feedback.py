"""Users' feedback as OpenTelemetry `gen_ai.evaluation.result` log records, written by the real SDK and encoded by the
exporter's own encoders (protobuf, the SDK's OTLP/JSON, and ours): thumbs and ratings under the configured names and
Microsoft Foundry's end-user human evaluations become `FeedbackEvent`s next to the record's conversations; other
evaluations and invalid scores are counted, never lost silently."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import pytest
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler, ReadableLogRecord
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.util.genai.handler import TelemetryHandler
from opentelemetry.util.genai.types import InputMessage, OutputMessage, TextPart

from consumers.feedback import FeedbackOptions
from consumers.otlp.feedback import EVALUATION_EVENT
from consumers.otlp.records import RecordContext, RecordEvents, decode_logs_record
from consumers.otlp.wire import Encoding, to_otlp_json
from schemas.feedback import AnswerRef, FeedbackEvent
from tests.consumers.otlp.collector import collector_logs_record, recorded_logs, recorded_spans

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
AT = NOW - timedelta(minutes=2)
AT_NS = int(AT.timestamp()) * 10**9
OPTIONS = FeedbackOptions(frozenset({"user_feedback"}), frozenset({"user_rating"}), rating_scale=5)
CONTEXT = RecordContext("otlp_logs", 2, 90, None, now=NOW, feedback=OPTIONS)
# protobuf; OTLP/JSON as the SDK's JSON encoder writes it; OTLP/JSON as `to_otlp_json` writes the protobuf request
Writer = Literal["otlp_proto", "sdk_json", "our_json"]
WRITERS: tuple[Writer, ...] = ("otlp_proto", "sdk_json", "our_json")


def record(logs: Sequence[ReadableLogRecord], writer: Writer) -> tuple[bytes, Encoding]:
    """One Collector logs record holding `logs`, and its encoding."""
    if writer == "otlp_proto":
        return collector_logs_record(logs, "otlp_proto"), "otlp_proto"
    if writer == "sdk_json":
        return collector_logs_record(logs, "otlp_json"), "otlp_json"
    return to_otlp_json(encode_logs(logs)), "otlp_json"


def decoded(logs: Sequence[ReadableLogRecord], writer: Writer, context: RecordContext = CONTEXT) -> RecordEvents:
    """The record of `logs` through `decode_logs_record`."""
    value, encoding = record(logs, writer)
    return decode_logs_record(value, encoding, context)


def evaluation(provider: LoggerProvider, name: str, **attributes: Any) -> None:
    """Emit one `gen_ai.evaluation.result` event (in the current span, if any) at AT."""
    attributes = {"gen_ai.evaluation.name": name, **attributes}
    provider.get_logger("feedback-widget").emit(
        event_name=EVALUATION_EVENT, timestamp=AT_NS, attributes={k: v for k, v in attributes.items() if v is not None}
    )


@contextmanager
def answer_span(tracer_provider: TracerProvider) -> Iterator[tuple[str, str]]:
    """A span standing for the answer, current while the block runs: its (trace id, span id) in hex."""
    with tracer_provider.get_tracer("app").start_as_current_span("chat assistant-large") as span:
        context = span.get_span_context()
        yield f"{context.trace_id:032x}", f"{context.span_id:016x}"


@pytest.mark.parametrize("writer", WRITERS)
def test_thumbs_and_ratings_name_their_answer_by_response_id_or_parent_span(writer: Writer) -> None:
    """A thumbs down parented to the answer's span names it `otel:<trace>/<span>` (with its ids); a rating with
    `gen_ai.response.id` names it by that id; the explanation is the comment and the record's time the time."""
    with recorded_spans() as (tracer_provider, _), recorded_logs() as (provider, logs):
        with answer_span(tracer_provider) as (trace_id, span_id):
            evaluation(
                provider,
                "user_feedback",
                **{"gen_ai.evaluation.score.value": 0.0, "gen_ai.evaluation.explanation": "Off topic."},
            )
        evaluation(provider, "user_rating", **{"gen_ai.evaluation.score.value": 4, "gen_ai.response.id": "resp_17"})
        out = decoded(logs.get_finished_logs(), writer)
    thumbs, rating = out.feedback
    assert (out.events, out.skipped) == ([], {})
    assert thumbs.answer == AnswerRef(event_id=f"otel:{trace_id}/{span_id}", trace_id=trace_id, span_id=span_id)
    assert (thumbs.kind, thumbs.value, thumbs.scale, thumbs.negative) == ("thumbs", 0.0, 1, True)
    assert (thumbs.comment, thumbs.feedback_time, thumbs.source, thumbs.segment) == ("Off topic.", AT, "otlp", None)
    assert rating.answer == AnswerRef(event_id="resp_17")
    assert (rating.kind, rating.value, rating.scale, rating.negative, rating.rating_bucket) == (
        "rating",
        4,
        5,
        False,
        4,
    )
    assert thumbs.feedback_id.startswith("otel-eval:") and thumbs.feedback_id != rating.feedback_id


@pytest.mark.parametrize("writer", WRITERS)
def test_a_record_mixing_a_conversation_and_evaluations(writer: Writer, monkeypatch: pytest.MonkeyPatch) -> None:
    """One logs record with a GenAI call (its details log record), the user's thumbs on it, an LLM judge's
    `Relevance` and an application log: the call is an event, the thumbs names it by its response id, the judge's
    evaluation counts as `evaluation` and the plain log as `other`."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "EVENT_ONLY")
    with recorded_spans() as (tracer_provider, _), recorded_logs() as (provider, logs):
        handler = TelemetryHandler(tracer_provider=tracer_provider, logger_provider=provider)
        with handler.inference("openai", request_model="assistant-large", conversation_id="conv-7") as call:
            call.input_messages = [InputMessage(role="user", parts=[TextPart(content="When did order A17 ship?")])]
            call.output_messages = [OutputMessage(role="assistant", parts=[TextPart(content="On 3 March.")])]
            call.response_id = "chatcmpl-A17"
        evaluation(
            provider, "Relevance", **{"gen_ai.evaluation.score.value": 0.9, "gen_ai.response.id": "chatcmpl-A17"}
        )
        evaluation(
            provider,
            "user_feedback",
            **{"gen_ai.evaluation.score.label": "thumbs_down", "gen_ai.response.id": "chatcmpl-A17"},
        )
        provider.get_logger("app").emit(body="order lookup took 20 ms")
        out = decoded(
            logs.get_finished_logs(), writer, context=RecordContext("otlp_logs", 2, 90, None, feedback=OPTIONS)
        )
    [event] = out.events
    [feedback] = out.feedback
    assert event.event_id == feedback.answer.event_id == "chatcmpl-A17"
    assert (feedback.kind, feedback.negative) == ("thumbs", True)
    assert out.skipped == {"evaluation": 1, "other": 1}


@pytest.mark.parametrize(
    ("value", "label", "up"),
    [
        (1, None, True),
        (0, None, False),
        (1.0, "pass", True),
        (0.0, "fail", False),
        (True, None, True),
        (None, "thumbs_up", True),
        (None, "Thumbs_Down", False),
        (None, "positive", True),
        (None, "negative", False),
        (None, "up", True),
        (None, "down", False),
        (1, "helpful", True),  # a label of the product's own beside a thumbs value: the value decides
    ],
)
def test_thumbs_by_score_value_or_label(value: Any, label: str | None, up: bool) -> None:
    """A thumbs is score.value 1/0 (or a boolean), or a label that says up or down in any case."""
    with recorded_spans() as (tracer_provider, _), recorded_logs() as (provider, logs):
        with answer_span(tracer_provider):
            evaluation(
                provider,
                "user_feedback",
                **{"gen_ai.evaluation.score.value": value, "gen_ai.evaluation.score.label": label},
            )
        out = decoded(logs.get_finished_logs(), "otlp_proto")
    [feedback] = out.feedback
    assert (feedback.value, feedback.negative) == (1.0 if up else 0.0, not up)


@pytest.mark.parametrize("writer", WRITERS)
def test_invalid_feedback_is_counted_by_why_and_other_evaluations_as_evaluation(writer: Writer) -> None:
    """Scores off the scale, a thumbs that is neither 1 nor 0, a value and label that disagree, no score, NaN, an
    evaluation that failed, no way to name the answer and a time far ahead are each counted as
    `invalid_feedback:<why>`; an evaluation under another name is an `evaluation`; the valid one is kept."""
    with recorded_spans() as (tracer_provider, _), recorded_logs() as (provider, logs):
        with answer_span(tracer_provider):
            cases: list[tuple[str, dict[str, Any]]] = [
                ("user_rating", {"gen_ai.evaluation.score.value": 7}),
                ("user_rating", {"gen_ai.evaluation.score.value": 0.5}),
                ("user_rating", {"gen_ai.evaluation.score.value": "4"}),
                ("user_rating", {"gen_ai.evaluation.score.value": True}),
                ("user_rating", {"gen_ai.evaluation.score.label": "good"}),
                ("user_rating", {"gen_ai.evaluation.score.value": math.nan}),
                ("user_feedback", {"gen_ai.evaluation.score.value": 0.5}),
                ("user_feedback", {"gen_ai.evaluation.score.value": 1, "gen_ai.evaluation.score.label": "fail"}),
                ("user_feedback", {"gen_ai.evaluation.score.label": "meh"}),
                ("user_feedback", {}),
                ("user_feedback", {"error.type": "timeout"}),
                ("user_feedback", {"gen_ai.evaluation.score.value": 1, "gen_ai.response.id": "r\x00"}),
                ("Relevance", {"gen_ai.evaluation.score.value": 0.2}),
                ("user_rating", {"gen_ai.evaluation.score.value": 3}),
            ]
            for name, attributes in cases:
                evaluation(provider, name, **attributes)
            provider.get_logger("widget").emit(
                event_name=EVALUATION_EVENT,
                timestamp=int((NOW + timedelta(hours=2)).timestamp()) * 10**9,
                attributes={"gen_ai.evaluation.name": "user_feedback", "gen_ai.evaluation.score.value": 1},
            )
        evaluation(provider, "user_feedback", **{"gen_ai.evaluation.score.value": 1})  # outside the span, no id
        out = decoded(logs.get_finished_logs(), writer)
    [valid] = out.feedback
    assert (valid.kind, valid.value) == ("rating", 3)
    assert out.skipped == {
        "invalid_feedback:bad_score": 8,
        "invalid_feedback:no_score": 2,
        "invalid_feedback:error": 1,
        "invalid_feedback:bad_id": 1,
        "invalid_feedback:bad_time": 1,
        "invalid_feedback:no_answer": 1,
        "evaluation": 1,
    }


def test_the_rating_scale_and_negative_threshold_are_the_options() -> None:
    """A rating is read on the configured scale and is negative at or below the configured point of it."""
    options = FeedbackOptions(frozenset(), frozenset({"stars"}), rating_scale=10, negative_rating_at_most=0.4)
    with recorded_spans() as (tracer_provider, _), recorded_logs() as (provider, logs):
        with answer_span(tracer_provider):
            for stars in (4, 5, 10):
                evaluation(provider, "stars", **{"gen_ai.evaluation.score.value": stars})
        out = decoded(logs.get_finished_logs(), "otlp_proto", RecordContext("t", 0, 0, None, now=NOW, feedback=options))
    assert [(f.value, f.scale, f.negative) for f in out.feedback] == [(4, 10, True), (5, 10, False), (10, 10, False)]


def test_without_feedback_options_evaluations_are_only_counted() -> None:
    """A logs topic read without feedback options counts every evaluation record as `evaluation`."""
    with recorded_logs() as (provider, logs):
        evaluation(provider, "user_feedback", **{"gen_ai.evaluation.score.value": 1, "gen_ai.response.id": "r1"})
        out = decoded(logs.get_finished_logs(), "otlp_proto", RecordContext("t", 0, 0, None, now=NOW))
    assert (out.feedback, out.skipped) == ([], {"evaluation": 1})


def test_a_redelivered_record_keeps_its_feedback_ids_and_a_repeated_evaluation_counts_once() -> None:
    """The feedback id is a function of the record (so a redelivery dedups in the store, whatever its Kafka offset);
    the same evaluation twice in one record is kept once and counted as `duplicate`."""
    with recorded_spans() as (tracer_provider, _), recorded_logs() as (provider, logs):
        with answer_span(tracer_provider):
            evaluation(provider, "user_feedback", **{"gen_ai.evaluation.score.value": 1})
            evaluation(provider, "user_feedback", **{"gen_ai.evaluation.score.value": 1})
            evaluation(provider, "user_rating", **{"gen_ai.evaluation.score.value": 2})
        emitted = logs.get_finished_logs()
    first = decoded(emitted, "otlp_proto")
    again = decoded(emitted, "sdk_json", RecordContext("otlp_logs", 5, 7000, None, now=NOW, feedback=OPTIONS))
    assert [f.feedback_id for f in first.feedback] == [f.feedback_id for f in again.feedback]
    assert len(first.feedback) == 2 and first.skipped == {"duplicate": 1}


def _foundry_evaluation(logger: logging.Logger, name: str, score: float, kind: str, source: str, eval_id: str) -> None:
    """A human evaluation as Microsoft Foundry's sample emits it: Python `logging`, routed to OpenTelemetry by its
    handler, the event named by `microsoft.custom_event.name` and the kind in JSON-encoded `internal_properties`."""
    internal = {
        "gen_ai.evaluation.type": "boolean" if kind == "binary" else "ordinal",
        "microsoft.human_evaluation.source": source,
        "microsoft.human_evaluation.kind": kind,
        "microsoft.human_evaluation.id": eval_id,
    }
    attributes = {
        "microsoft.custom_event.name": EVALUATION_EVENT,
        "gen_ai.evaluation.name": name,
        "gen_ai.evaluation.score.value": score,
        "gen_ai.evaluation.score.label": "pass" if score >= (1 if kind == "binary" else 3) else "fail",
        "internal_properties": json.dumps(internal),
        "gen_ai.response.id": "resp_6490",
    }
    logger.info(EVALUATION_EVENT, extra=attributes)


# Foundry's sample routes Python logging through the SDK's handler (its successor is not installed here).
@pytest.mark.filterwarnings("ignore:`LoggingHandler` in `opentelemetry-sdk` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("writer", WRITERS)
def test_foundry_end_user_human_evaluations_are_feedback_whatever_their_name(writer: Writer) -> None:
    """Foundry's end-user `binary` and `likert_5` evaluations are thumbs and 1-5 ratings under any name, with their
    own evaluation id as the feedback id; a builder's (a reviewer in the portal) is no users' feedback."""
    with recorded_logs() as (provider, logs):
        logger = logging.getLogger("tests.human_evaluations")
        handler = LoggingHandler(logger_provider=provider)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        try:
            _foundry_evaluation(logger, "task_completion", 0.0, "binary", "end_user", "69d937a7-0001")
            _foundry_evaluation(logger, "relevance", 2.0, "likert_5", "end_user", "69d937a7-0002")
            _foundry_evaluation(logger, "relevance", 1.0, "likert_5", "builder", "69d937a7-0003")
        finally:
            logger.removeHandler(handler)
        out = decoded(logs.get_finished_logs(), writer, RecordContext("t", 0, 0, None, feedback=OPTIONS))
    thumbs, rating = out.feedback
    assert (thumbs.feedback_id, thumbs.kind, thumbs.value, thumbs.negative) == ("69d937a7-0001", "thumbs", 0.0, True)
    assert (rating.feedback_id, rating.kind, rating.value, rating.scale, rating.negative) == (
        "69d937a7-0002",
        "rating",
        2.0,
        5,
        True,
    )
    assert thumbs.answer.event_id == rating.answer.event_id == "resp_6490"
    assert out.skipped == {"evaluation": 1}
    assert isinstance(thumbs, FeedbackEvent)
