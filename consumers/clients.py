"""aiokafka client construction: connection and security options in one place, and start-up failures turned
into `KafkaUnavailable` (one line for the operator)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaConnectionError, KafkaError, TopicAlreadyExistsError
from aiokafka.helpers import create_ssl_context

from schemas.errors import KafkaUnavailable


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    """What the Kafka clients need: where the brokers are, how to authenticate, and the group's timings."""

    bootstrap_servers: str
    topics: tuple[str, ...] = ("conversations",)
    group_id: str = "relevancy-monitor"
    auto_offset_reset: str = "earliest"
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    session_timeout_ms: int = 10_000
    max_poll_records: int = 500
    dlq_topic: str = "relevancy-monitor.dlq"
    max_event_bytes: int = 1_000_000
    max_future_skew_s: float | None = 3600.0  # event times further ahead than this are a bad clock: dead-lettered
    connect_timeout_s: float = 60.0  # start-up gives up after this: a run must not hang on an absent broker


class _Startable(Protocol):
    async def start(self) -> None: ...


def client_kwargs(kafka: KafkaSettings) -> dict[str, Any]:
    """Connection and security options shared by consumer, producer and admin client."""
    kw: dict[str, Any] = {
        "bootstrap_servers": kafka.bootstrap_servers,
        "security_protocol": kafka.security_protocol,
        "client_id": "relevancy-monitor",
    }
    if kafka.security_protocol in ("SSL", "SASL_SSL"):
        kw["ssl_context"] = create_ssl_context()
    if kafka.sasl_mechanism:
        kw["sasl_mechanism"] = kafka.sasl_mechanism
        kw["sasl_plain_username"] = kafka.sasl_username
        kw["sasl_plain_password"] = kafka.sasl_password
    return kw


def make_consumer(kafka: KafkaSettings) -> AIOKafkaConsumer:
    """A group consumer with manual commits; offsets are committed explicitly by the pipeline."""
    return AIOKafkaConsumer(
        group_id=kafka.group_id,
        enable_auto_commit=False,
        auto_offset_reset=kafka.auto_offset_reset,
        session_timeout_ms=kafka.session_timeout_ms,
        heartbeat_interval_ms=max(1000, kafka.session_timeout_ms // 3),
        max_poll_records=kafka.max_poll_records,
        **client_kwargs(kafka),
    )


def make_producer(kafka: KafkaSettings, **extra: Any) -> AIOKafkaProducer:
    """A producer that waits for all in-sync replicas (the dead-letter topic, the traffic generator)."""
    return AIOKafkaProducer(acks="all", **client_kwargs(kafka), **extra)


async def start_client(client: _Startable, kafka: KafkaSettings) -> None:
    """`client.start()` within `connect_timeout_s`, with a failure to reach the brokers raised as `KafkaUnavailable`."""
    try:
        await asyncio.wait_for(client.start(), timeout=kafka.connect_timeout_s)
    except TimeoutError as e:
        raise KafkaUnavailable(
            f"no answer from Kafka at {kafka.bootstrap_servers} within {kafka.connect_timeout_s:g}s "
            "(check MONITOR_KAFKA_BOOTSTRAP_SERVERS, or raise MONITOR_KAFKA_CONNECT_TIMEOUT_S)"
        ) from e
    except KafkaConnectionError as e:
        raise KafkaUnavailable(f"cannot reach Kafka at {kafka.bootstrap_servers}: {e} (check MONITOR_KAFKA_BOOTSTRAP_SERVERS)") from e
    except KafkaError as e:
        raise KafkaUnavailable(f"Kafka error: {type(e).__name__}: {e}") from e


async def ensure_topics(kafka: KafkaSettings, topics: dict[str, int]) -> list[str]:
    """Create missing topics ({name: partitions}) with the broker's default replication; returns those created."""
    admin = AIOKafkaAdminClient(**client_kwargs(kafka))
    try:
        await start_client(admin, kafka)
        existing = set(await admin.list_topics())
        missing = [NewTopic(name, num_partitions=n, replication_factor=1) for name, n in topics.items() if name not in existing]
        if missing:
            try:
                await admin.create_topics(missing)
            except TopicAlreadyExistsError:
                pass  # a replica created it at the same time
        return [t.name for t in missing]
    finally:
        await admin.close()
