"""aiokafka client construction: connection and security options in one place (`client_kwargs`, shared by the
consumer, the dead-letter producer, the admin client and `produce`), TLS with the CA, client certificate and key of
the MONITOR_KAFKA_SSL_* settings, and SASL PLAIN or SCRAM-SHA-256/512."""

from __future__ import annotations

from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from consumers.security import check_security, ssl_context
from consumers.settings import KafkaSettings

# How long the broker may hold a fetch for records that are not there yet. aiokafka sends one fetch per broker at a
# time, and only for partitions whose fetched records are all handled: when one partition has reached the end of its
# log, the next fetch may ask for it alone, and the partitions still being handled get no new records until that
# long poll ends. With aiokafka's 500 ms a consumer catching up on the others sat idle up to half a second per fetch
# (0.4 to 0.9 s of a 1.2 s window in bench/pipeline_throughput.py at 20,000 events). 100 ms is as long as the
# pipeline's own poll; an idle consumer pays for it with 0.9 % of a core instead of 0.55 % (tansu, 3 partitions).
FETCH_MAX_WAIT_MS = 100


def client_kwargs(kafka: KafkaSettings) -> dict[str, Any]:
    """Connection and security options shared by consumer, producer and admin client; raises `ConfigError`
    (one line naming the variables) for security settings that cannot work."""
    check_security(kafka)
    kw: dict[str, Any] = {
        "bootstrap_servers": kafka.bootstrap_servers,
        "security_protocol": kafka.security_protocol,
        "client_id": "relevancy-monitor",
    }
    if kafka.security_protocol in ("SSL", "SASL_SSL"):
        kw["ssl_context"] = ssl_context(kafka)
    if kafka.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        kw["sasl_mechanism"] = kafka.sasl_mechanism or "PLAIN"
        kw["sasl_plain_username"] = kafka.sasl_username
        kw["sasl_plain_password"] = kafka.sasl_password.get_secret_value() if kafka.sasl_password else None
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
        fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
        **client_kwargs(kafka),
    )


def make_producer(kafka: KafkaSettings, **extra: Any) -> AIOKafkaProducer:
    """A producer that waits for all in-sync replicas (the dead-letter topic, the traffic generator)."""
    return AIOKafkaProducer(acks="all", **client_kwargs(kafka), **extra)
