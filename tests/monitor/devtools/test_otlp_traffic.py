"""Generated OpenTelemetry traffic: the demo's events as GenAI spans in each dialect, many to a Collector record."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime

import pytest

from consumers.decode import DecodedEvent, decode_fields
from consumers.otlp.records import RecordContext, decode_traces_record
from consumers.otlp.wire import Encoding
from monitor.devtools.demo_traffic import story_event
from monitor.devtools.localbroker import LocalBroker
from monitor.devtools.otlp_traffic import DIALECTS, NOT_OTLP, otlp_records
from monitor.devtools.traffic import generate_events
from schemas.errors import DecodeError
from tests.harness import cli, monitor_env, read_all

CONTEXT = RecordContext("otlp_spans", 0, 0, None, now=datetime(2100, 1, 1, tzinfo=UTC))


@pytest.mark.parametrize("encoding", ["otlp_proto", "otlp_json"])
def test_every_generated_event_comes_back_with_its_labels_in_every_dialect(encoding: Encoding) -> None:
    """Mixed-dialect records decode to one event per valid generated event, with the app, model, prompt version,
    question (the last user turn of a conversation) and answer its JSON decodes to; the malformed ones are records
    the decoder refuses; agents and tools are counted, not scored."""
    rng = random.Random(5)
    story = [story_event(rng, datetime(2026, 12, 1, tzinfo=UTC), regressed=False) for _ in range(100)]
    values = list(generate_events(200, seed=3, malformed_share=0.05)) + story  # the demo's have conversations
    wanted = [d for d in map(_decoded, values) if d is not None]  # what the JSON path accepts
    assert sum(1 for v in story if v.count(b'"user"') > 1) > 0  # conversations of several turns
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
    got = Counter((e.app, e.model, e.prompt_version, e.question, e.response) for e in events)
    assert got == Counter((w.app, w.model, w.prompt_version, w.question, w.response) for w in wanted)
    assert set(dialects) == {"gen_ai", "gen_ai_events", "openllmetry", "openinference"}
    assert skipped["invoke_agent"] == len(wanted) + invalid and 0 < skipped["execute_tool"] < len(wanted)
    assert len(DIALECTS) == 4


def _decoded(value: bytes) -> DecodedEvent | None:
    try:
        return decode_fields(value, topic="t", partition=0, offset=0, record_timestamp_ms=0, max_future_skew_s=None)
    except DecodeError:
        return None


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
