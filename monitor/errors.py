"""Turning expected operational failures into one line for the operator."""

from __future__ import annotations

from aiokafka.errors import KafkaConnectionError, KafkaError

from monitor.localbroker import LocalBrokerError
from monitor.store import StoreError


def operator_message(err: BaseException) -> str | None:
    """A one-line message for a failure an operator can fix, or None for a bug (keep the traceback)."""
    if isinstance(err, StoreError | LocalBrokerError):
        return str(err)
    if isinstance(err, KafkaConnectionError):
        return f"cannot reach Kafka: {err} (check MONITOR_KAFKA_BOOTSTRAP_SERVERS)"
    if isinstance(err, KafkaError):
        return f"Kafka error: {type(err).__name__}: {err}"
    return None
