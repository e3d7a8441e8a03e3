"""One Collector Kafka record (a whole `ExportTraceServiceRequest` or `ExportLogsServiceRequest`, protobuf or
OTLP/JSON) read into `Span`s and `LogRecord`s with plain attribute values; raises only `DecodeError`.

Both encodings end in the same structs, so the dialect mapping never sees which one arrived. OTLP/JSON is not read
through protobuf's JSON mapping: that mapping reads the hex trace and span ids of OTLP/JSON as base64 and silently
yields other ids (the OTLP specification, "JSON Protobuf Encoding"). A traces record is read from msgspec's structs
(`json_request`), and from the parsed JSON where those decline it (which decides then, and words any error): the
same spans either way (tests/consumers/otlp/test_json_request.py)."""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Callable
from typing import Any, Literal, cast

import msgspec
from google.protobuf import json_format
from google.protobuf.message import DecodeError as ProtobufDecodeError
from msgspec import UNSET
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from consumers.otlp import json_request
from schemas.errors import DecodeError

Encoding = Literal["otlp_proto", "otlp_json"]
Attributes = dict[str, Any]  # str, bool, int, float, bytes (hex), list and dict values, as the AnyValue held them
_MAX_DEPTH = 32  # an AnyValue nests arrays and maps; real attributes nest two or three levels
_SCALARS = frozenset({"string_value", "bool_value", "int_value", "double_value"})


class SpanEvent(msgspec.Struct, frozen=True):
    """An event recorded on a span (the legacy GenAI content events live here)."""

    name: str
    time_unix_nano: int
    attributes: Attributes


class Span(msgspec.Struct, frozen=True):
    """One span with its resource's and scope's context; ids are lower-case hex."""

    trace_id: str
    span_id: str
    name: str
    kind: int
    start_time_unix_nano: int
    end_time_unix_nano: int
    attributes: Attributes
    events: tuple[SpanEvent, ...]
    resource: Attributes
    scope: str


class LogRecord(msgspec.Struct, frozen=True):
    """One log record (GenAI content may arrive as `gen_ai.client.inference.operation.details` events)."""

    trace_id: str
    span_id: str
    event_name: str
    time_unix_nano: int
    body: Any
    attributes: Attributes
    resource: Attributes


def key_values(attributes: dict[str, Any]) -> list[KeyValue]:
    """Attributes as OTLP key-values (bool, float, int, else the value as a string); None values are left out."""
    return [KeyValue(key=key, value=_any_value(value)) for key, value in attributes.items() if value is not None]


