"""The pipeline's consumer: how long a fetch may wait on the broker."""

from __future__ import annotations

from consumers.clients import make_consumer
from consumers.settings import KafkaSettings
from monitor.runtime.pipeline import _POLL_MS


async def test_a_fetch_waits_no_longer_than_the_pipelines_poll() -> None:
    """The consumer asks the broker to hold a fetch for new records at most as long as the pipeline polls: a long poll
    for a partition at the end of its log holds back the next fetch of the partitions still being caught up on
    (aiokafka's default of 500 ms left the pipeline idle for up to half a second per fetch)."""
    consumer = make_consumer(KafkaSettings(kafka_bootstrap_servers="localhost:9092", kafka_topics="conversations"))
    # aiokafka keeps the option as given, before its fetcher exists (it is built when the consumer starts).
    assert consumer._fetch_max_wait_ms <= _POLL_MS
