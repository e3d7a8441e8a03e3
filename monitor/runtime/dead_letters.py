"""Dead-lettering a record that cannot be judged: publish until the broker acknowledges, counted and logged."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import structlog
from aiokafka.structs import ConsumerRecord

from consumers.deadletter import DeadLetterPublisher
from consumers.decode import DecodedEvent
from consumers.offsets import Ticket
from monitor.backoff import Backoff
from monitor.runtime.health import Health
from monitor.runtime.metrics import Metrics
from schemas.errors import DecodeError
from schemas.events import KafkaPosition

log = structlog.get_logger("monitor.runtime.dead_letters")

# Waits between publishes of one record: 0.2 s doubling to 10 s, with the monitor's one jitter.
PUBLISH_BACKOFF = Backoff(base_s=0.2, max_s=10.0)


async def dead_letter(
    dlq: DeadLetterPublisher,
    record: ConsumerRecord[Any, Any],
    err: DecodeError,
    metrics: Metrics,
    health: Health,
    *,
    backoff: Backoff = PUBLISH_BACKOFF,
) -> None:
    """Publish `record` with its reason, retrying with `backoff` until acknowledged: until then it is not done, so
    its partition's commits wait for it (nothing is lost silently). A refusing topic (authorization, a missing
    topic) is said loudly once, with the topic, and shows in readiness until a publish succeeds."""
    for retry in itertools.count():
        try:
            await dlq.publish(record, err.reason, err.detail)
            break
        except Exception as e:  # KafkaError or a client-side refusal
            metrics.dlq_publish_failures.inc()
            problem = f"{type(e).__name__}: {e}"[:200]
            if health.mark("dead_letter_topic", False, problem):
                log.error(
                    "dead_letter_topic_refused",
                    topic=dlq.topic,
                    error=type(e).__name__,
                    detail=str(e)[:200],
                    note="the partition's commits wait for this record; fix the topic or its ACLs",
                )
            log.debug(
                "dlq_publish_failed",
                topic=dlq.topic,
                partition=record.partition,
                offset=record.offset,
                error=type(e).__name__,
            )
            await asyncio.sleep(backoff.delay(retry))
    if health.mark("dead_letter_topic", True):
        log.info("dead_letter_topic_writable", topic=dlq.topic)
    metrics.dead_lettered.labels(err.reason).inc()
    log.info(
        "dead_lettered",
        topic=record.topic,
        partition=record.partition,
        offset=record.offset,
        reason=err.reason,
        detail=err.detail[:200],
    )


def event_record(event: DecodedEvent, ticket: Ticket) -> ConsumerRecord[Any, Any]:
    """A record to dead-letter for an event that has no one record of its own (an OpenTelemetry call joined from a
    span and its log records): the event as JSON, at its ticket's position."""
    position = KafkaPosition(topic=ticket.tp.topic, partition=ticket.tp.partition, offset=ticket.offset)
    value = event.event(position).model_dump_json().encode()
    timestamp_ms = int(event.epoch_s * 1000)
    return ConsumerRecord(ticket.tp.topic, ticket.tp.partition, ticket.offset, timestamp_ms, 0, None, value, None, 0,
                          len(value), ())  # fmt: skip
