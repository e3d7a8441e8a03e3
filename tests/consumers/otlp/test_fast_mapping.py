"""A traces record's short way (spans that are no LLM call counted from their attributes alone, common LLM spans made
into events without the chat JSON: `consumers.otlp.span_event`) against the full mapping (every span read whole, then
`map_span` and `call_event`): the same events, skipped counts, calls without content, dialects, held spans, or the same
`DecodeError`, for generated spans of every dialect, mixed and conflicting, in both encodings; and the same sample
decisions at any rate."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

import consumers.otlp.records as records
import consumers.otlp.span_event as span_event
from consumers.otlp.dialects import DEFAULT_PROMPT_VERSION_ATTRIBUTES, MappingOptions, semconv_messages
from consumers.otlp.records import RecordContext, decode_traces_record
from consumers.otlp.wire import Encoding, read_spans, to_otlp_json
from consumers.sampling import Sampler
from monitor.devtools.otlp_traffic import otlp_records
from monitor.devtools.traffic import generate_events
from schemas.errors import DecodeError
from tests.properties import examples

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
NOW_NS = int(NOW.timestamp()) * 10**9
SURROGATE = "@surrogate@"  # written as a lone surrogate's escape into OTLP/JSON (protobuf cannot hold one)
_ENCODINGS: tuple[Encoding, ...] = ("otlp_proto", "otlp_json")


def _every_span_whole(value: bytes | None, encoding: Encoding, whole: object) -> list[Any]:
    return list(read_spans(value, encoding))


@contextmanager
def full_mapping() -> Iterator[None]:
    """Every span read whole, and mapped and decoded through the chat JSON."""
    with patch.object(records, "read_spans_if", _every_span_whole), patch.object(records, "_fast", lambda *_: None):
        yield


def outcome(value: bytes, encoding: Encoding, context: RecordContext, hold: bool) -> object:
    """All a traces record's decoding hands on, or the `DecodeError` (reason and detail)."""
    try:
        out = decode_traces_record(value, encoding, context, hold=hold)
    except DecodeError as e:
        return (e.reason, e.detail)
    return (out.events, out.skipped, out.no_content, out.dialects, out.waiting_spans, out.scored)


# ---- spans of every dialect ----------------------------------------------------------------------------------------

texts = st.one_of(
    st.sampled_from(["When did order A17 ship?", "It shipped on 3 March.", "", "  ", "a\x00b", SURROGATE, "x" * 300]),
    st.text(max_size=8),
)
roles = st.sampled_from(["user", "assistant", "system", "developer", "tool", "model", ""])
ids = st.one_of(
    st.none(), st.sampled_from(["msg_1", "msg_2", "conv-1", "", "x" * 257, "a\x00b", SURROGATE]), st.just(7)
)


@st.composite
def parts(draw: st.DrawFn) -> Any:
    """A message's parts: text parts (as `content` or `text`), other parts, a bare string, or a wrong shape."""
    part = st.one_of(
        st.builds(lambda t: {"type": "text", "content": t}, texts),
        st.builds(lambda t: {"type": "text", "text": t}, texts),
        st.just({"type": "text", "content": None, "text": "hidden"}),
        st.just({"type": "tool_call", "id": "t1"}),
        st.just(3),
    )
    return draw(st.one_of(st.lists(part, max_size=3), texts, st.none()))


@st.composite
def semconv(draw: st.DrawFn, roles_drawn: st.SearchStrategy[str] = roles) -> str:
    """`gen_ai.input.messages` / `.output.messages` as the JSON string instrumentations write, or broken JSON."""
    messages = draw(
        st.lists(
            st.one_of(st.builds(lambda r, p: {"role": r, "parts": p}, roles_drawn, parts()), st.just("not a message")),
            max_size=4,
        )
    )
    text = json.dumps(messages)
    return draw(st.sampled_from([text, text, text, text[:-1], "[NaN]", '{"role": "user"}', "[" * 300 + "]" * 300]))


