"""The records of a JSON topic (`RecordDecoder.items`): a common event is decoded without probing for users' feedback
(the probe scans the value), and every record still comes out as it did with the probe first: the same events, the
same feedback, the same dead-letter reason, on a feedback topic and on a plain one."""

from __future__ import annotations

import time
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.structs import ConsumerRecord
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from consumers.decode import decode_fields
from consumers.feedback import FeedbackOptions, decode_feedback, is_feedback_json
from consumers.settings import KafkaSettings
from monitor.devtools.traffic import generate_events
from monitor.judging.traffic_counts import TrafficCounter
from monitor.runtime.metrics import Metrics
from monitor.runtime.record_events import RecordDecoder, RecordItems
from schemas.errors import DecodeError
from tests.consumers.test_decode_paths import documents, plausible_documents
from tests.consumers.test_feedback_decode import conversation_events, feedback_objects
from tests.properties import examples

EVENTS, FEEDBACK = TopicPartition("conv", 0), TopicPartition("fb", 1)
OPTIONS = FeedbackOptions(frozenset(), frozenset())
RECORD_MS = int(time.time() * 1000) - 60_000


def decoder() -> RecordDecoder:
    """A decoder of two JSON topics, the second a feedback topic."""
    kafka = KafkaSettings(kafka_bootstrap_servers="localhost:9092", kafka_topics="conv,fb")
    return RecordDecoder(kafka, Metrics(), TrafficCounter(), feedback_topics=("fb",), feedback=OPTIONS)


def record(tp: TopicPartition, value: bytes | None, offset: int = 7) -> ConsumerRecord[Any, Any]:
    """A fetched record holding `value`."""
    size = len(value) if value else 0
    return ConsumerRecord(tp.topic, tp.partition, offset, RECORD_MS, 0, None, value, None, 0, size, [])


def probe_first(tp: TopicPartition, rec: ConsumerRecord[Any, Any]) -> RecordItems:
    """The items as the decoder made them before: the feedback probe first, then the event decoder."""
    kafka = KafkaSettings(kafka_bootstrap_servers="localhost:9092", kafka_topics="conv,fb")
    if is_feedback_json(rec.value):
        if tp.topic != "fb":
            raise DecodeError(
                "invalid_feedback", f"a feedback event on topic {tp.topic}, which is not in MONITOR_FEEDBACK_TOPICS"
            )
        found = decode_feedback(
            rec.value, topic=tp.topic, partition=tp.partition, offset=rec.offset, record_timestamp_ms=rec.timestamp,
            options=OPTIONS, max_bytes=kafka.max_event_bytes, max_future_skew_s=kafka.max_future_skew_s,
        )  # fmt: skip
        return RecordItems([], [found])
    event = decode_fields(
        rec.value, topic=tp.topic, partition=tp.partition, offset=rec.offset, record_timestamp_ms=rec.timestamp,
        max_bytes=kafka.max_event_bytes, max_future_skew_s=kafka.max_future_skew_s,
    )  # fmt: skip
    return RecordItems([event])


def outcome(make: Any) -> object:
    """The events and feedback made, or the dead letter's (reason, detail)."""
    try:
        items = make()
    except DecodeError as e:
        return (e.reason, e.detail)
    return (items.events, items.feedback)


@settings(
    max_examples=examples(1500),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.one_of(conversation_events(), feedback_objects(), plausible_documents(), documents(), st.binary(max_size=40)))
@example(b'{"type": "feedback"}')
@example(b'{"type": "feedback", "event_id": "e", "thumbs": "up", "user_message": "q", "response": "a"}')
@example(b'{"user_message": "q", "response": "a", "type": "event"}')
@example(b"")
def test_each_record_comes_out_as_with_the_probe_first(value: bytes) -> None:
    """Events, feedback objects, events carrying a `type` and anything else give the same items or the same dead
    letter as probing for feedback first did, on a plain topic and on a feedback topic."""
    d = decoder()
    for tp in (EVENTS, FEEDBACK):
        rec = record(tp, value)
        assert outcome(lambda: d.items(tp, rec)) == outcome(lambda: probe_first(tp, rec)), (tp.topic, value)


def test_a_common_event_is_decoded_without_the_feedback_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """The load generator's events (both shapes) are decoded without the feedback probe; a record the fast path
    declines is still probed (and a feedback object on a plain topic dead-lettered as such)."""
    probed: list[bytes] = []

    def probe(value: bytes | None) -> bool:
        probed.append(value or b"")
        return is_feedback_json(value)

    monkeypatch.setattr("monitor.runtime.record_events.is_feedback_json", probe)
    d = decoder()
    values = list(generate_events(200, seed=4, malformed_share=0.0, pii_share=0.2))
    assert all(len(d.items(EVENTS, record(EVENTS, v)).events) == 1 for v in values) and probed == []
    with pytest.raises(DecodeError) as refused:
        d.items(EVENTS, record(EVENTS, b'{"type": "feedback", "event_id": "e", "thumbs": "up"}'))
    assert refused.value.reason == "invalid_feedback" and len(probed) == 1
