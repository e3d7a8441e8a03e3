"""Dead-letter publishing retries until the broker acknowledges, waiting the monitor's one backoff policy."""

from __future__ import annotations

import time
from typing import Any

from aiokafka.errors import KafkaConnectionError
from aiokafka.structs import ConsumerRecord

from consumers.deadletter import DeadLetterPublisher
from monitor.backoff import Backoff
from monitor.runtime.dead_letters import PUBLISH_BACKOFF, dead_letter
from monitor.runtime.health import Health
from monitor.runtime.metrics import Metrics
from schemas.errors import DecodeError
from tests.monitor.test_backoff import Recording


class FlakyPublisher(DeadLetterPublisher):
    """A publisher whose broker cannot be reached for the first `failures` publishes, then acknowledges."""

    def __init__(self, failures: int) -> None:
        self.topic = "events.dlq"
        self.failures = failures
        self.published: list[tuple[int, str]] = []

    async def publish(self, record: ConsumerRecord[Any, Any], reason: str, detail: str) -> None:
        """Fail while failures remain, else keep the record's offset and reason."""
        if self.failures > 0:
            self.failures -= 1
            raise KafkaConnectionError("broker unreachable")
        self.published.append((record.offset, reason))


async def test_a_failing_publish_waits_the_next_step_of_its_backoff_until_acknowledged() -> None:
    """Four failed publishes wait the injected Backoff's jittered steps, then the record is published once."""
    rng = Recording()
    dlq, metrics, health = FlakyPublisher(failures=4), Metrics(), Health()
    record = ConsumerRecord("events", 0, 7, 0, 0, None, b"not json", None, 0, 8, ())
    err = DecodeError("invalid_json", "not JSON")
    started = time.monotonic()
    await dead_letter(dlq, record, err, metrics, health, backoff=Backoff(base_s=0.01, max_s=0.04, rng=rng))
    assert time.monotonic() - started >= sum(rng.waits) - 0.001  # it slept the waits it drew
    assert rng.steps == [0.01, 0.02, 0.04, 0.04]
    assert dlq.published == [(7, "invalid_json")] and health.up["dead_letter_topic"] is True
    assert metrics.dlq_publish_failures._value.get() == 4
    assert metrics.dead_lettered.labels("invalid_json")._value.get() == 1


def test_dead_letter_publishes_keep_their_base_and_cap() -> None:
    """By default a dead-letter publish waits 0.2 s doubling to 10 s, as before the one policy."""
    assert PUBLISH_BACKOFF == Backoff(base_s=0.2, max_s=10.0)