@st.composite
def span_attributes(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """Attributes mixing the dialects: kinds in precedence order, ids, models, prompt versions, and the content of any
    of the four dialects (often several at once, to exercise precedence), some of them repeated."""
    a: list[tuple[str, Any]] = []

    def maybe(key: str, values: st.SearchStrategy[Any]) -> None:
        if draw(st.booleans()):
            a.append((key, draw(values)))

    kind = st.sampled_from(["chat", "generate_content", "text_completion", "invoke_agent", "execute_tool", "odd", ""])
    maybe("gen_ai.operation.name", st.one_of(kind, st.just(1)))
    maybe("openinference.span.kind", st.sampled_from(["LLM", "llm", "TOOL", "AGENT", "CHAIN", "X", ""]))
    maybe("llm.request.type", st.sampled_from(["chat", "completion", "rerank", ""]))
    for key in ("gen_ai.response.id", "gen_ai.conversation.id", "session.id"):
        maybe(key, ids.filter(lambda v: v is not None))
    for key in ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name", "app.name"):
        maybe(key, st.sampled_from(["claude", "", "m" * 257, "a\x00b"]))
    for key in DEFAULT_PROMPT_VERSION_ATTRIBUTES:
        maybe(key, st.sampled_from(["v1", "", "p" * 257, SURROGATE]))
    if draw(st.booleans()):  # the current dialect
        maybe("gen_ai.input.messages", semconv())
        maybe("gen_ai.output.messages", semconv(st.sampled_from(["assistant", "assistant", "user", "model"])))
        maybe("gen_ai.system_instructions", st.one_of(texts, st.just(json.dumps([{"type": "text", "content": "Be"}]))))
    if draw(st.booleans()):  # OpenLLMetry
        for i in range(draw(st.integers(0, 2))):
            maybe(f"gen_ai.prompt.{i}.role", roles)
            maybe(f"gen_ai.prompt.{i}.content", texts)
        maybe("gen_ai.completion.0.content", texts)
    if draw(st.booleans()):  # OpenInference
        for i in range(draw(st.integers(0, 2))):
            maybe(f"llm.input_messages.{i}.message.role", roles)
            maybe(f"llm.input_messages.{i}.message.content", texts)
        maybe("llm.output_messages.0.message.content", texts)
    if a and draw(st.integers(0, 9)) == 0:  # a repeated key: the last one counts
        key, _ = draw(st.sampled_from(a))
        a.append((key, draw(st.one_of(texts, st.just("chat")))))
    return a


@st.composite
def llm_call(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """A call of the current dialect that decodes (earlier turns of any role, the question, the answer, its labels),
    often with one or two attributes of any dialect more: conflicting content, kinds, labels, or a repeated key."""
    history = draw(st.lists(st.tuples(roles, texts), max_size=3))
    question = draw(st.sampled_from(["When did order A17 ship?", "Hi", " x "]))
    inputs = [{"role": r, "parts": [{"type": "text", "content": t}]} for r, t in [*history, ("user", question)]]
    answer = [{"role": "assistant", "parts": [{"type": "text", "content": draw(texts)}], "finish_reason": "stop"}]
    a: list[tuple[str, Any]] = [
        ("gen_ai.operation.name", draw(st.sampled_from(["chat", "generate_content", "text_completion"]))),
        ("gen_ai.input.messages", json.dumps(inputs)),
        ("gen_ai.output.messages", json.dumps(answer)),
        ("gen_ai.response.id", draw(st.sampled_from(["msg_1", "msg_2", "msg_3"]))),
        ("gen_ai.conversation.id", draw(st.sampled_from(["conv-1", "conv-2"]))),
        ("gen_ai.request.model", "claude"),
        ("gen_ai.prompt.version", draw(st.sampled_from(["v1", "v2"]))),
    ]
    if draw(st.booleans()):
        a.append(
            ("gen_ai.system_instructions", draw(st.sampled_from(["Be brief.", '[{"type":"text","content":"B"}]'])))
        )
    extra = draw(span_attributes())
    return a + draw(st.lists(st.sampled_from(extra), max_size=2)) if extra else a


def _any_value(value: Any) -> AnyValue:
    if isinstance(value, AnyValue):
        return value
    if isinstance(value, int):
        return AnyValue(int_value=value)
    return AnyValue(string_value=str(value))


def _deep(levels: int) -> AnyValue:
    value = AnyValue(string_value="leaf")
    for _ in range(levels):
        value = AnyValue(array_value=ArrayValue(values=[value]))
    return value


legacy_events = st.lists(
    st.one_of(
        st.builds(lambda t: ("gen_ai.user.message", [("content", t)]), texts),
        st.builds(lambda t: ("gen_ai.system.message", [("content", t)]), texts),
        st.builds(lambda t: ("gen_ai.choice", [("message", json.dumps({"role": "assistant", "content": t}))]), texts),
        st.just(("gen_ai.content.prompt", [("gen_ai.prompt", json.dumps([{"role": "user", "content": "Hi"}]))])),
        st.just(("exception", [("exception.message", "boom")])),
        st.just(("gen_ai.choice", [("nested", _deep(3))])),
        st.just(("exception", [("nested", _deep(34))])),  # too deep: the record is refused, whatever the span
    ),
    max_size=3,
)
good_times = st.sampled_from([NOW_NS - 10**9, NOW_NS - 123_456_789, NOW_NS - 59_999_999_999])
times = st.one_of(good_times, st.sampled_from([0, NOW_NS + 10**9 * 7200, 10**9 * 900_000_000]))


@st.composite
def span(draw: st.DrawFn) -> Span:
    """One span: an LLM call of any dialect, an agent or tool span, or a span with no GenAI attributes."""
    attributes = draw(st.one_of(llm_call(), span_attributes()))
    kvs = [KeyValue(key=k, value=_any_value(v)) for k, v in attributes]
    if draw(st.integers(0, 29)) == 0:  # nested deeper than the reader accepts: the whole record is refused
        kvs.append(KeyValue(key="deep", value=_deep(draw(st.sampled_from([32, 34])))))
    events = [
        Span.Event(name=name, time_unix_nano=NOW_NS, attributes=[KeyValue(key=k, value=_any_value(v)) for k, v in a])
        for name, a in draw(legacy_events)
    ]
    trace = draw(st.sampled_from([bytes(range(16)), bytes(range(1, 17)), bytes(range(1, 17)), b""]))
    return Span(
        trace_id=trace,
        span_id=draw(st.sampled_from([bytes(range(8)), bytes(range(2, 10)), b"\x00" * 8])),
        name="span",
        kind=Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=draw(times),
        end_time_unix_nano=draw(times),
        attributes=kvs,
        events=events,
    )


@st.composite
def record(draw: st.DrawFn) -> ExportTraceServiceRequest:
    """A Collector record: one or two resources (with or without service.name), each with a few spans."""
    resources = []
    for _ in range(draw(st.integers(1, 2))):
        service = draw(st.sampled_from(["support-bot", "", "s" * 257, None]))
        attributes = [] if service is None else [KeyValue(key="service.name", value=AnyValue(string_value=service))]
        if draw(st.booleans()):
            attributes.append(KeyValue(key="gen_ai.prompt.version", value=AnyValue(string_value="r1")))
        spans = draw(st.lists(span(), min_size=1, max_size=4))
        scope = ScopeSpans(scope=InstrumentationScope(name="tests"), spans=spans)
        resources.append(ResourceSpans(resource=Resource(attributes=attributes), scope_spans=[scope]))
    return ExportTraceServiceRequest(resource_spans=resources)


def encoded(request: ExportTraceServiceRequest, encoding: Encoding) -> bytes:
    """The record in `encoding`; in OTLP/JSON the surrogate marker becomes a lone surrogate's escape."""
    if encoding == "otlp_proto":
        return request.SerializeToString()
    return to_otlp_json(request).replace(SURROGATE.encode(), b"\\ud800")


contexts = st.builds(
    lambda max_bytes, app, record_ms, skew: RecordContext(
        "otlp_spans", 1, 9, record_ms, MappingOptions(app_attribute=app), max_bytes, skew, NOW
    ),
    st.sampled_from([1_000_000, 1_000_000, 2_500, 700]),
    st.sampled_from([None, "app.name"]),
    st.sampled_from([None, int(NOW.timestamp() * 1000) - 60_000]),
    st.sampled_from([3600.0, None]),
)


# Records are large draws: hypothesis discards the few that overrun its buffer
_LARGE = [HealthCheck.filter_too_much, HealthCheck.too_slow, HealthCheck.data_too_large]


@pytest.mark.long(seconds=36)
@settings(max_examples=examples(1500), deadline=None, suppress_health_check=_LARGE)
@given(record(), st.sampled_from(_ENCODINGS), contexts, st.booleans())
def test_the_short_way_and_the_full_mapping_agree(
    request: ExportTraceServiceRequest, encoding: Encoding, context: RecordContext, hold: bool
) -> None:
    """Generated records of every dialect (mixed, conflicting, missing or empty content, bad values, duplicates, bad
    times, nesting too deep) give the same events, counts and held spans, or the same error, either way."""
    value = encoded(request, encoding)
    fast = outcome(value, encoding, context, hold)
    with full_mapping():
        full = outcome(value, encoding, context, hold)
    assert fast == full


@settings(max_examples=examples(300), deadline=None, suppress_health_check=_LARGE)
@given(record(), st.sampled_from(_ENCODINGS), st.sampled_from([0.0, 0.3, 1.0]))
def test_the_same_calls_are_sampled_either_way(
    request: ExportTraceServiceRequest, encoding: Encoding, rate: float
) -> None:
    """At rates 0, 1 and between, the sampler decides the same for each event of a record, whichever way it was read
    (what the pipeline counts as sampled and not sampled follows from it)."""
    context = RecordContext("otlp_spans", 0, 3, None, now=NOW)
    value = encoded(request, encoding)
    try:
        fast = decode_traces_record(value, encoding, context).events
        with full_mapping():
            full = decode_traces_record(value, encoding, context).events
    except DecodeError:
        return
    sampler = Sampler.at_rate(rate)
    decide = sampler.decide
    assert [(e.event_id, decide(e).sampled) for e in fast] == [(e.event_id, decide(e).sampled) for e in full]


def test_the_bench_traffic_takes_the_short_way() -> None:
    """The generated traffic's LLM spans (the current dialect, content on the span) become events without the full
    mapping."""
    events = generate_events(40, seed=5, malformed_share=0.0)
    values = list(otlp_records(events, encoding="otlp_proto", dialect="gen_ai", per_record=20))
    context = RecordContext("otlp_spans", 0, 3, None)  # the wall clock: the generated events are recent

    def refuse(*_: object) -> None:
        raise AssertionError("the full mapping was used")

    with patch.object(records, "map_span", refuse), patch.object(records, "call_event", refuse):
        found = [decode_traces_record(v, "otlp_proto", context) for v in values]
    assert sum(len(f.events) for f in found) == 40
    assert all(set(f.skipped) <= {"invoke_agent", "execute_tool"} for f in found)


# ---- the current dialect's messages, decoded straight into structs -------------------------------------------------

# Any JSON value but an object (an object of the wrong keys is as good as none); no floats: msgspec refuses Infinity
_loose = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 3), texts),
    lambda inner: st.lists(inner, max_size=2),
    max_leaves=3,
)


