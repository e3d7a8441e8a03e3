"""Reading one answer's record back from Kafka for feedback on it: where it is looked for (the carried position, the
key's partition, every partition), what is read (a short range, capped), how the answer is picked (event id,
conversation and turn, span ids) and what is said when it is not there (on tansu, and the pure decisions)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
import structlog
import structlog.testing
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.structs import ConsumerRecord
from opentelemetry.trace import format_span_id, format_trace_id

from consumers.decode import DecodedEvent, decode_fields
from consumers.otlp.records import RecordContext, decode_traces_record
from consumers.settings import KafkaSettings
from monitor.devtools.localbroker import LocalBroker
from monitor.feedback.answer_reader import AgedOut, AnswerReader, Decode, Found, NotFound
from monitor.feedback.answer_search import key_partition
from schemas.feedback import AnswerRef
from tests.consumers.otlp.collector import collector_record, recorded_spans

LOOKBACK_S = 86_400.0


def _flat(event_id: str, conversation_id: str) -> bytes:
    return json.dumps(
        {"event_id": event_id, "conversation_id": conversation_id, "app": "support-bot", "model": "m",
         "prompt_version": "v1", "user_message": f"question {event_id}", "response": f"answer {event_id}"}
    ).encode()  # fmt: skip


def _chat(event_id: str, conversation_id: str, turns: int) -> bytes:
    """A chat event whose judged question is the `turns`-th user message (its turn index is `turns - 1`)."""
    messages: list[dict[str, str]] = []
    for i in range(turns):
        messages += [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]
    body = {"event_id": event_id, "conversation_id": conversation_id, "app": "support-bot", "messages": messages}
    return json.dumps(body).encode()


def decode_json(tp: TopicPartition, record: ConsumerRecord[Any, Any]) -> list[DecodedEvent]:
    """The monitor's JSON events, decoded as the pipeline decodes them."""
    event = decode_fields(
        record.value, topic=tp.topic, partition=tp.partition, offset=record.offset,
        record_timestamp_ms=record.timestamp, max_future_skew_s=None,
    )  # fmt: skip
    return [event]


def decode_spans(tp: TopicPartition, record: ConsumerRecord[Any, Any]) -> list[DecodedEvent]:
    """A Collector's protobuf traces records, decoded as the pipeline decodes them."""
    context = RecordContext(tp.topic, tp.partition, record.offset, record.timestamp, max_future_skew_s=None)
    return decode_traces_record(record.value, "otlp_proto", context).events


async def _new_topic(broker: LocalBroker, partitions: int) -> str:
    name = f"answers-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    finally:
        await admin.close()
    return name


async def _produce(
    broker: LocalBroker, topic: str, records: Sequence[tuple[str | None, bytes]]
) -> list[tuple[int, int]]:
    """Send (key, value) records with aiokafka's default partitioner; returns where each landed (partition,
    offset)."""
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        sent = [await producer.send(topic, value, key=key.encode() if key else None) for key, value in records]
        landed = [await future for future in sent]
    finally:
        await producer.stop()
    return [(meta.partition, meta.offset) for meta in landed]


@pytest.fixture
async def reader_for(broker: LocalBroker) -> AsyncIterator[Any]:
    """Builds started readers on the test broker (closed at the end)."""
    readers: list[AnswerReader] = []

    async def make(topics: Sequence[str], decode: Decode = decode_json, read_max_records: int = 20_000) -> AnswerReader:
        kafka = KafkaSettings(kafka_bootstrap_servers=broker.bootstrap, kafka_topics=tuple(topics))
        reader = AnswerReader(kafka, topics, decode, read_max_records=read_max_records, lookback_s=LOOKBACK_S)
        await reader.start()
        readers.append(reader)
        return reader

    yield make
    for reader in readers:
        await reader.close()


def _conversations(n: int) -> list[tuple[str, bytes]]:
    return [(f"conv-{i}", _flat(f"ev-{i}", f"conv-{i}")) for i in range(n)]


async def test_the_answer_is_found_by_event_id_in_its_key_s_partition(
    broker: LocalBroker, topic: str, reader_for: Any
) -> None:
    """Records keyed by conversation: the answer is read from the partition its conversation id hashes to, and no
    other partition is read."""
    landed = await _produce(broker, topic, _conversations(60))
    reader = await reader_for([topic])
    target = 41
    partition, offset = landed[target]

    found = await reader.find(AnswerRef(event_id="ev-41", conversation_id="conv-41"), datetime.now(UTC), None)

    assert isinstance(found, Found)
    assert (found.event.event_id, found.position.partition, found.position.offset) == ("ev-41", partition, offset)
    assert found.position.topic == topic
    assert found.records_read == offset + 1  # that partition from its start up to the answer, nothing else


