"""An OTLP/JSON `ExportTraceServiceRequest` decoded by msgspec into structs: the walking that `wire` does in Python
over `json.loads`' dicts, done in C. `wire` reads its spans from them, and reads the record its own way when the
decoder refuses it.

The structs hold exactly the fields of the OTLP messages, each of one JSON type, so that whatever they decode,
`json.loads` reads alike (the same values, the last of a repeated key) and `wire` reads it the same way. The rest is
refused: a field of another type (`null`, a number for a string: `wire` coerces those), an unknown field, a lone
surrogate, `NaN`, a float out of range, a value that is no JSON. Nothing nests deeper than an attribute value may:
each level of `AnyValue` is a type of its own, the last one empty, so that no record the decoder takes comes near the
parsers' recursion limits, where `json.loads` and msgspec would give up at different depths."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

Scalar = str | int | float | bool | None  # a field `wire` never reads: any JSON scalar, never nested


def _unread(name: str, *, many: bool = False) -> Any:
    """A field `wire` never reads, by its OTLP/JSON name (the struct's own starts with `_`): declared all the same, so
    that an unknown field can be refused."""
    return msgspec.field(default_factory=list, name=name) if many else msgspec.field(default=None, name=name)


class _Message(msgspec.Struct, rename="camel", forbid_unknown_fields=True, gc=False):
    """An OTLP message in OTLP/JSON (lowerCamelCase names); gc=False: a decoded request holds no cycles."""


class AnyValue(_Message):
    """An attribute value: `wire` takes the first of its fields present, in this order."""

    string_value: str | UnsetType = UNSET
    bool_value: bool | UnsetType = UNSET
    int_value: int | str | UnsetType = UNSET  # an int64 arrives as a decimal string
    double_value: float | str | UnsetType = UNSET  # "NaN", "Infinity" and "-Infinity" arrive as strings
    array_value: ArrayValue | UnsetType = UNSET
    kvlist_value: KeyValueList | UnsetType = UNSET
    bytes_value: str | UnsetType = UNSET
    _string_value_strindex: Scalar = _unread("stringValueStrindex")


class ArrayValue(_Message):
    """`arrayValue`: the values of an array."""

    values: list[AnyValue] = []


class KeyValue(_Message):
    """An attribute, or a pair of a `kvlistValue`."""

    key: str
    value: AnyValue | None = None
    _key_strindex: Scalar = _unread("keyStrindex")


class KeyValueList(_Message):
    """`kvlistValue`: the pairs of a map."""

    values: list[KeyValue] = []


class Deeper(_Message):
    """Where a value would nest one level deeper than `wire` reads: only `{}` decodes here (and `wire` refuses it)."""


class EntityRef(_Message):
    """A resource's reference to an entity (never read)."""

    _schema_url: Scalar = _unread("schemaUrl")
    _type: Scalar = _unread("type")
    _id_keys: list[Scalar] = _unread("idKeys", many=True)
    _description_keys: list[Scalar] = _unread("descriptionKeys", many=True)


A = TypeVar("A", bound=KeyValue)  # an attribute, its value nested at most as deep as the decoder allows


class Resource(_Message, Generic[A]):
    """The resource of a `ResourceSpans`."""

    attributes: list[A] = []
    _dropped_attributes_count: Scalar = _unread("droppedAttributesCount")
    _entity_refs: list[EntityRef] = _unread("entityRefs", many=True)


class Scope(_Message, Generic[A]):
    """The instrumentation scope of a `ScopeSpans`."""

    name: str = ""
    _version: Scalar = _unread("version")
    _attributes: list[A] = _unread("attributes", many=True)
    _dropped_attributes_count: Scalar = _unread("droppedAttributesCount")


class Event(_Message, Generic[A]):
    """An event recorded on a span."""

    time_unix_nano: int | str = 0
    name: str = ""
    attributes: list[A] = []
    _dropped_attributes_count: Scalar = _unread("droppedAttributesCount")


class Link(_Message, Generic[A]):
    """A link to another span (never read)."""

    _trace_id: Scalar = _unread("traceId")
    _span_id: Scalar = _unread("spanId")
    _trace_state: Scalar = _unread("traceState")
    _attributes: list[A] = _unread("attributes", many=True)
    _dropped_attributes_count: Scalar = _unread("droppedAttributesCount")
    _flags: Scalar = _unread("flags")


class Status(_Message):
    """A span's status (never read)."""

    _message: Scalar = _unread("message")
    _code: Scalar = _unread("code")


class Span(_Message, Generic[A]):
    """A span, as `wire` reads it into its own `Span`."""

    trace_id: str = ""
    span_id: str = ""
    _trace_state: Scalar = _unread("traceState")
    _parent_span_id: Scalar = _unread("parentSpanId")
    _flags: Scalar = _unread("flags")
    name: str = ""
    kind: int | str = 0
    start_time_unix_nano: int | str = 0
    end_time_unix_nano: int | str = 0
    attributes: list[A] = []
    _dropped_attributes_count: Scalar = _unread("droppedAttributesCount")
    events: list[Event[A]] = []
    _dropped_events_count: Scalar = _unread("droppedEventsCount")
    _links: list[Link[A]] = _unread("links", many=True)
    _dropped_links_count: Scalar = _unread("droppedLinksCount")
    _status: Status | None = _unread("status")


class ScopeSpans(_Message, Generic[A]):
    """The spans of one instrumentation scope."""

    scope: Scope[A] | None = None
    spans: list[Span[A]] = []
    _schema_url: Scalar = _unread("schemaUrl")


class ResourceSpans(_Message, Generic[A]):
    """The spans of one resource."""

    resource: Resource[A] | None = None
    scope_spans: list[ScopeSpans[A]] = []
    _schema_url: Scalar = _unread("schemaUrl")


class TracesRequest(_Message, Generic[A]):
    """An `ExportTraceServiceRequest`."""

    resource_spans: list[ResourceSpans[A]] = []


def traces_decoder(max_depth: int) -> msgspec.json.Decoder[TracesRequest[KeyValue]]:
    """A decoder of traces requests whose attribute values nest at most `max_depth` levels below the attribute; a
    value one level deeper decodes only as an empty `Deeper` (typed as an `AnyValue`: check the depth before reading
    a value). It raises `msgspec.DecodeError` (a `ValidationError` among them) or `RecursionError`."""
    value: Any = Deeper
    array: Any
    pair: Any
    pairs: Any
    for level in reversed(range(max_depth + 1)):  # from the deepest: each level's types name the next one's
        array = msgspec.defstruct(f"ArrayValue{level}", [("values", list[value], [])], bases=(ArrayValue,))
        pair = msgspec.defstruct(f"KeyValue{level}", [("value", value | None, None)], bases=(KeyValue,))
        pairs = msgspec.defstruct(f"KeyValueList{level}", [("values", list[pair], [])], bases=(KeyValueList,))
        value = msgspec.defstruct(
            f"AnyValue{level}",
            [("array_value", array | UnsetType, UNSET), ("kvlist_value", pairs | UnsetType, UNSET)],
            bases=(AnyValue,),
        )
    attribute = msgspec.defstruct("Attribute", [("value", value | None, None)], bases=(KeyValue,))
    return msgspec.json.Decoder(TracesRequest[attribute])  # type: ignore[valid-type]