def _mostly(common: st.SearchStrategy[Any], odd: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`common` seven times in eight, else `odd` (hypothesis's one_of would draw the odd values about half the time)."""
    return st.integers(0, 7).flatmap(lambda i: odd if i == 0 else common)


_part_like = st.fixed_dictionaries(
    {"type": _mostly(st.sampled_from(["text", "text", "tool_call"]), _loose)},
    optional={
        "content": _mostly(texts, st.one_of(st.none(), _loose)),
        "text": _mostly(texts, st.one_of(st.none(), _loose)),
    },
)
_message_like = st.fixed_dictionaries(
    {"role": _mostly(roles, _loose)},
    optional={
        "parts": _mostly(st.lists(_mostly(_part_like, _loose), max_size=3), st.one_of(texts, _loose)),
        "finish_reason": _loose,
    },
)


@settings(max_examples=examples(5000), deadline=None)  # cheap examples; the odd shapes are a small share
@given(_mostly(st.lists(_mostly(_message_like, _loose), max_size=3), st.one_of(_message_like, _loose)), st.booleans())
def test_messages_read_straight_into_structs_read_as_semconv_messages(document: Any, repeat_a_key: bool) -> None:
    """A `gen_ai.input.messages` JSON string of any shape (messages with text, `text` or `content` parts, nulls,
    other types, missing keys, stray items, a repeated key) gives the messages `semconv_messages` reads from
    json.loads, or None where msgspec refuses the JSON (json.loads then decides in the full mapping)."""
    text = json.dumps(document)
    if repeat_a_key and text.startswith('[{"'):  # the first message's first key again, at its end: the last counts
        key = text[2 : text.index('"', 3)]
        text = text.replace("}", f', "{key}": "user"}}', 1)
    found = span_event._turns(text)
    if found is not None:
        assert found == semconv_messages(json.loads(text))
