"""OTLP/JSON traces records read through msgspec's structs (`consumers.otlp.json_request`) against the parsed JSON
(`json.loads` and `wire`'s walk over its dicts, what `wire` falls back to): `read_spans` and `read_spans_if` give the
same spans, attributes (values and types), events and resources, or the same error, for generated records of every
dialect and mutations of them (wrong types, strings for numbers, missing, unknown and repeated fields, nulls, lone
surrogates, NaN, numbers out of range, bad ids, values nested too deep, JSON nested near the recursion limit, bytes
that are no UTF-8); and records as the Collector writes them are read by msgspec, without the parsed JSON."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import consumers.otlp.wire as wire
from consumers.otlp.records import _is_llm
from consumers.otlp.wire import Attributes, read_logs, read_spans, read_spans_if, to_otlp_json
from monitor.devtools.otlp_traffic import DIALECTS, otlp_records
from monitor.devtools.traffic import generate_events
from schemas.errors import DecodeError
from tests.consumers.otlp.test_fast_mapping import SURROGATE, record
from tests.properties import examples


@contextmanager
def parsed_json() -> Iterator[None]:
    """Every record read the way `wire` reads what msgspec declines: `json.loads` and the walk over its dicts."""
    with patch.object(wire, "_request_spans", lambda *_: None):
        yield


@contextmanager
def msgspec_only() -> Iterator[None]:
    """Fail where a record is read through the parsed JSON."""

    def refuse(*_: object) -> None:
        raise AssertionError("read through the parsed JSON")

    with patch.object(wire, "_json_spans", refuse):
        yield


WHOLES: dict[str, Callable[[Attributes], bool]] = {
    "llm": _is_llm,
    "even": lambda a: len(a) % 2 == 0,  # any pure choice: the reader must not care which spans are kept whole
    "none": lambda a: False,
}


def outcomes(value: bytes) -> list[str]:
    """What `read_spans` and `read_spans_if` (under each choice of whole spans) give, as text that tells 1, 1.0,
    True and -0.0 apart, or the error (a `DecodeError`'s reason and detail)."""
    found = []
    for whole in (None, *WHOLES.values()):
        try:
            found.append(
                repr(read_spans(value, "otlp_json") if whole is None else read_spans_if(value, "otlp_json", whole))
            )
        except DecodeError as e:  # the only error either way may raise
            found.append(f"DecodeError({e.reason!r}, {e.detail!r})")
    return found


def assert_same(value: bytes) -> None:
    """The record reads the same through msgspec's structs as through the parsed JSON."""
    fast = outcomes(value)
    with parsed_json():
        slow = outcomes(value)
    assert fast == slow


# ---- documents: generated records, mutated ------------------------------------------------------------------------


@dataclass(frozen=True)
class Raw:
    """JSON text written as it is: what json.dumps cannot write (NaN, a number out of range, a lone surrogate)."""

    text: str


@dataclass(frozen=True, eq=False)
class Repeat:
    """A key of a JSON object that repeats another (each `Repeat` is a key of its own in a dict, written as `key`);
    json.loads and msgspec keep the last value of a repeated key."""

    key: str


def dumps(node: Any) -> str:
    """`node` as JSON text, `Raw` as it says, `Repeat` keys as the keys they repeat."""
    if isinstance(node, Raw):
        return node.text
    if isinstance(node, dict):
        return "{" + ",".join(f"{json.dumps(getattr(k, 'key', k))}:{dumps(v)}" for k, v in node.items()) + "}"
    if isinstance(node, list):
        return "[" + ",".join(dumps(v) for v in node) + "]"
    return json.dumps(node, ensure_ascii=False)


def nested(depth: int, leaf: str = "1") -> Raw:
    """JSON arrays nested `depth` deep."""
    return Raw("[" * depth + leaf + "]" * depth)


def any_value(depth: int, kvlist: bool, leaf: Any = None) -> dict[str, Any]:
    """An attribute value nesting `depth` levels below the attribute (in arrays, or in key-value lists), down to
    `leaf` (a string value by default)."""
    value: dict[str, Any] = {"stringValue": "leaf"} if leaf is None else leaf
    for _ in range(depth):
        value = (
            {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
            if kvlist
            else {"arrayValue": {"values": [value]}}
        )
    return value


SCALARS = st.sampled_from(
    [
        None, True, False, 0, 1, -5, 2**63, 2**64 + 1, 1.5, "", "5", " 7 ", "1_0", "x", "\u0663", "NaN", "Infinity",
        "-inf", "1e3", "ABCDEF0123456789", "ab cd", "abc", "0x10", "\x00", "\u00e9",
        Raw("-0"), Raw("-0.0"), Raw("1.0"), Raw("1e2"), Raw("1e400"), Raw("-1e400"), Raw("1e-400"), Raw("NaN"),
        Raw("Infinity"), Raw("-Infinity"), Raw("1" + "0" * 30), Raw("1" + "0" * 4299), Raw("1" + "0" * 4300),
        Raw('"\\ud800"'), Raw('"a\\udc00"'), Raw('"\\ud83d\\ude00"'), Raw('"\\u0000"'),
    ]
)  # fmt: skip
VALUES = st.one_of(
    SCALARS,
    st.sampled_from(
        [
            [], {}, [1], {"a": 1}, ["x"], {"stringValue": "s"}, {"intValue": "12"}, {"intValue": 12},
            {"intValue": " 12"}, {"intValue": ""}, {"intValue": 1.0}, {"doubleValue": "NaN"}, {"doubleValue": 1},
            {"doubleValue": "1e999"}, {"doubleValue": Raw("-0")}, {"boolValue": "false"}, {"boolValue": 0},
            {"bytesValue": "AQI="}, {"arrayValue": {}}, {"arrayValue": None}, {"kvlistValue": {"values": [{}]}},
            {"kvlistValue": {"values": [{"key": "k"}]}}, {"stringValue": None}, {"stringValueStrindex": 3},
            {"stringValue": "s", "intValue": "x"}, {"junk": 1}, [{"key": "k", "value": {"stringValue": "v"}}],
            [{"key": 5}], [{"value": {"stringValue": "v"}}], [None],
        ]
    ),
    st.builds(any_value, st.sampled_from([3, 31, 32, 33, 40]), st.booleans()),
    st.builds(nested, st.sampled_from([3, 500, 985, 990, 995, 1000, 3000])),
)  # fmt: skip
FIELDS = st.sampled_from(
    ["junk", "stringValueStrindex", "keyStrindex", "droppedAttributesCount", "flags", "status", "links", "name",
     "kind", "attributes", "traceId", "scope", "resource"]
)  # fmt: skip


def slots(node: Any, into: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Every (container, key or index) of the tree, in document order."""
    if isinstance(node, dict):
        for k, v in node.items():
            into.append((node, k))
            slots(v, into)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            into.append((node, i))
            slots(v, into)
    return into


@st.composite
def mutated(draw: st.DrawFn, document: Any) -> Any:
    """The document with a few of its fields replaced, removed, added or repeated."""
    for _ in range(draw(st.integers(0, 3))):
        places = slots(document, [])
        if not places:
            break
        parent, key = draw(st.sampled_from(places))
        how = draw(st.sampled_from(["replace", "replace", "remove", "add", "repeat_before", "repeat_after"]))
        if how == "replace" or not isinstance(parent, dict):
            parent[key] = copy.deepcopy(draw(VALUES))
        elif how == "remove":
            del parent[key]
        elif how == "add":
            parent[draw(FIELDS)] = copy.deepcopy(draw(VALUES))
        else:  # a key twice: the last one counts, whichever it is
            items = list(parent.items())
            at = [k for k, _ in items].index(key) + (how == "repeat_after")
            items.insert(at, (Repeat(getattr(key, "key", key)), copy.deepcopy(draw(VALUES))))
            parent.clear()
            parent.update(items)
    return document


MIXED: Literal["mixed"] = "mixed"
# Records of every dialect as the monitor's traffic generator writes them, 3 calls to a record
TRAFFIC = [
    value
    for dialect in (*DIALECTS, MIXED)
    for value in otlp_records(
        generate_events(6, seed=3, malformed_share=0.0), encoding="otlp_json", dialect=dialect, per_record=3
    )
]


@st.composite
def documents(draw: st.DrawFn) -> bytes:
    """A generated traces record (spans of every dialect, some with values nested too deep or lone surrogates) as
    OTLP/JSON, often mutated, sometimes broken at the byte level."""
    if draw(st.booleans()):
        text = to_otlp_json(draw(record())).decode().replace(SURROGATE, "\\ud800")
    else:
        text = draw(st.sampled_from(TRAFFIC)).decode()
    tree = draw(mutated(json.loads(text)))
    value = dumps(tree).encode("utf-8", "surrogatepass")  # a raw lone surrogate: bytes that are no UTF-8
    damage = draw(st.sampled_from(["none"] * 12 + ["truncate", "bom", "trailing", "invalid_utf8", "control"]))
    if damage == "truncate":
        value = value[: draw(st.integers(0, len(value)))]
    elif damage == "bom":
        value = b"\xef\xbb\xbf" + value
    elif damage == "trailing":
        value += draw(st.sampled_from([b" ", b"\n", b"x", b"{}", b"\x00"]))
    elif damage in ("invalid_utf8", "control"):
        at = draw(st.integers(0, len(value)))
        value = value[:at] + (b"\xff" if damage == "invalid_utf8" else b"\x01") + value[at:]
    return value


_LARGE = [HealthCheck.filter_too_much, HealthCheck.too_slow, HealthCheck.data_too_large]


@pytest.mark.long(seconds=10)
@settings(max_examples=examples(1000), deadline=None, suppress_health_check=_LARGE)
@given(documents())
def test_msgspec_and_the_parsed_json_read_alike(value: bytes) -> None:
    """Generated records of every dialect, mutated (wrong types, strings for numbers, missing, unknown and repeated
    fields, nulls, lone surrogates, NaN, numbers out of range, values nested too deep, JSON nested near the recursion
    limit, broken bytes) read the same spans, attributes, events and resources, or fail the same way, either way."""
    assert_same(value)


# ---- cases named, so that they are never left to chance ------------------------------------------------------------


def _span(**fields: Any) -> dict[str, Any]:
    span = {
        "traceId": "5143EFEB911510D56CF9F261C6A6D6C8",
        "spanId": "c7fa362aef4c560f",
        "name": "chat",
        "kind": 3,
        "startTimeUnixNano": "1796600087949265920",
        "endTimeUnixNano": 1796600087949265921,
        "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}],
    }
    span.update(fields)
    return span


def _request(*spans: dict[Any, Any], resource: Any = None) -> Any:
    resource = resource or {"attributes": [{"key": "service.name", "value": {"stringValue": "bot"}}]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": {"name": "s"}, "spans": list(spans)}]}]}


def _attribute(value: Any) -> dict[str, Any]:
    return _span(
        attributes=[{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}, {"key": "v", "value": value}]
    )


CASES = {
    "every kind of value": _request(
        _span(
            attributes=[
                {"key": "s", "value": {"stringValue": "x"}}, {"key": "b", "value": {"boolValue": False}},
                {"key": "i", "value": {"intValue": "-12"}}, {"key": "j", "value": {"intValue": 2**70}},
                {"key": "d", "value": {"doubleValue": 1}}, {"key": "n", "value": {"doubleValue": "NaN"}},
                {"key": "z", "value": {"doubleValue": Raw("-0.0")}}, {"key": "y", "value": {"bytesValue": "AQI="}},
                {"key": "a", "value": {"arrayValue": {"values": [{"intValue": 1}, {}, {"boolValue": True}]}}},
                {"key": "k", "value": {"kvlistValue": {"values": [{"key": "x", "value": {"doubleValue": 2.5}}]}}},
                {"key": "l", "value": {"kvlistValue": {"values": [{"key": "y"}]}}},
                {"key": "e", "value": {}}, {"key": "u", "value": None}, {"key": "m"},
                {"key": "s", "value": {"stringValue": "last"}},
            ],
            events=[{"name": "gen_ai.choice", "timeUnixNano": "5", "attributes": [{"key": "i", "value": {}}]}],
            links=[{"traceId": "00", "attributes": [{"key": "l", "value": {"stringValue": "x"}}]}],
            status={"code": 2, "message": "boom"}, parentSpanId="ab", flags=256, droppedAttributesCount=0,
        ),
        _span(attributes=[{"key": "gen_ai.agent.name", "value": {"stringValue": "a"}}], events=[{"name": "e"}]),
    ),
    "precedence of a value's fields": _request(_attribute({"boolValue": True, "stringValue": "s", "intValue": "x"})),
    "precedence of a nested value's fields": _request(
        _attribute(
            {
                "arrayValue": {
                    "values": [
                        {"bytesValue": "AQI=", "boolValue": False, "stringValue": "s", "intValue": "x"},
                        {"kvlistValue": {}, "doubleValue": "x", "intValue": 7, "boolValue": True},
                        {"bytesValue": "AQI=", "arrayValue": {}, "doubleValue": 1.5, "intValue": "8"},
                        {"bytesValue": "AQI=", "kvlistValue": {}, "arrayValue": {"values": [{}]}, "doubleValue": 2},
                        {"bytesValue": "AQI=", "kvlistValue": {"values": [{"key": "k"}]}, "arrayValue": {"values": []}},
                        {"bytesValue": "AQI=", "kvlistValue": {"values": [{"key": "k"}]}},
                    ]
                }
            }
        )
    ),
    "a repeated field": _request(_attribute({"stringValue": "first", Repeat("stringValue"): "last"})),
    "a repeated field, the last one a string": _request(_attribute({"stringValue": 5, Repeat("stringValue"): "s"})),
    "a repeated field, the last one a number": _request(_attribute({"stringValue": "s", Repeat("stringValue"): 5})),
    "repeated attributes": _request(
        _span(attributes=[{"key": "a", "value": {"stringValue": "1"}}, {"key": "a", "value": {"intValue": 2}}])
    ),
    "an attribute without key": _request(_span(attributes=[{"value": {"stringValue": "v"}}])),
    "an attribute with a number for key": _request(_span(attributes=[{"key": 5, "value": {"stringValue": "v"}}])),
    "a pair without key": _request(_attribute({"kvlistValue": {"values": [{"value": {"stringValue": "v"}}]}})),
    "a null string": _request(_attribute({"stringValue": None})),
    "a string for a bool": _request(_attribute({"boolValue": "false"})),
    "an int with blanks": _request(_attribute({"intValue": " 12 "})),
    "an empty int": _request(_attribute({"intValue": ""})),
    "a float for an int": _request(_attribute({"intValue": 1.0})),
    "an int out of float range": _request(_attribute({"doubleValue": Raw("1" + "0" * 400)})),
    "a float out of range": _request(_attribute({"doubleValue": Raw("1e400")})),
    "NaN as a number": _request(_attribute({"doubleValue": Raw("NaN")})),
    "a lone surrogate": _request(_attribute({"stringValue": Raw('"\\ud800"')})),
    "a lone surrogate in a name": _request(_span(name=Raw('"\\udfff"'))),
    "a time as an empty string": _request(_span(startTimeUnixNano="")),
    "a time with blanks": _request(_span(startTimeUnixNano=" 12")),
    "a time of 4301 digits": _request(_span(startTimeUnixNano=Raw("1" + "0" * 4300))),
    "a kind by name": _request(_span(kind="SPAN_KIND_CLIENT")),
    "a kind out of range": _request(_span(kind=Raw("1e400"))),
    "a null kind": _request(_span(kind=None)),
    "ids with blanks": _request(_span(traceId="ab cd", spanId=" ef ")),
    "an odd id": _request(_span(spanId="abc")),
    "an odd id on a skipped span": _request(_span(spanId="abc", attributes=[])),
    "ids that are hex only together": _request(_span(traceId="ab c", spanId="d ef")),
    "a bad event time on a skipped span": _request(_span(attributes=[], events=[{"timeUnixNano": "x"}])),
    "a value nested too deep in a skipped span's event": _request(
        _span(attributes=[], events=[{"attributes": [{"key": "d", "value": any_value(33, False)}]}])
    ),
    "a value nested as deep as may be": _request(_attribute(any_value(32, True))),
    "an empty value one level too deep": _request(_attribute(any_value(33, False, {}))),
    "a key without value one level too deep": _request(
        _attribute(any_value(32, True, {"kvlistValue": {"values": [{"key": "k"}]}}))
    ),
    "an empty array as deep as may be": _request(_attribute(any_value(32, False, {"arrayValue": {"values": []}}))),
    "an unknown field": _request(_span(junk={"a": [1, 2]})),
    "snake_case fields": _request(_span(trace_id="00")),
    "a null field": _request(_span(events=None)),
    "no resource and no scope": {"resourceSpans": [{"scopeSpans": [{"spans": [_span()]}]}]},
    "an empty request": {},
    "resourceSpans null": {"resourceSpans": None},
    "not an object": [1],
}  # fmt: skip


@pytest.mark.parametrize("name", CASES)
def test_named_cases_read_alike(name: str) -> None:
    """Each named record (every kind of value, the precedence of a value's fields, repeated fields, nulls, strings for
    numbers, numbers out of range, NaN, lone surrogates, bad ids and times on kept and skipped spans, values nested as
    deep as may be and one level deeper, unknown fields, JSON nested about as deep as the parsers allow) reads the same
    either way."""
    assert_same(dumps(CASES[name]).encode())


def test_nesting_about_the_recursion_limit() -> None:
    """JSON nested from well within to well past where the parsers give up (`json.loads` and msgspec stop at depths a
    few levels apart, which move with the stack they run on), in an unknown field, in attributes that a repeated key
    replaces, and in a link's attributes, which are never read: it reads the same either way."""

    def refused(depth: int) -> bool:
        with parsed_json():
            return outcomes(dumps(_request(_span(junk=nested(depth)))).encode())[0].startswith("DecodeError")

    edge = next(d for d in range(100, 5000, 50) if refused(d))  # json.loads gives up within 50 levels below
    for depth in range(edge - 100, edge + 50):
        assert_same(dumps(_request(_span(junk=nested(depth)))).encode())
        levels = depth // 3  # three JSON levels to each level of a value
        first = [{"key": "d", "value": Raw('{"arrayValue":{"values":[' * levels + "{}" + "]}}" * levels)}]
        assert_same(dumps(_request(_span(attributes=first) | {Repeat("attributes"): []})).encode())
        assert_same(dumps(_request(_span(links=[{"attributes": first}]))).encode())


@pytest.mark.parametrize(
    "name",
    ["every kind of value", "precedence of a value's fields", "precedence of a nested value's fields",
     "a repeated field", "repeated attributes", "an int with blanks", "ids with blanks",
     "a value nested as deep as may be", "no resource and no scope", "an empty request"],
)  # fmt: skip
def test_named_cases_that_msgspec_reads(name: str) -> None:
    """The named records that hold only what OTLP/JSON allows are read by msgspec, without the parsed JSON (so the
    comparison above compares the two readers, not the parsed JSON with itself)."""
    with msgspec_only():
        outcomes(dumps(CASES[name]).encode())


# Named by position: the records hold the time they were made, and each xdist worker collects its own.
@pytest.mark.parametrize("value", TRAFFIC[::3], ids=[f"record-{i}" for i in range(0, len(TRAFFIC), 3)])
def test_the_collectors_records_are_read_by_msgspec(value: bytes) -> None:
    """Records of every dialect as the Collector writes them are read by msgspec's structs, not the parsed JSON."""
    with msgspec_only():
        outcomes(value)


def test_what_json_loads_cannot_hold_refuses_the_record() -> None:
    """A number the parsed JSON cannot hold (an int of 4301 digits, 1e400 for an int, an int past the largest float)
    refuses the record as invalid OTLP/JSON, a `DecodeError` like any other, rather than escaping as another error."""
    for value in (
        _request(_span(junk=Raw("1" + "0" * 4300))),
        _request(_span(kind=Raw("1e400"))),
        _request(_attribute({"doubleValue": Raw("1" + "0" * 400)})),
    ):
        with pytest.raises(DecodeError):
            read_spans(dumps(value).encode(), "otlp_json")


def test_a_null_resource_holds_nothing() -> None:
    """A null in `resourceSpans` or `resourceLogs` holds no spans or log records (as a null scope or span does),
    rather than failing the record with another error than `DecodeError`."""
    spans = read_spans(dumps({"resourceSpans": [None, _request(_span())["resourceSpans"][0]]}).encode(), "otlp_json")
    assert [s.span_id for s in spans] == ["c7fa362aef4c560f"]
    assert read_logs(b'{"resourceLogs": [null]}', "otlp_json") == []
