"""Users' feedback through the broker, the service's pipeline and chDB: feedback long after its answer was judged,
before its answer is even in Kafka, on an answer sampling skipped (judged from its record read back from Kafka),
delivered twice, malformed (dead-lettered), and as OpenTelemetry `gen_ai.evaluation.result` log records."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from consumers.deadletter import H_REASON
from monitor.config import Settings
from monitor.devtools.localbroker import LocalBroker
from monitor.privacy.recognizers import builtin_recognizers
from monitor.privacy.redactor import RecognizerRedactor
from monitor.privacy.settings import DEFAULT_PHONE_REGIONS
from monitor.privacy.spans import Span
from monitor.store.async_store import AsyncStore
from monitor.store.erased_ids import record_erased
from schemas.feedback import FEEDBACK_ROLLUP_TABLE, FEEDBACK_TABLE
from tests.consumers.otlp.collector import collector_logs_record, collector_record, recorded_logs, recorded_spans
from tests.harness import RunningPipeline, all_committed, create_topic, produce_values, read_all, wait_for

NOW = datetime.now(UTC).replace(microsecond=0)


def _answer(event_id: str, *, app: str = "shop", prompt_version: str = "v12", at: datetime | None = None) -> bytes:
    at = at or datetime.now(UTC)
    return json.dumps(
        {"event_id": event_id, "conversation_id": f"c-{event_id}", "app": app, "model": "m1",
         "prompt_version": prompt_version, "timestamp": at.isoformat(), "user_message": "When did order A17 ship?",
         "response": "Thanks for getting in touch. We also sell gift cards."}
    ).encode()  # fmt: skip


def _feedback(
    feedback_id: str, event_id: str, *, thumbs: str = "down", at: datetime | None = None, **extra: Any
) -> bytes:
    at = at or datetime.now(UTC)
    return json.dumps(
        {"type": "feedback", "feedback_id": feedback_id, "event_id": event_id, "thumbs": thumbs,
         "timestamp": (at + timedelta(seconds=5)).isoformat(), **extra}
    ).encode()  # fmt: skip


def _key(values: list[bytes]) -> Callable[[int], bytes]:
    """Key each record by its conversation, as producers do (the answer's partition is found from it)."""

    def key(i: int) -> bytes:
        doc = json.loads(values[i])
        return (doc.get("conversation_id") or f"c-{doc['event_id']}").encode()

    return key


async def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    await produce_values(bootstrap, topic, values, key=_key(values))


async def _feedback_rows(store: AsyncStore, columns: str = "feedback_id, app, prompt_version, segment_source") -> list:  # type: ignore[type-arg]
    result = await store.query(
        f"SELECT {columns} FROM {store.store.database}.{FEEDBACK_TABLE} FINAL ORDER BY feedback_id"
    )
    return [tuple(r) for r in result.rows]


async def _scores(store: AsyncStore) -> list[tuple[str, str, float]]:
    result = await store.query(
        f"SELECT event_id, sample_rule, sample_rate FROM {store.store.qualified_table} FINAL ORDER BY event_id"
    )
    return [tuple(r) for r in result.rows]  # type: ignore[misc]


async def test_feedback_long_after_its_answer_counts_in_the_answers_segment(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """An answer judged and stored first; its thumbs-down (event id only, no segment) arrives later and takes the
    segment of the answer's scored row; the answer is not judged again."""
    settings = make_settings(sample_rate=1.0)
    topic = settings.kafka.topics[0]
    settings = make_settings(sample_rate=1.0, feedback_topics=topic)
    async with RunningPipeline(settings, async_store) as running:
        await _produce(broker.bootstrap, topic, [_answer("a1", prompt_version="v13")])
        await wait_for(lambda: all_committed(broker.bootstrap, settings.kafka.group_id, topic, 1), 60, "answer")
        await _produce(broker.bootstrap, topic, [_feedback("f1", "a1")])
        await wait_for(lambda: all_committed(broker.bootstrap, settings.kafka.group_id, topic, 2), 60, "feedback")
        assert running.counter("relevancy_monitor_feedback_judging", outcome="already_judged") == 1
    assert await _feedback_rows(async_store) == [("f1", "shop", "v13", "scored")]
    assert [(e, r) for e, r, _ in await _scores(async_store)] == [("a1", "base")]


async def test_a_thumbs_down_on_an_unsampled_answer_gets_it_judged_from_kafka_within_a_minute(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """Nothing sampled: a thumbs-down on an answer makes the monitor read the answer's record back from Kafka and
    judge it (sample_rule 'feedback', its inclusion probability as rate) within a minute; a thumbs-up does not."""
    settings = make_settings(sample_rate=0.0)
    topic = settings.kafka.topics[0]
    settings = make_settings(sample_rate=0.0, feedback_topics=topic)
    answers = [_answer(f"u{i}", at=datetime.now(UTC) - timedelta(seconds=30)) for i in range(40)]
    async with RunningPipeline(settings, async_store):
        await _produce(broker.bootstrap, topic, answers)
        await wait_for(lambda: all_committed(broker.bootstrap, settings.kafka.group_id, topic, 40), 60, "answers")
        sent = time.monotonic()
        await _produce(broker.bootstrap, topic, [_feedback("f-down", "u7"), _feedback("f-up", "u8", thumbs="up")])

        async def judged() -> bool:
            return len(await _scores(async_store)) == 1

        await wait_for(judged, 60, "the disliked answer judged")
        took = time.monotonic() - sent
        await wait_for(lambda: all_committed(broker.bootstrap, settings.kafka.group_id, topic, 42), 60, "feedback")
    assert took < 60
    assert await _scores(async_store) == [("u7", "feedback", 1.0)]
    assert await _feedback_rows(async_store) == [("f-down", "shop", "v12", "kafka"), ("f-up", "shop", "v12", "kafka")]


async def test_feedback_before_its_answer_is_in_kafka_waits_for_it(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """Feedback whose answer is not yet in the topic is looked for again until the answer arrives, then counts in the
    answer's segment; feedback whose answer never comes is stored as unresolved after the wait, never dropped."""
    settings = make_settings(sample_rate=0.0)
    topic = settings.kafka.topics[0]
    settings = make_settings(sample_rate=0.0, feedback_topics=topic, feedback_resolve_wait_s=8.0)
    async with RunningPipeline(settings, async_store) as running:
        await _produce(broker.bootstrap, topic, [_feedback("f-early", "late1", thumbs="up"), _feedback("f-lost", "x")])

        async def looked_once() -> bool:
            return running.counter("relevancy_monitor_feedback_answer_reads") == 0 and bool(running.pipeline.tasks.of())

        await wait_for(looked_once, 30, "the feedback waiting for its answer")
        await _produce(broker.bootstrap, topic, [_answer("late1", app="late-app")])
        await wait_for(lambda: all_committed(broker.bootstrap, settings.kafka.group_id, topic, 3), 60, "all")
    assert await _feedback_rows(async_store) == [
        ("f-early", "late-app", "v12", "kafka"),
        ("f-lost", "", "", "unresolved"),
    ]


async def test_a_redelivered_feedback_event_counts_once_and_a_malformed_one_is_dead_lettered(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """The same feedback event twice (a producer retry) is one row and one count in the rollup; a feedback object
    with both thumbs and a rating goes to the dead-letter topic with reason invalid_feedback."""
    settings = make_settings(sample_rate=1.0)
    topic = settings.kafka.topics[0]
    settings = make_settings(sample_rate=1.0, feedback_topics=topic)
    segment = {"app": "shop", "model": "m1", "prompt_version": "v12"}
    twice = _feedback("f-dup", "a9", **segment)
    bad = _feedback("f-bad", "a9", rating=2)
    async with RunningPipeline(settings, async_store):
        await _produce(broker.bootstrap, topic, [_answer("a9"), twice, twice, bad])
        await wait_for(lambda: all_committed(broker.bootstrap, settings.kafka.group_id, topic, 4), 60, "all")
    assert await _feedback_rows(async_store) == [("f-dup", "shop", "v12", "feedback")]
    rollup = await async_store.query(
        f"SELECT sum(n_feedback), sum(n_negative) FROM {async_store.store.database}.{FEEDBACK_ROLLUP_TABLE}"
    )
    assert tuple(rollup.rows[0]) == (1, 1)
    (dead,) = await read_all(broker.bootstrap, settings.kafka.dlq_topic, 1)
    assert dict(dead.headers)[H_REASON] == b"invalid_feedback"


async def test_a_feedback_event_on_a_topic_not_named_for_feedback_is_dead_lettered(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """Without MONITOR_FEEDBACK_TOPICS naming its topic, a feedback event is dead-lettered with a line that says so,
    never taken for a conversation."""
    settings = make_settings()
    topic = settings.kafka.topics[0]
    async with RunningPipeline(settings, async_store):
        await _produce(broker.bootstrap, topic, [_feedback("f1", "a1")])
        await wait_for(lambda: all_committed(broker.bootstrap, settings.kafka.group_id, topic, 1), 60, "dead letter")
    (dead,) = await read_all(broker.bootstrap, settings.kafka.dlq_topic, 1)
    assert dict(dead.headers)[H_REASON] == b"invalid_feedback"


async def test_feedback_on_its_own_topic_is_read_beside_the_conversations(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """A feedback topic apart from the conversation topic is consumed too; its rows carry its own position."""
    feedback_topic = f"{make_settings().kafka.topics[0]}.feedback"
    await create_topic(broker.bootstrap, feedback_topic, partitions=1)
    settings = make_settings(sample_rate=1.0, feedback_topics=feedback_topic)
    topic = settings.kafka.topics[0]
    async with RunningPipeline(settings, async_store):
        await _produce(broker.bootstrap, topic, [_answer("a5")])
        await wait_for(lambda: all_committed(broker.bootstrap, settings.kafka.group_id, topic, 1), 60, "answer")
        await _produce(broker.bootstrap, feedback_topic, [_feedback("f5", "a5", thumbs="up")])
        await wait_for(
            lambda: all_committed(broker.bootstrap, settings.kafka.group_id, feedback_topic, 1, partitions=1),
            60,
            "feedback",
        )
    assert await _feedback_rows(async_store, "feedback_id, kafka_topic, negative") == [("f5", feedback_topic, False)]


async def test_opentelemetry_evaluation_records_are_feedback_on_their_answers(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """`gen_ai.evaluation.result` log records written by the OpenTelemetry SDK and encoded by the exporter's encoder:
    a thumbs-down naming its answer by `gen_ai.response.id` and a rating parented to its answer's span only both
    count in the answer's segment, and each stores the answer's event id (what the judge-against-user join needs)."""
    spans_topic = f"{make_settings().kafka.topics[0]}.spans"
    logs_topic = f"{spans_topic}.logs"
    for name in (spans_topic, logs_topic):
        await create_topic(broker.bootstrap, name, partitions=1)
    with recorded_spans("support-bot") as (tracer_provider, exporter), recorded_logs() as (logger_provider, logs):
        tracer, logger = tracer_provider.get_tracer("app"), logger_provider.get_logger("feedback-widget")
        for i in range(3):
            with tracer.start_as_current_span("chat claude") as span:
                span.set_attributes(
                    {"gen_ai.operation.name": "chat", "gen_ai.request.model": "claude-test",
                     "gen_ai.response.id": f"msg_{i}", "gen_ai.conversation.id": f"conv-{i}",
                     "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text",
                                                          "content": f"When did order A{i} ship?"}]}]),
                     "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text",
                                                           "content": f"Order A{i} shipped."}]}])}
                )  # fmt: skip
                if i == 2:  # parented to the answer's span, with no response id
                    logger.emit(
                        event_name="gen_ai.evaluation.result",
                        attributes={"gen_ai.evaluation.name": "user_rating", "gen_ai.evaluation.score.value": 2.0},
                    )
        logger.emit(
            event_name="gen_ai.evaluation.result",
            attributes={"gen_ai.evaluation.name": "user_feedback", "gen_ai.evaluation.score.value": 0.0,
                        "gen_ai.response.id": "msg_1", "gen_ai.evaluation.explanation": "Not what I asked."},
        )  # fmt: skip
        spans, evaluations = list(exporter.get_finished_spans()), list(logs.get_finished_logs())
    settings = make_settings(
        kafka_topics=f"{spans_topic},{logs_topic}", otlp_logs_topics=logs_topic, input_format="otlp_proto",
        feedback_topics=logs_topic, sample_rate=1.0,
    )  # fmt: skip
    async with RunningPipeline(settings, async_store):
        await produce_values(broker.bootstrap, spans_topic, [collector_record(spans, "otlp_proto")])
        await wait_for(lambda: _scored(async_store, 3), 60, "the answers judged")
        await produce_values(broker.bootstrap, logs_topic, [collector_logs_record(evaluations, "otlp_proto")])
        await wait_for(
            lambda: all_committed(broker.bootstrap, settings.kafka.group_id, logs_topic, 1, partitions=1),
            60,
            "feedback",
        )
    rows = await _feedback_rows(async_store, "event_id, app, model, segment_source, kind, negative, comment")
    assert sorted(rows) == [
        ("msg_1", "support-bot", "claude-test", "scored", "thumbs", True, "Not what I asked."),
        ("msg_2", "support-bot", "claude-test", "scored", "rating", True, ""),
    ]