def _any_value(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    return AnyValue(string_value=str(value))


def to_otlp_json(request: Any) -> bytes:
    """An OTLP export request as OTLP/JSON: protobuf's JSON mapping with enums as integers and, as OTLP/JSON wants,
    the trace and span ids in hex rather than base64."""
    document = json_format.MessageToDict(request, use_integers_for_enums=True)
    return json.dumps(_hex_ids(document), separators=(",", ":")).encode()


def _hex_ids(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            k: base64.b64decode(v).hex() if k in _ID_FIELDS and isinstance(v, str) else _hex_ids(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_hex_ids(v) for v in node]
    return node


_ID_FIELDS = frozenset({"traceId", "spanId", "parentSpanId"})


def read_spans(value: bytes | None, encoding: Encoding) -> list[Span]:
    """The spans of one traces record, in the order the request holds them; raises `DecodeError`."""
    if encoding == "otlp_proto":
        request = _parse_proto(ExportTraceServiceRequest, value)
        return [
            _proto_span(span, resource, scope.scope.name)
            for rs in request.resource_spans
            for resource in (_proto_attributes(rs.resource.attributes),)
            for scope in rs.scope_spans
            for span in scope.spans
        ]
    spans = _request_spans(value, None)
    if spans is not None:
        return cast(list[Span], spans)  # without `whole`, every span whole
    return _json_spans(value)


def _json_spans(value: bytes | None) -> list[Span]:
    obj = _parse_json(value, "resourceSpans")
    return [
        _json_span(span, resource, str(_mapping(scope.get("scope")).get("name", "")))
        for rs in map(_mapping, _list(obj.get("resourceSpans")))
        for resource in (_json_attributes(_mapping(rs.get("resource")).get("attributes")),)
        for scope in map(_mapping, _list(rs.get("scopeSpans")))
        for span in map(_mapping, _list(scope.get("spans")))
    ]


def read_spans_if(
    value: bytes | None, encoding: Encoding, whole: Callable[[Attributes], bool]
) -> list[Span | Attributes]:
    """`read_spans`, but a span whose attributes `whole` declines comes as its attributes alone: it is read and checked
    as `read_spans` reads it (a bad value still refuses the record), without its ids, times and events being kept."""
    if encoding != "otlp_proto":
        spans = _request_spans(value, whole)
        if spans is not None:
            return spans
        return [span if whole(span.attributes) else span.attributes for span in _json_spans(value)]
    request = _parse_proto(ExportTraceServiceRequest, value)
    out: list[Span | Attributes] = []
    for rs in request.resource_spans:
        resource = _proto_attributes(rs.resource.attributes)
        for scope in rs.scope_spans:
            name = scope.scope.name
            for span in scope.spans:
                attributes = _proto_attributes(span.attributes)
                if whole(attributes):
                    out.append(_proto_span(span, resource, name, attributes))
                    continue
                for event in span.events:
                    _proto_attributes(event.attributes)  # read only to be checked, as read_spans reads it
                out.append(attributes)
    return out


def read_logs(value: bytes | None, encoding: Encoding) -> list[LogRecord]:
    """The log records of one logs record, in the order the request holds them; raises `DecodeError`."""
    if encoding == "otlp_proto":
        request = _parse_proto(ExportLogsServiceRequest, value)
        return [
            LogRecord(
                log.trace_id.hex(),
                log.span_id.hex(),
                log.event_name,
                log.time_unix_nano or log.observed_time_unix_nano,
                _proto_value(log.body) if log.HasField("body") else None,
                _proto_attributes(log.attributes),
                resource,
            )
            for rl in request.resource_logs
            for resource in (_proto_attributes(rl.resource.attributes),)
            for scope in rl.scope_logs
            for log in scope.log_records
        ]
    obj = _parse_json(value, "resourceLogs")
    return [
        LogRecord(
            _hex_id(log.get("traceId")),
            _hex_id(log.get("spanId")),
            str(log.get("eventName", "")),
            _int(log.get("timeUnixNano")) or _int(log.get("observedTimeUnixNano")),
            _json_value(log["body"]) if isinstance(log.get("body"), dict) else None,
            _json_attributes(log.get("attributes")),
            resource,
        )
        for rl in map(_mapping, _list(obj.get("resourceLogs")))
        for resource in (_json_attributes(_mapping(rl.get("resource")).get("attributes")),)
        for scope in map(_mapping, _list(rl.get("scopeLogs")))
        for log in map(_mapping, _list(scope.get("logRecords")))
    ]


# ---- protobuf ---------------------------------------------------------------------------------------------------


def _parse_proto(kind: type[Any], value: bytes | None) -> Any:
    if not value:
        raise DecodeError("empty_value", "record has no value")
    try:
        return kind.FromString(value)
    except (ProtobufDecodeError, ValueError, RecursionError) as e:
        raise DecodeError("invalid_otlp", f"not an OTLP protobuf {kind.__name__}: {e}") from e


def _proto_span(span: Any, resource: Attributes, scope: str, attributes: Attributes | None = None) -> Span:
    events = span.events
    return Span(
        span.trace_id.hex(),
        span.span_id.hex(),
        span.name,
        span.kind,
        span.start_time_unix_nano,
        span.end_time_unix_nano,
        _proto_attributes(span.attributes) if attributes is None else attributes,
        tuple(SpanEvent(e.name, e.time_unix_nano, _proto_attributes(e.attributes)) for e in events) if events else (),
        resource,
        scope,
    )


def _proto_attributes(pairs: Any) -> Attributes:
    out: Attributes = {}
    for kv in pairs:
        kv_typed: KeyValue = kv
        value = kv_typed.value
        which = value.WhichOneof("value")
        # The common scalars as _proto_value reads them, without a call per value (most of a span's cost)
        out[kv_typed.key] = getattr(value, which) if which in _SCALARS else _proto_value(value)
    return out


def _proto_value(v: AnyValue, depth: int = 0) -> Any:
    if depth > _MAX_DEPTH:
        raise DecodeError("invalid_otlp", f"an attribute value nests deeper than {_MAX_DEPTH} levels")
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_proto_value(x, depth + 1) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _proto_value(kv.value, depth + 1) for kv in v.kvlist_value.values}
    if which == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, which) if which else None


