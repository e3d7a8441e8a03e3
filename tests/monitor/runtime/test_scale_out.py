"""Several replicas in one consumer group on the local broker share one judge quota and one per-segment minimum.

Replicas are `relevancy-monitor run` processes, each on its own embedded store (chDB opens a directory from one
process only), all judging against the suite's fake Messages API, which records when each request arrived: the
group's request rate is measured there, before and after each rebalance (a replica joining, one leaving cleanly,
one killed). Afterwards the stores are merged into the test's store, where duplicates across replicas collapse
under FINAL. The per-segment minimum is checked with three in-process pipelines on one store."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from consumers.decode import decode_event
from consumers.sampling import Sampler
from monitor.config import Settings
from monitor.devtools.localbroker import LocalBroker
from monitor.devtools.traffic import generate_events, produce
from monitor.store.async_store import AsyncStore
from schemas.events import KafkaPosition
from schemas.scored import ScoredRow
from tests.fake_messages_api import FakeMessagesAPI
from tests.harness import RunningPipeline, all_committed, cli, create_topic, monitor_env, wait_for
from tests.monitor.runtime.test_faults import MonitorProcess

pytestmark = pytest.mark.slow

PARTITIONS = 12
QUOTA_PER_MINUTE = 240.0  # the group's: 4 requests a second, whatever the replicas (demand is twice that)
WINDOW_S = 5.0
SAMPLE_RATE = 0.5


def sampled_ids(values: list[bytes]) -> set[str]:
    """Event ids the group's sampler judges (the decision is a hash of the conversation id: the same in every
    replica)."""
    sampler = Sampler.at_rate(SAMPLE_RATE)
    position = KafkaPosition(topic="t", partition=0, offset=0)
    events = [decode_event(v, position=position, record_timestamp_ms=0) for v in values]
    return {e.event_id for e in events if sampler.decide(e).sampled}


def rates(arrivals: list[float], start: float, end: float) -> list[float]:
    """Requests per minute in each `WINDOW_S` window of [start, end) (fake-API arrival times, monotonic)."""
    out = []
    t = start
    while t + WINDOW_S <= end:
        n = sum(1 for a in arrivals if t <= a < t + WINDOW_S)
        out.append(n * 60.0 / WINDOW_S)
        t += WINDOW_S
    return out


async def stored_rows(env: dict[str, str]) -> list[ScoredRow]:
    """Every row of one replica's store, read through `relevancy-monitor sql` (its directory is another process')."""
    code, out, err = await cli("sql", "--format", "json", "SELECT * FROM {table}", env=env, limit_s=120)
    assert code == 0, err
    return [ScoredRow.model_validate(json.loads(line)) for line in out.splitlines() if line.strip()]


@pytest.mark.long(seconds=86)
async def test_replicas_share_the_quota_through_rebalances_and_lose_nothing(
    broker: LocalBroker, fake_messages_api: FakeMessagesAPI, async_store: AsyncStore, tmp_path: Path
) -> None:
    """3 replicas, a 4th joining, one leaving, one killed: the group stays within its requests per minute at the fake
    API in every window; every event is stored, and the merged stores hold one row per event under FINAL."""
    topic = f"scale-{tmp_path.name[-8:]}"
    await create_topic(broker.bootstrap, topic, partitions=PARTITIONS)

    def replica_env(n: int) -> dict[str, str]:
        return monitor_env(
            MONITOR_KAFKA_BOOTSTRAP_SERVERS=broker.bootstrap,
            MONITOR_KAFKA_TOPICS=topic,
            MONITOR_KAFKA_GROUP_ID=f"g-{topic}",
            MONITOR_DLQ_TOPIC=f"{topic}.dlq",
            MONITOR_CLICKHOUSE_URL=f"chdb://{tmp_path / f'replica-{n}'}",
            MONITOR_METRICS_PORT="0",
            MONITOR_JUDGE="rubric",
            MONITOR_JUDGE_REQUESTS_PER_MINUTE=str(QUOTA_PER_MINUTE),
            MONITOR_SAMPLE_RATE=str(SAMPLE_RATE),
            MONITOR_BATCH_MAX_SECONDS="0.5",
            MONITOR_COMMIT_INTERVAL_S="0.2",
            MONITOR_KAFKA_SESSION_TIMEOUT_MS="6000",
            MONITOR_KAFKA_MAX_POLL_RECORDS="50",
            MONITOR_LOG_FORMAT="json",
            **fake_messages_api.env(),
        )

    values = list(generate_events(400, seed=29, malformed_share=0.0))
    expected = sampled_ids(values)
    replicas = [MonitorProcess(replica_env(n)) for n in range(4)]
    for r in replicas[:3]:
        await r.start()
    await asyncio.gather(*(asyncio.wait_for(r.assigned.wait(), 90) for r in replicas[:3]))
    producing = asyncio.create_task(produce(broker.bootstrap, topic, values, rate=16, partitions=PARTITIONS))
    arrivals = lambda: [q.at for q in fake_messages_api.message_requests]  # noqa: E731
    await wait_for(lambda: _at_least(arrivals, 10), 60, "the replicas to judge")
    marks = {"three": time.monotonic()}
    await asyncio.sleep(6)
    await replicas[3].start()  # a fourth joins mid-stream
    await asyncio.wait_for(replicas[3].assigned.wait(), 90)
    marks["joined"] = time.monotonic()
    await asyncio.sleep(6)
    assert await replicas[0].terminate() == 0  # one leaves cleanly
    marks["left"] = time.monotonic()
    await asyncio.sleep(6)
    await replicas[1].kill()  # one is killed: its partitions move once its session times out
    marks["killed"] = time.monotonic()
    await producing
    survivors = replicas[2:]
    group = f"g-{topic}"
    await wait_for(
        lambda: all_committed(broker.bootstrap, group, topic, len(values), PARTITIONS), 180, "every offset committed"
    )
    marks["drained"] = time.monotonic()
    for r in survivors:
        assert await r.terminate() == 0

    measured = rates(arrivals(), marks["three"], marks["drained"])
    print("group requests per minute, per 5 s window:", [round(m) for m in measured], "marks:", marks)
    # The limit allows a second's burst per replica on top of the rate: 15 a second, plus at most 4 at once.
    allowed = QUOTA_PER_MINUTE + 4 * 60.0 / WINDOW_S
    assert measured and max(measured) <= allowed, (max(measured), measured)
    assert sum(measured) / len(measured) > 0.5 * QUOTA_PER_MINUTE  # busy: a rebalance idles partitions for seconds
    shares = [json.loads(line) for r in replicas for line in r.lines if '"group_share"' in line]
    assert shares and all(0.0 <= s["share"] <= 1.0 for s in shares)

    rows = [row for n in range(4) for row in await stored_rows(replica_env(n))]
    assert {r.event_id for r in rows} == expected  # nothing lost across the replicas' stores
    await async_store.insert_rows(rows, "merged")
    table = async_store.store.qualified_table
    final = (await async_store.query(f"SELECT count(), uniqExact(event_id) FROM {table} FINAL")).rows[0]
    assert final[0] == final[1] == len(expected) and len(rows) >= len(expected)


async def _at_least(arrivals: Callable[[], list[float]], n: int) -> bool:
    return len(arrivals()) >= n


@pytest.mark.long(seconds=19)
async def test_the_per_segment_minimum_is_met_once_for_the_group(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore, tmp_path: Path
) -> None:
    """Three replicas with min_per_minute 6 per app and no base rate judge about 6 a minute per app together, not
    18 (each its share: 2)."""
    topic = f"minseg-{tmp_path.name[-8:]}"
    await create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    rules = tmp_path / "sampling.yaml"
    rules.write_text("default_rate: 0.0\nmin_per_segment: {min_per_minute: 6, segment_by: [app]}\n", encoding="utf-8")
    settings = make_settings(kafka_topics=[topic], kafka_group_id=f"g-{topic}", sampling_file=str(rules))
    values = list(generate_events(360, seed=30, malformed_share=0.0))
    pipelines = [RunningPipeline(settings, async_store) for _ in range(3)]
    for p in pipelines:
        await p.__aenter__()

    async def all_assigned() -> bool:
        shares = [p.metrics.registry.get_sample_value("relevancy_monitor_group_share") for p in pipelines]
        return all(s is not None and 0 < s < 1 for s in shares)

    await wait_for(all_assigned, 60, "three members with a share each")
    started = time.time()
    await produce(broker.bootstrap, topic, values, rate=24, partitions=PARTITIONS)
    await wait_for(
        lambda: all_committed(broker.bootstrap, f"g-{topic}", topic, len(values), PARTITIONS),
        90,
        "every offset committed",
    )
    ended = time.time()
    for p in pipelines:
        await p.shutdown()
    table = async_store.store.qualified_table
    per_app: dict[str, Any] = dict(
        (await async_store.query(f"SELECT app, count() FROM {table} FINAL GROUP BY app")).rows  # type: ignore[arg-type]
    )
    windows = int(ended // 60) - int(started // 60) + 1  # the aligned minute windows the traffic touched
    apps = {json.loads(v)["app"] for v in values}
    assert set(per_app) <= apps and per_app
    for app, judged in per_app.items():
        # Each replica: ceil(6 x its share) a window; three replicas round up by at most one each.
        assert judged <= 6 * windows + 3, (app, judged, windows)
    assert sum(per_app.values()) >= 6 * len(per_app)  # met: at least one window's minimum per app
