"""aiokafka client construction from settings (security options in one place)."""

from __future__ import annotations

from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.helpers import create_ssl_context

from monitor.config import Settings


def client_kwargs(settings: Settings) -> dict[str, Any]:
    """Connection and security options shared by consumer and producer."""
    kw: dict[str, Any] = {
        "bootstrap_servers": settings.kafka_bootstrap_servers,
        "security_protocol": settings.kafka_security_protocol,
        "client_id": "relevancy-monitor",
    }
    if settings.kafka_security_protocol in ("SSL", "SASL_SSL"):
        kw["ssl_context"] = create_ssl_context()
    if settings.kafka_sasl_mechanism:
        kw["sasl_mechanism"] = settings.kafka_sasl_mechanism
        kw["sasl_plain_username"] = settings.kafka_sasl_username
        kw["sasl_plain_password"] = settings.kafka_sasl_password.get_secret_value() if settings.kafka_sasl_password else None
    return kw


def make_consumer(settings: Settings) -> AIOKafkaConsumer:
    """A group consumer with manual commits; offsets are committed explicitly by the pipeline."""
    return AIOKafkaConsumer(
        group_id=settings.kafka_group_id,
        enable_auto_commit=False,
        auto_offset_reset=settings.kafka_auto_offset_reset,
        session_timeout_ms=settings.kafka_session_timeout_ms,
        heartbeat_interval_ms=max(1000, settings.kafka_session_timeout_ms // 3),
        max_poll_records=settings.kafka_max_poll_records,
        **client_kwargs(settings),
    )


def make_producer(settings: Settings) -> AIOKafkaProducer:
    """The dead-letter producer: waits for all in-sync replicas."""
    return AIOKafkaProducer(acks="all", **client_kwargs(settings))


async def ensure_topics(settings: Settings, topics: dict[str, int]) -> list[str]:
    """Create missing topics ({name: partitions}) with the broker's default replication; returns those created."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import TopicAlreadyExistsError

    admin = AIOKafkaAdminClient(**client_kwargs(settings))
    await admin.start()
    try:
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
