"""A dead-letter topic that refuses writes (topic authorization) is said loudly: one error naming the topic, a
metric, readiness false; the partition's commits wait, and resume once the topic accepts again."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from aiokafka.errors import TopicAuthorizationFailedError
from aiokafka.structs import ConsumerRecord
from structlog.testing import capture_logs

from consumers.deadletter import DeadLetterPublisher
from monitor.config import Settings
from monitor.devtools.localbroker import LocalBroker
from monitor.store.async_store import AsyncStore
from tests.conftest import EXAMPLES
from tests.harness import RunningPipeline, committed_offsets, produce_values, wait_for

FLAT = (EXAMPLES / "events-flat.jsonl").read_bytes().splitlines()


class RefusingPublisher(DeadLetterPublisher):
    """The real publisher, except that the broker's topic authorization refuses it until `allow()`."""

    refusing = True
    attempts = 0

    async def publish(self, record: ConsumerRecord[Any, Any], reason: str, detail: str) -> None:
        """Refuse like a broker without WRITE on the topic, or publish for real once allowed."""
        RefusingPublisher.attempts += 1
        if RefusingPublisher.refusing:
            raise TopicAuthorizationFailedError(self.topic)
        await super().publish(record, reason, detail)


async def test_a_refusing_dead_letter_topic_is_loud_and_visible_then_recovers(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """While the DLQ refuses: one error log with the topic, failures counted, not ready, commits held; then all
    flows."""
    settings = make_settings(lag_check_s=0.2)
    topic = settings.kafka.topics[0]
    await produce_values(broker.bootstrap, topic, [b"not json", *FLAT, b"[1, 2]"], key=lambda i: b"same-partition")
    with capture_logs() as logs:
        async with RunningPipeline(settings, async_store) as run:
            run.pipeline.dlq = RefusingPublisher(run.pipeline.producer, settings.kafka.dlq_topic)
            await wait_for(lambda: _is(RefusingPublisher.attempts >= 3), 30, "a few refused publishes")
            assert run.pipeline.health.up["dead_letter_topic"] is False and not run.pipeline.health.ready
            assert run.counter("relevancy_monitor_dlq_publish_failures") >= 3
            committed = await committed_offsets(broker.bootstrap, settings.kafka.group_id, topic)
            assert not any(committed.values())  # the refused record at offset 0 holds its partition's commits
            RefusingPublisher.refusing = False
            started = time.monotonic()

            async def all_committed() -> bool:
                c = await committed_offsets(broker.bootstrap, settings.kafka.group_id, topic)
                return sum(v or 0 for v in c.values()) == len(FLAT) + 2

            await wait_for(all_committed, 30, "every record committed once the topic accepts")
            assert run.pipeline.health.up["dead_letter_topic"] is True and time.monotonic() - started < 30
    refused = [e for e in logs if e["event"] == "dead_letter_topic_refused"]
    assert len(refused) == 1 and refused[0]["topic"] == settings.kafka.dlq_topic and refused[0]["log_level"] == "error"
    assert any(e["event"] == "dead_letter_topic_writable" for e in logs)


async def _is(value: bool) -> bool:
    return value
