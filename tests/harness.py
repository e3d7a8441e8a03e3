"""Test helpers around the real broker and the pipeline (no fakes of Kafka or ClickHouse)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.structs import ConsumerRecord

from monitor.config import Settings
from monitor.judges.base import Judge
from monitor.judges.factory import build_judge
from monitor.runtime.metrics import Metrics
from monitor.runtime.service import build_pipeline
from monitor.store.async_store import AsyncStore


async def create_topic(bootstrap: str, name: str, partitions: int = 3) -> None:
    """Create a topic on the test broker."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    finally:
        await admin.close()


async def produce_values(
    bootstrap: str,
    topic: str,
    values: Iterable[bytes | None],
    *,
    key: Callable[[int], bytes | None] | None = None,
    timestamp_ms: int | None = None,
) -> int:
    """Produce record values (None is a tombstone); returns how many."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    n = 0
    try:
        for i, value in enumerate(values):
            await producer.send(topic, value, key=key(i) if key else None, timestamp_ms=timestamp_ms)
            n += 1
        await producer.flush()
    finally:
        await producer.stop()
    return n


async def read_all(bootstrap: str, topic: str, expected: int, timeout_s: float = 20.0) -> list[ConsumerRecord]:  # type: ignore[type-arg]
    """Read a topic from the beginning (no group) until `expected` records or the timeout."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    out: list[ConsumerRecord] = []  # type: ignore[type-arg]
    try:
        parts = await consumer._client.fetch_all_metadata()
        tps = [TopicPartition(topic, p) for p in (parts.partitions_for_topic(topic) or ())]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + timeout_s
        while len(out) < expected and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                out.extend(records)
    finally:
        await consumer.stop()
    return out


async def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int = 3) -> dict[int, int | None]:
    """What the group has committed per partition (via `consumer.committed`, which works against tansu)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        return {p: await consumer.committed(TopicPartition(topic, p)) for p in range(partitions)}
    finally:
        await consumer.stop()


async def all_committed(bootstrap: str, group: str, topic: str, n: int, partitions: int = 3) -> bool:
    """Whether the group has committed `n` offsets on `topic`, summed over its `partitions`."""
    return sum(v or 0 for v in (await committed_offsets(bootstrap, group, topic, partitions)).values()) == n


async def wait_for(predicate: Callable[[], Awaitable[bool]], timeout_s: float, what: str) -> None:
    """Poll an async predicate until true; fail with `what` on timeout."""
    deadline = time.monotonic() + timeout_s
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        await asyncio.sleep(0.1)


class RunningPipeline:
    """A pipeline running in a task, with a stop switch; its store is the test's `AsyncStore`."""

    def __init__(
        self, settings: Settings, store: AsyncStore, judge: Judge | None = None, metrics: Metrics | None = None
    ) -> None:
        """Build the pipeline from `settings` around `store`, with the configured judge unless `judge` is given."""
        self.metrics = metrics or Metrics()
        self.pipeline = build_pipeline(settings, judge or build_judge(settings.judge), store, self.metrics)
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> RunningPipeline:
        """Start the pipeline in a background task."""
        self.task = asyncio.create_task(self.pipeline.run(self.stop))
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Shut the pipeline down, re-raising a crash (see `shutdown`)."""
        await self.shutdown()

    async def shutdown(self) -> None:
        """Stop consuming, drain, flush, commit; re-raises a pipeline crash."""
        self.stop.set()
        if self.task is not None:
            await asyncio.wait_for(self.task, timeout=60)

    def counter(self, name: str, **labels: str) -> float:
        """Sum of a counter's samples matching `labels`."""
        total = 0.0
        for metric in self.metrics.registry.collect():
            if metric.name != name:
                continue
            for s in metric.samples:
                if s.name.endswith("_total") and all(s.labels.get(k) == v for k, v in labels.items()):
                    total += s.value
        return total


async def count_rows(store: AsyncStore, where: str = "1", final: bool = True) -> int:
    """Rows in the scores table (FINAL by default)."""
    result = await store.query(
        f"SELECT count() FROM {store.store.qualified_table} {'FINAL' if final else ''} WHERE {where}"
    )
    return int(result.rows[0][0])


CLI = str(Path(sys.executable).parent / "relevancy-monitor")


def monitor_env(**extra: str) -> dict[str, str]:
    """The environment with every MONITOR_*, ALERTS_* and ANTHROPIC_* variable removed, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MONITOR_", "ALERTS_", "ANTHROPIC_"))}
    env.update(extra)
    return env


async def cli(*args: str, env: dict[str, str], limit_s: float = 60) -> tuple[int, str, str]:
    """Run the console script with `args` and `env`; returns (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        CLI, *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), limit_s)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()