async def _scored(store: AsyncStore, n: int) -> bool:
    return len(await _scores(store)) >= n


async def test_an_answer_erased_by_forget_is_never_judged_for_feedback(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """Reading an answer back from Kafka reads history, like a replay: a thumbs-down on an answer whose conversation
    `forget` erased does not get it judged again (counted as erased); the feedback itself is still counted."""
    settings = make_settings(sample_rate=0.0)
    topic = settings.kafka.topics[0]
    settings = make_settings(sample_rate=0.0, feedback_topics=topic)
    await async_store.call(lambda s: record_erased(s, ["c-gone"], [], NOW))
    async with RunningPipeline(settings, async_store) as running:
        await _produce(broker.bootstrap, topic, [_answer("gone"), _feedback("f-gone", "gone")])
        await wait_for(lambda: all_committed(broker.bootstrap, settings.kafka.group_id, topic, 2), 60, "both")
        assert running.counter("relevancy_monitor_feedback_judging", outcome="erased") == 1
    assert await _scores(async_store) == []
    assert await _feedback_rows(async_store) == [("f-gone", "shop", "v12", "kafka")]


async def test_old_feedback_whose_answer_is_missing_gets_one_look_not_the_whole_wait(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """Feedback given an hour ago (read from a backlog) whose answer is in neither the store nor Kafka is stored as
    unresolved after one look, well within the default five-minute wait meant for live feedback."""
    settings = make_settings()
    topic = settings.kafka.topics[0]
    settings = make_settings(feedback_topics=topic)
    an_hour_ago = datetime.now(UTC) - timedelta(hours=1)
    async with RunningPipeline(settings, async_store) as running:
        await _produce(broker.bootstrap, topic, [_feedback("f-old", "never-seen", at=an_hour_ago)])
        await wait_for(lambda: all_committed(broker.bootstrap, settings.kafka.group_id, topic, 1), 60, "stored")
        assert running.counter("relevancy_monitor_feedback_answer_reads", outcome="not_found") == 1
    assert await _feedback_rows(async_store) == [("f-old", "", "", "unresolved")]


async def test_a_comment_is_redacted_and_one_the_redactor_raises_on_is_dead_lettered(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """A comment's email is stored as a placeholder; a comment the redactor raises on fails closed: its feedback is
    dead-lettered (redaction_failed) without its text, never stored, and the partition's offsets move on."""
    settings = make_settings()
    topic = settings.kafka.topics[0]
    settings = make_settings(feedback_topics=topic)
    segment = {"app": "shop", "model": "m1", "prompt_version": "v12"}
    values = [
        _feedback("f-mail", "a1", thumbs="up", comment="write to ann.lee@example.com please", **segment),
        _feedback("f-raise", "a2", thumbs="up", comment=f"see {RAISING}", **segment),
    ]
    async with RunningPipeline(settings, async_store) as running:
        assert running.pipeline.feedback is not None
        running.pipeline.feedback.redactor = RecognizerRedactor(
            [RaisingRecognizer(), *builtin_recognizers(DEFAULT_PHONE_REGIONS)]
        )
        await _produce(broker.bootstrap, topic, values)
        await wait_for(lambda: all_committed(broker.bootstrap, settings.kafka.group_id, topic, 2), 60, "both")
    assert await _feedback_rows(async_store, "feedback_id, comment") == [("f-mail", "write to [EMAIL] please")]
    (dead,) = await read_all(broker.bootstrap, settings.kafka.dlq_topic, 1)
    headers = dict(dead.headers)
    assert headers[H_REASON] == b"redaction_failed" and RAISING.encode() not in b"".join(headers.values())


RAISING = "zebra-9913 quotes this text"


class RaisingRecognizer:
    """A recognizer with a bug: it raises, quoting its input, on the planted text (and finds nothing elsewhere)."""

    def find(self, text: str) -> Iterator[Span]:
        """Raise on the planted text; nothing found in any other."""
        if RAISING in text:
            raise ValueError(f"cannot parse {text!r}")
        return iter(())