# ---- OTLP/JSON --------------------------------------------------------------------------------------------------


def _parse_json(value: bytes | None, top: str) -> dict[str, Any]:
    if not value:
        raise DecodeError("empty_value", "record has no value")
    try:
        text = value.decode("utf-8")  # OTLP/JSON is UTF-8; json.loads on bytes would guess UTF-16 from a NUL
    except UnicodeDecodeError as e:
        raise DecodeError("not_utf8", f"value is not UTF-8 ({e.reason} at byte {e.start})") from e
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as e:  # a JSONDecodeError, or an int longer than Python converts
        raise DecodeError("invalid_json", f"value is not JSON: {str(e)[:200]}") from e
    if not isinstance(obj, dict) or not isinstance(obj.get(top, []), list):
        raise DecodeError("invalid_otlp", f"not an OTLP/JSON request: expected an object with a {top} list")
    return obj


@functools.cache
def _traces_decoder() -> msgspec.json.Decoder[json_request.TracesRequest[json_request.KeyValue]]:
    return json_request.traces_decoder(_MAX_DEPTH)  # built on first use: some 30 ms, for OTLP/JSON readers only


def _request_spans(value: bytes | None, whole: Callable[[Attributes], bool] | None) -> list[Span | Attributes] | None:
    """`read_spans_if` (`read_spans` without `whole`) over the request as `json_request` decodes it, or None where
    it refuses the record or the record is refused: the parsed JSON then decides, and says why."""
    if not value:
        return None
    try:
        request = _traces_decoder().decode(value)
    except (msgspec.DecodeError, RecursionError):
        return None
    out: list[Span | Attributes] = []
    ids: list[str] = []  # of every span, checked as read_spans checks them (a bad one refuses the record), at once
    try:
        for rs in request.resource_spans:
            resource = {} if rs.resource is None else _request_attributes(rs.resource.attributes)
            for ss in rs.scope_spans:
                scope = "" if ss.scope is None else ss.scope.name
                for span in ss.spans:
                    attributes = _request_attributes(span.attributes)
                    trace_id, span_id = span.trace_id, span.span_id
                    ids += (trace_id, span_id)
                    # int() reads as _int does, but for "" (_int's 0), which it refuses: the parsed JSON decides
                    kind, start, end = int(span.kind), int(span.start_time_unix_nano), int(span.end_time_unix_nano)
                    if whole is None or whole(attributes):
                        events = (
                            tuple(
                                SpanEvent(e.name, int(e.time_unix_nano), _request_attributes(e.attributes))
                                for e in span.events
                            )
                            if span.events
                            else ()
                        )
                        out.append(
                            Span(trace_id.lower(), span_id.lower(), span.name, kind, start, end, attributes, events,
                                 resource, scope)
                        )  # fmt: skip
                    else:
                        for e in span.events:  # read only to be checked, as read_spans reads them
                            int(e.time_unix_nano), _request_attributes(e.attributes)
                        out.append(attributes)
        # Separated by whitespace, the ids are all hex (as _hex_id reads them) exactly when each one is
        bytes.fromhex(" ".join(ids))
    except (DecodeError, ValueError):
        return None
    return out


