"""Dead-letter publishing: an event that cannot be judged is kept, with the reason and its original bytes."""

from __future__ import annotations

from aiokafka import AIOKafkaProducer
from aiokafka.structs import ConsumerRecord

# Header names on dead-lettered records. The value and key are the original bytes, unchanged.
H_REASON = "x-dlq-reason"
H_DETAIL = "x-dlq-detail"
H_TOPIC = "x-dlq-source-topic"
H_PARTITION = "x-dlq-source-partition"
H_OFFSET = "x-dlq-source-offset"
H_TIMESTAMP = "x-dlq-source-timestamp"

_MAX_DETAIL_BYTES = 1000


def dead_letter_headers(record: ConsumerRecord, reason: str, detail: str) -> list[tuple[str, bytes]]:
    """The original record's headers followed by ours (reason, detail and the source position)."""
    ours = [
        (H_REASON, reason.encode()),
        (H_DETAIL, detail.encode("utf-8", "replace")[:_MAX_DETAIL_BYTES]),
        (H_TOPIC, record.topic.encode()),
        (H_PARTITION, str(record.partition).encode()),
        (H_OFFSET, str(record.offset).encode()),
        (H_TIMESTAMP, str(record.timestamp).encode()),
    ]
    return [*(record.headers or ()), *ours]


class DeadLetterPublisher:
    """Publishes undecodable records to the dead-letter topic; `publish` returns once the broker acknowledged."""

    def __init__(self, producer: AIOKafkaProducer, topic: str) -> None:
        self._producer = producer
        self.topic = topic

    async def publish(self, record: ConsumerRecord, reason: str, detail: str) -> None:
        """Send the original key and value with reason headers; raises `aiokafka.errors.KafkaError` on failure."""
        await self._producer.send_and_wait(
            self.topic,
            value=record.value,
            key=record.key,
            headers=dead_letter_headers(record, reason, detail),
        )
