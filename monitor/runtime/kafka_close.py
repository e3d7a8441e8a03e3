"""Closing the pipeline's Kafka clients within a bound, whether or not the brokers answer."""

from __future__ import annotations

import asyncio

import structlog
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from consumers.source import KafkaSource
from monitor.runtime.partition_tasks import Deadline

log = structlog.get_logger("monitor.runtime.kafka_close")

CLOSE_TIMEOUT_S = 10.0
CLOSE_FLOOR_S = 0.5  # each client gets at least this to leave its group cleanly


async def close_clients(source: KafkaSource, producer: AIOKafkaProducer, within_s: float = 2 * CLOSE_TIMEOUT_S) -> None:
    """Stop the consumer, then the producer, each for at most `CLOSE_TIMEOUT_S`, together within `within_s`."""
    # Bounded: with the brokers gone, leaving the group or flushing the producer would otherwise wait out
    # aiokafka's own request timeouts (or retry forever), and the process would not exit.
    deadline = Deadline(within_s)
    for name, stop in (("consumer", source.stop), ("producer", producer.stop)):
        try:
            await asyncio.wait_for(stop(), timeout=min(CLOSE_TIMEOUT_S, max(deadline.remaining(), CLOSE_FLOOR_S)))
        except (TimeoutError, KafkaError) as e:
            log.warning("kafka_client_close_incomplete", client=name, error=type(e).__name__)
        except asyncio.CancelledError:
            # aiokafka's fetcher re-raises the cancellation of its own fetch tasks from stop() while the
            # brokers are away; only a cancellation of this task itself may end the shutdown here.
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            log.warning("kafka_client_close_incomplete", client=name, error="its fetch tasks were cancelled")
