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
H_ORIGINAL_BYTES = "x-dlq-original-bytes"  # set when the value was cut to fit the producer's request size

# Room left under the producer's max_request_size for key, headers and batch overhead.
_HEADROOM_BYTES = 64 * 1024

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


def fit_value(value: bytes | None, key: bytes | None, max_bytes: int) -> tuple[bytes | None, list[tuple[str, bytes]]]:
    """The value to publish and any extra headers: a tombstone without a key becomes b"" (Kafka needs one of
    them); a value too large for the producer is cut to a prefix and its original size recorded."""
    if value is None:
        return (b"" if key is None else None), []
    if len(value) > max_bytes:
        return value[:max_bytes], [(H_ORIGINAL_BYTES, str(len(value)).encode())]
    return value, []


class DeadLetterPublisher:
    """Publishes undecodable records to the dead-letter topic; `publish` returns once the broker acknowledged."""

    def __init__(self, producer: AIOKafkaProducer, topic: str, max_request_bytes: int = 1_048_576) -> None:
        self._producer = producer
        self.topic = topic
        self._max_value_bytes = max(1024, max_request_bytes - _HEADROOM_BYTES)

    async def publish(self, record: ConsumerRecord, reason: str, detail: str) -> None:
        """Send the original key and value with reason headers; raises `aiokafka.errors.KafkaError` on failure."""
        value, extra = fit_value(record.value, record.key, self._max_value_bytes)
        await self._producer.send_and_wait(
            self.topic,
            value=value,
            key=record.key,
            headers=[*dead_letter_headers(record, reason, detail), *extra],
        )