def _request_attributes(pairs: list[json_request.KeyValue]) -> Attributes:
    return {  # a string without a call: most values are
        kv.key: s if (v := kv.value) is not None and (s := v.string_value) is not UNSET else _request_value(v, 0)
        for kv in pairs
    }


def _request_value(v: json_request.AnyValue | None, depth: int) -> Any:
    """`_json_value` over a decoded value (None where the key held no value)."""
    if depth > _MAX_DEPTH:
        raise DecodeError("invalid_otlp", f"an attribute value nests deeper than {_MAX_DEPTH} levels")
    if v is None:
        return None
    if v.string_value is not UNSET:
        return v.string_value
    if v.bool_value is not UNSET:
        return v.bool_value
    if v.int_value is not UNSET:
        return _int(v.int_value)
    if v.double_value is not UNSET:
        return _double(v.double_value)
    if v.array_value is not UNSET:
        return [_request_value(x, depth + 1) for x in v.array_value.values]
    if v.kvlist_value is not UNSET:
        return {kv.key: _request_value(kv.value, depth + 1) for kv in v.kvlist_value.values}
    if v.bytes_value is not UNSET:
        return v.bytes_value
    return None


def _json_span(span: dict[str, Any], resource: Attributes, scope: str) -> Span:
    return Span(
        _hex_id(span.get("traceId")),
        _hex_id(span.get("spanId")),
        str(span.get("name", "")),
        _int(span.get("kind")),
        _int(span.get("startTimeUnixNano")),
        _int(span.get("endTimeUnixNano")),
        _json_attributes(span.get("attributes")),
        tuple(
            SpanEvent(str(e.get("name", "")), _int(e.get("timeUnixNano")), _json_attributes(e.get("attributes")))
            for e in map(_mapping, _list(span.get("events")))
        ),
        resource,
        scope,
    )


def _json_attributes(pairs: Any) -> Attributes:
    return {
        str(kv["key"]): _json_value(_mapping(kv.get("value")))
        for kv in map(_mapping, _list(pairs))
        if isinstance(kv.get("key"), str)
    }


def _json_value(v: dict[str, Any], depth: int = 0) -> Any:
    if depth > _MAX_DEPTH:
        raise DecodeError("invalid_otlp", f"an attribute value nests deeper than {_MAX_DEPTH} levels")
    if "stringValue" in v:
        return str(v["stringValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "intValue" in v:
        return _int(v["intValue"])  # int64 arrives as a decimal string
    if "doubleValue" in v:
        return _double(v["doubleValue"])
    if "arrayValue" in v:
        return [_json_value(_mapping(x), depth + 1) for x in _list(_mapping(v["arrayValue"]).get("values"))]
    if "kvlistValue" in v:
        values = _list(_mapping(v["kvlistValue"]).get("values"))
        return {str(kv.get("key")): _json_value(_mapping(kv.get("value")), depth + 1) for kv in map(_mapping, values)}
    if "bytesValue" in v:
        return str(v["bytesValue"])  # base64, as the JSON mapping writes bytes
    return None


def _hex_id(value: Any) -> str:
    """An OTLP/JSON id: hex, case-insensitive (never base64, which protobuf's own JSON mapping would assume)."""
    text = str(value or "")
    try:
        bytes.fromhex(text)
    except ValueError as e:
        raise DecodeError("invalid_otlp", f"trace or span id {text[:40]!r} is not hex") from e
    return text.lower()


def _int(value: Any) -> int:
    if value is None or value == "":
        return 0
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError) as e:  # OverflowError: 1e400 reads as an infinite float
        raise DecodeError("invalid_otlp", f"{str(value)[:40]!r} is not an integer") from e


def _double(value: Any) -> float:
    try:
        return float(value)  # "NaN", "Infinity" and "-Infinity" are the JSON mapping's special values
    except (TypeError, ValueError, OverflowError) as e:  # OverflowError: an int past the largest float
        raise DecodeError("invalid_otlp", f"{str(value)[:40]!r} is not a number") from e


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
