"""Fault tests on the real broker and store, each ending by checking the store against what was produced."""

from __future__ import annotations

import asyncio
import json
import random
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from consumers.decode import DecodeError, decode_event
from monitor.cli import produce
from monitor.config import Settings
from monitor.localbroker import LocalBroker
from monitor.store import AsyncStore
from monitor.traffic import generate_events
from schemas.events import KafkaPosition
from tests.harness import RunningPipeline, committed_offsets, count_rows, wait_for
from tests.monitor.test_cli import CLI, cli, monitor_env

pytestmark = pytest.mark.slow


def decodable_ids(values: list[bytes]) -> set[str]:
    """Event ids of the values that decode (the rest are dead letters)."""
    ids = set()
    for v in values:
        try:
            ids.add(decode_event(v, position=KafkaPosition(topic="t", partition=0, offset=0), record_timestamp_ms=0).event_id)
        except DecodeError:
            pass
    return ids


async def total_committed(bootstrap: str, group: str, topic: str) -> int:
    return sum(v or 0 for v in (await committed_offsets(bootstrap, group, topic)).values())


class MonitorProcess:
    """`relevancy-monitor run` as a child process, with its log lines collected."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.lines: list[str] = []
        self.assigned = asyncio.Event()
        self.proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(CLI, "run", env=self.env, stdout=asyncio.subprocess.DEVNULL,
                                                         stderr=asyncio.subprocess.PIPE)
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        async for raw in self.proc.stderr:
            line = raw.decode(errors="replace")
            self.lines.append(line)
            if '"partitions_assigned"' in line:
                self.assigned.set()

    async def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        await self.proc.wait()

    async def terminate(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(self.proc.wait(), 40)
        if self._reader:
            await self._reader
        return code


async def test_sigkill_at_random_points_then_restart_loses_and_duplicates_nothing(broker: LocalBroker, topic: str, tmp_path: Path) -> None:
    rng = random.Random(20261129)
    group = f"crash-{topic}"
    env = monitor_env(
        MONITOR_KAFKA_BOOTSTRAP_SERVERS=broker.bootstrap, MONITOR_KAFKA_TOPICS=topic, MONITOR_KAFKA_GROUP_ID=group,
        MONITOR_DLQ_TOPIC=f"{topic}.dlq", MONITOR_CLICKHOUSE_URL=f"chdb://{tmp_path / 'ch'}", MONITOR_METRICS_PORT="0",
        MONITOR_BATCH_MAX_SECONDS="1.0", MONITOR_COMMIT_INTERVAL_S="0.2", MONITOR_KAFKA_SESSION_TIMEOUT_MS="6000",
        MONITOR_KAFKA_MAX_POLL_RECORDS="50", MONITOR_LOG_FORMAT="json",
    )
    values = list(generate_events(1200, seed=11, malformed_share=0.03))
    expected = decodable_ids(values)
    producing = asyncio.create_task(produce(broker.bootstrap, topic, values, rate=40))
    kills = 0
    while not producing.done():
        # Kill only once this incarnation is visibly working (its commits advance), so kills land mid-stream
        # (tansu hands a new member its first batch seconds after the assignment).
        base = await total_committed(broker.bootstrap, group, topic)
        mon = MonitorProcess(env)
        await mon.start()

        async def progressed(base: int = base) -> bool:
            return await total_committed(broker.bootstrap, group, topic) > base or producing.done()
        await wait_for(progressed, 90, "the monitor to commit something")
        await asyncio.sleep(rng.uniform(0.05, 1.2))
        await mon.kill()
        kills += 1
    await producing
    mon = MonitorProcess(env)
    await mon.start()
    await asyncio.wait_for(mon.assigned.wait(), 60)
    await wait_for(lambda: _all_committed(broker.bootstrap, group, topic, len(values)), 120, "every offset committed after the restarts")
    assert await mon.terminate() == 0

    code, out, err = await cli("sql", "--format", "json", "SELECT event_id FROM {table} FINAL", env=env)
    assert code == 0, err
    got = [json.loads(line)["event_id"] for line in out.splitlines()]
    assert len(got) == len(set(got))  # exactly one row per event under FINAL
    assert set(got) == expected  # none missing, none extra
    code, out, _ = await cli("sql", "--format", "csv", "SELECT count() FROM {table}", env=env)
    raw_rows = int(out.splitlines()[1])
    assert raw_rows >= len(expected) and kills >= 3  # raw rows may include redelivered duplicates; FINAL hides them


async def _all_committed(bootstrap: str, group: str, topic: str, n: int) -> bool:
    return await total_committed(bootstrap, group, topic) == n


async def test_rebalance_two_members_one_stopped_mid_stream(broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore) -> None:
    settings = make_settings()
    values = list(generate_events(900, seed=12, malformed_share=0.0))
    producing = asyncio.create_task(produce(broker.bootstrap, settings.kafka_topics[0], values, rate=100))
    first = RunningPipeline(settings, async_store)
    await first.__aenter__()
    await wait_for(lambda: _rows_over(async_store, 50), 60, "the first member to write rows")
    second = RunningPipeline(settings, async_store)
    await second.__aenter__()

    async def second_is_working() -> bool:
        return second.counter("relevancy_monitor_events_consumed") > 0
    await wait_for(second_is_working, 60, "the second member to get partitions")
    await first.shutdown()  # leaves the group mid-stream: its partitions move to the second member
    await producing
    await wait_for(lambda: _all_committed(broker.bootstrap, settings.kafka_group_id, settings.kafka_topics[0], len(values)), 90,
                   "every offset committed")
    await second.shutdown()
    assert first.counter("relevancy_monitor_events_consumed") > 0
    assert await count_rows(async_store) == len(values)
    ids = (await async_store.query(f"SELECT uniqExact(event_id) FROM {async_store.store.qualified_table}")).rows[0][0]
    assert ids == len(values)


async def _rows_over(store: AsyncStore, n: int) -> bool:
    return await count_rows(store, final=False) > n
