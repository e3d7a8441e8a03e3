"""A redaction failure's dead letter: the detail names the event, the exception's type and where it was raised but
never its message (which can quote the text), and a joined call, which has no one record, is dead-lettered as its
event's JSON at its ticket's position."""

from __future__ import annotations

import json

from aiokafka import TopicPartition

from consumers.decode import decode_fields
from consumers.offsets import Ticket
from monitor.runtime.dead_letters import event_record
from schemas.errors import DecodeError, RedactionFailed

TEXT = "my card is 4539 1488 0343 6467"


def _raise_quoting(text: str) -> None:
    raise ValueError(f"cannot parse {text!r}")


def test_the_detail_names_the_event_type_and_place_but_not_the_message() -> None:
    """The reason is `redaction_failed`; the detail has the event id, the type and the raising function, not the
    text the exception quoted."""
    try:
        _raise_quoting(TEXT)
    except ValueError as e:
        failed = RedactionFailed("ev-9", e)
    assert isinstance(failed, DecodeError) and failed.reason == "redaction_failed"
    assert failed.detail.startswith("event ev-9: the redactor raised ValueError at test_redaction_failed.py:")
    assert failed.detail.endswith("(_raise_quoting)") and failed.error_type == "ValueError"
    assert TEXT not in str(failed) and "cannot parse" not in str(failed)


def test_a_joined_event_is_dead_lettered_as_its_json_at_its_tickets_position() -> None:
    """`event_record` puts the event, as JSON, at the ticket's topic, partition and offset."""
    value = json.dumps(
        {"event_id": "otlp-1", "conversation_id": "c", "timestamp": "2026-11-30T10:00:00Z",
         "user_message": "q?", "response": "r."}
    ).encode()  # fmt: skip
    decoded = decode_fields(value, topic="spans", partition=2, offset=41, record_timestamp_ms=None)
    record = event_record(decoded, Ticket(TopicPartition("spans", 2), 41, epoch=1))
    assert (record.topic, record.partition, record.offset) == ("spans", 2, 41)
    body = json.loads(record.value)
    assert body["event_id"] == "otlp-1" and body["question"] == "q?" and body["response"] == "r."
    assert body["source"] == {"topic": "spans", "partition": 2, "offset": 41}
    assert record.timestamp == int(decoded.epoch_s * 1000) and record.key is None
