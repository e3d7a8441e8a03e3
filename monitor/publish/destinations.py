"""Where evaluation records go: one seam (`Destination.send`) with two implementations, a Kafka topic on the
pipeline's producer and an OpenTelemetry Collector's OTLP/HTTP logs endpoint. A send that fails raises; the
publisher counts it."""

from __future__ import annotations

from typing import Protocol

import httpx2

from monitor.publish.settings import PublishSettings

CONTENT_TYPES = {"otlp_proto": "application/x-protobuf", "otlp_json": "application/json"}
HTTP_TIMEOUT_S = 10.0


class Destination(Protocol):
    """Sends one encoded `ExportLogsServiceRequest`."""

    async def send(self, value: bytes) -> None:
        """Deliver `value`, or raise."""
        ...

    async def aclose(self) -> None:
        """Release what the destination holds (the pipeline closes a shared producer itself)."""
        ...


class Producer(Protocol):
    """What the Kafka destination needs of a producer (aiokafka's)."""

    async def send_and_wait(self, topic: str, value: bytes) -> object:
        """Send one record and wait for the broker's acknowledgement."""
        ...


class KafkaDestination:
    """A Kafka topic (a Collector's Kafka receiver forwards it anywhere)."""

    def __init__(self, producer: Producer, topic: str) -> None:
        self.producer = producer
        self.topic = topic

    async def send(self, value: bytes) -> None:
        """One record to the topic."""
        await self.producer.send_and_wait(self.topic, value)

    async def aclose(self) -> None:
        """Nothing: the producer is the pipeline's."""


class OtlpHttpDestination:
    """A Collector's OTLP/HTTP logs endpoint (`.../v1/logs`); `transport` is the seam tests may replace."""

    def __init__(self, endpoint: str, encoding: str, transport: httpx2.AsyncBaseTransport | None = None) -> None:
        self.endpoint = endpoint
        self.client = httpx2.AsyncClient(
            transport=transport, timeout=HTTP_TIMEOUT_S, headers={"Content-Type": CONTENT_TYPES[encoding]}
        )

    async def send(self, value: bytes) -> None:
        """One POST; any status but 2xx raises (the OTLP/HTTP spec's retryable 429/502/503/504 are not retried:
        publishing is at most once)."""
        response = await self.client.post(self.endpoint, content=value)
        response.raise_for_status()

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self.client.aclose()


def destination_for(settings: PublishSettings, producer: Producer) -> Destination:
    """The destination `settings` name (publishing is on)."""
    if settings.publish_evaluations == "otlp_http":
        return OtlpHttpDestination(str(settings.publish_endpoint), settings.publish_encoding)
    return KafkaDestination(producer, settings.publish_topic)