async def test_the_carried_position_is_read_exactly(broker: LocalBroker, topic: str, reader_for: Any) -> None:
    """Feedback that carries the answer's topic, partition and offset: that one record is read."""
    landed = await _produce(broker, topic, _conversations(30))
    reader = await reader_for([topic])
    partition, offset = landed[17]
    ref = AnswerRef(event_id="ev-17", topic=topic, partition=partition, offset=offset)

    found = await reader.find(ref, datetime.now(UTC), None)

    assert isinstance(found, Found)
    assert (found.event.event_id, found.position.offset, found.records_read) == ("ev-17", offset, 1)


async def test_a_carried_offset_that_holds_another_event_falls_back_to_its_partition(
    broker: LocalBroker, topic: str, reader_for: Any
) -> None:
    """A wrong carried offset (another event of the same partition): the partition is then searched by time."""
    landed = await _produce(broker, topic, [("conv-same", _flat(f"s-{i}", "conv-same")) for i in range(5)])
    partition, _ = landed[0]
    ref = AnswerRef(event_id="s-3", topic=topic, partition=partition, offset=landed[1][1])

    reader = await reader_for([topic])

    found = await reader.find(ref, datetime.now(UTC), None)

    assert isinstance(found, Found)
    assert (found.position.offset, found.records_read) == (landed[3][1], 1 + 4)  # the carried record, then 0..3


async def test_the_read_is_logged_with_its_position_and_never_the_text(
    broker: LocalBroker, topic: str, reader_for: Any
) -> None:
    """One `answer_read` line per find: the reference's ids, the outcome, the records read and where the answer
    was; nothing of the question or the answer."""
    landed = await _produce(broker, topic, _conversations(12))
    reader = await reader_for([topic])

    with structlog.testing.capture_logs() as logs:
        await reader.find(AnswerRef(event_id="ev-5", conversation_id="conv-5"), datetime.now(UTC), None)

    (line,) = [entry for entry in logs if entry["event"] == "answer_read"]
    assert (line["topic"], line["partition"], line["offset"]) == (topic, *landed[5])
    assert (line["outcome"], line["answer"]) == ("Found", "event_id=ev-5")
    assert line["records_read"] == landed[5][1] + 1
    assert not any("question ev-5" in str(v) or "answer ev-5" in str(v) for entry in logs for v in entry.values())


async def test_a_carried_partition_without_offset_is_searched_by_time(
    broker: LocalBroker, topic: str, reader_for: Any
) -> None:
    """Feedback that carries only the partition (no conversation id to hash): that partition alone is read."""
    landed = await _produce(broker, topic, _conversations(30))
    reader = await reader_for([topic])
    partition, offset = landed[8]

    found = await reader.find(AnswerRef(event_id="ev-8", partition=partition), datetime.now(UTC), None)

    assert isinstance(found, Found)
    assert (found.position.partition, found.position.offset, found.records_read) == (partition, offset, offset + 1)


async def test_the_answer_is_found_by_conversation_and_turn(broker: LocalBroker, topic: str, reader_for: Any) -> None:
    """Three events of one conversation (turns 0, 1, 2): the one with the asked turn is picked."""
    chats = [("conv-x", _chat(f"x-{t}", "conv-x", t + 1)) for t in range(3)]
    landed = await _produce(broker, topic, _conversations(10) + chats)
    reader = await reader_for([topic])

    found = await reader.find(AnswerRef(conversation_id="conv-x", turn=1), datetime.now(UTC), datetime.now(UTC))

    assert isinstance(found, Found)
    assert (found.event.event_id, found.event.turn) == ("x-1", 1)
    assert (found.position.partition, found.position.offset) == landed[11]


async def test_an_answer_not_in_the_topic_is_not_found_with_the_records_read(
    broker: LocalBroker, topic: str, reader_for: Any
) -> None:
    """An event id nobody produced: the key's partition, then the others, are read to their ends, and the outcome
    says how many records that was."""
    await _produce(broker, topic, _conversations(45))
    reader = await reader_for([topic])

    outcome = await reader.find(AnswerRef(event_id="ev-missing", conversation_id="conv-3"), datetime.now(UTC), None)

    assert isinstance(outcome, NotFound)
    assert outcome.records_read == 45
    assert "3 partition(s)" in outcome.why


async def test_an_unkeyed_answer_is_found_off_its_key_s_partition(broker: LocalBroker, reader_for: Any) -> None:
    """A producer that does not key by conversation id: the answer is found in another partition after its key's
    partition was read."""
    topic = await _new_topic(broker, 3)
    wrong = (key_partition("conv-u", 3) + 1) % 3
    keys = [k for k in (f"k{i}" for i in range(100)) if key_partition(k, 3) == wrong]
    landed = await _produce(broker, topic, [(keys[0], _flat("ev-u", "conv-u"))])
    reader = await reader_for([topic])

    found = await reader.find(AnswerRef(event_id="ev-u", conversation_id="conv-u"), datetime.now(UTC), None)

    assert isinstance(found, Found)
    assert (found.position.partition, found.position.offset) == landed[0] == (wrong, 0)


