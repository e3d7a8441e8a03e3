"""Generated OpenTelemetry traffic: the demo's events as GenAI spans in each dialect, many to a Collector record."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime

import pytest

from consumers.decode import decode_fields
from consumers.otlp.records import RecordContext, decode_traces_record
from consumers.otlp.wire import Encoding
from monitor.devtools.localbroker import LocalBroker
from monitor.devtools.otlp_traffic import DIALECTS, NOT_OTLP, otlp_records
from monitor.devtools.traffic import generate_events
from schemas.errors import DecodeError
from tests.harness import cli, monitor_env, read_all

CONTEXT = RecordContext("otlp_spans", 0, 0, None, now=datetime(2100, 1, 1, tzinfo=UTC))


@pytest.mark.parametrize("encoding", ["otlp_proto", "otlp_json"])
def test_every_generated_event_comes_back_with_its_labels_in_every_dialect(encoding: Encoding) -> None:
    """Mixed-dialect records decode to one event per valid generated event, with its app, model, prompt version and
    pair; the malformed ones are records the decoder refuses; agents and tools are counted, not scored."""
    values = list(generate_events(200, seed=3, malformed_share=0.05))
    wanted = [json.loads(v) for v in values if _decodes(v)]  # what the JSON path accepts
    records = list(otlp_records(values, encoding=encoding, per_record=40))
    events, skipped, dialects, refused = [], Counter[str](), Counter[str](), 0
    for record in records:
        try:
            out = decode_traces_record(record, encoding, CONTEXT)
        except DecodeError:
            assert record == NOT_OTLP
            refused += 1
            continue
        events += out.events
        skipped.update(out.skipped)
        dialects.update(out.dialects)
    invalid = sum(n for kind, n in skipped.items() if kind.startswith("invalid_span"))
    assert refused > 0 and refused + invalid == len(values) - len(wanted)
    # A record holds a resource (an app) at a time, so the order within a record is by app.
    got = Counter((e.app, e.model, e.prompt_version, e.question) for e in events)
    assert got == Counter((w["app"], w["model"], w["prompt_version"], _question(w)) for w in wanted)
    assert set(dialects) == {"gen_ai", "gen_ai_events", "openllmetry", "openinference"}
    assert skipped["invoke_agent"] == len(wanted) + invalid and 0 < skipped["execute_tool"] < len(wanted)
    assert len(DIALECTS) == 4


def _question(event: dict[str, object]) -> object:
    messages = event.get("messages")
    return event["user_message"] if messages is None else messages[0]["content"]  # type: ignore[index]


def _decodes(value: bytes) -> bool:
    try:
        decode_fields(value, topic="t", partition=0, offset=0, record_timestamp_ms=0, max_future_skew_s=None)
    except DecodeError:
        return False
    return True


async def test_produce_writes_collector_records(broker: LocalBroker, topic: str) -> None:
    """`produce --generate N --format otlp_json` sends records of many spans, which decode to the N events."""
    args = ("--generate", "60", "--malformed-share", "0", "--format", "otlp_json", "--spans-per-record", "25")
    code, _, err = await cli(
        "produce", *args, "--kafka-bootstrap-servers", broker.bootstrap, "--kafka-topic", topic, env=monitor_env()
    )
    assert code == 0, err
    records = await read_all(broker.bootstrap, topic, 3)
    assert len(records) == 3
    events = [e for r in records for e in decode_traces_record(r.value, "otlp_json", CONTEXT).events]
    assert len(events) == 60