async def test_a_read_stops_at_read_max_records(broker: LocalBroker, topic: str, reader_for: Any) -> None:
    """One conversation's 250 records in one partition, the answer last: a reader allowed 100 records reads 100 and
    says it stopped there; one allowed more finds it."""
    records = [("conv-long", _flat(f"long-{i}", "conv-long")) for i in range(250)]
    await _produce(broker, topic, records)
    ref = AnswerRef(event_id="long-249", conversation_id="conv-long")

    capped = await (await reader_for([topic], read_max_records=100)).find(ref, datetime.now(UTC), None)
    found = await (await reader_for([topic], read_max_records=1000)).find(ref, datetime.now(UTC), None)

    assert isinstance(capped, NotFound)
    assert capped.records_read == 100
    assert "MONITOR_FEEDBACK_READ_MAX_RECORDS" in capped.why
    assert isinstance(found, Found)
    assert found.records_read == 250


async def test_records_that_do_not_decode_are_skipped_and_counted(
    broker: LocalBroker, topic: str, reader_for: Any
) -> None:
    """Garbage between events of the conversation: skipped, counted, and the answer past it still found."""
    records = [("conv-g", b"not json"), ("conv-g", b""), ("conv-g", _flat("g-1", "conv-g"))]
    await _produce(broker, topic, records)
    reader = await reader_for([topic])

    missing = await reader.find(AnswerRef(event_id="g-2", conversation_id="conv-g"), datetime.now(UTC), None)
    found = await reader.find(AnswerRef(event_id="g-1", conversation_id="conv-g"), datetime.now(UTC), None)

    assert isinstance(missing, NotFound)
    assert (missing.records_read, missing.undecodable) == (3, 2)
    assert "2 record(s) did not decode" in missing.why
    assert isinstance(found, Found)


async def test_an_otlp_answer_is_found_by_its_span_ids(broker: LocalBroker, reader_for: Any) -> None:
    """A Collector's traces record from the SDK's encoder, holding two calls: feedback naming the second call's
    trace and span ids gets that call's event."""
    topic = await _new_topic(broker, 2)
    question = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "q"}]}])
    with recorded_spans() as (provider, exporter):
        tracer = provider.get_tracer("t")
        for n in (1, 2):
            with tracer.start_as_current_span("chat") as span:
                answer = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": f"a{n}"}]}])
                span.set_attributes({
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.response.id": f"resp-{n}",
                    "gen_ai.input.messages": question, "gen_ai.output.messages": answer,
                })  # fmt: skip
        spans = exporter.get_finished_spans()
    second = spans[1].get_span_context()
    assert second is not None
    await _produce(broker, topic, [(None, collector_record(spans, "otlp_proto"))])
    reader = await reader_for([topic], decode=decode_spans)
    ref = AnswerRef(trace_id=format_trace_id(second.trace_id), span_id=format_span_id(second.span_id))

    found = await reader.find(ref, datetime.now(UTC), None)

    assert isinstance(found, Found)
    assert found.event.event_id == "resp-2"


async def test_concurrent_finds_share_the_reader(broker: LocalBroker, topic: str, reader_for: Any) -> None:
    """Finds started together on one reader each get their own answer."""
    await _produce(broker, topic, _conversations(40))
    reader = await reader_for([topic])
    ids = (3, 19, 27, 38)

    outcomes = await asyncio.gather(
        *(reader.find(AnswerRef(event_id=f"ev-{i}", conversation_id=f"conv-{i}"), datetime.now(UTC), None) for i in ids)
    )

    assert [o.event.event_id if isinstance(o, Found) else o for o in outcomes] == [f"ev-{i}" for i in ids]


@pytest.mark.parametrize("partitions", [3, 7])
async def test_the_key_partition_is_where_aiokafka_s_producer_puts_a_keyed_record(
    broker: LocalBroker, partitions: int
) -> None:
    """For many conversation ids (ASCII and not), `key_partition` names the partition the default partitioner
    chose."""
    topic = await _new_topic(broker, partitions)
    keys = [f"conv-{i}" for i in range(40)] + ["ünïcode-ключ-会话", "", "a", "ab", "abc", str(uuid.uuid4())]
    keys = [k for k in keys if k]  # an empty key is no key: aiokafka spreads those
    landed = await _produce(broker, topic, [(k, b"x") for k in keys])

    assert [key_partition(k, partitions) for k in keys] == [p for p, _ in landed]


async def test_aged_out_is_not_reported_on_a_log_that_keeps_everything(
    broker: LocalBroker, topic: str, reader_for: Any
) -> None:
    """tansu keeps every record (it implements neither retention nor DeleteRecords): an answer missing from a full
    log is not found, never aged out."""
    await _produce(broker, topic, _conversations(5))
    reader = await reader_for([topic])

    outcome = await reader.find(AnswerRef(event_id="gone", topic=topic, partition=0, offset=0), datetime.now(UTC), None)

    assert not isinstance(outcome, AgedOut)
