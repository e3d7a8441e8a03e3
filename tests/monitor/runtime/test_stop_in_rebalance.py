"""A stop while the group rebalances, as a rolling update sends it: a member joins the group, and SIGTERM reaches every
replica at once while the group rebalances around the newcomer (before their revoke, inside it, or in the join after
it). Each replica must begin draining at once and exit within its grace period, whatever its consumer was doing.

Replicas are `relevancy-monitor run` processes in one group on the local broker, each on its own embedded store,
judging against the suite's fake Messages API (slowly, so that every drain has judge calls in flight). Each round
uses a fresh group."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer

from monitor.devtools.localbroker import LocalBroker
from monitor.devtools.traffic import generate_events, produce
from tests.fake_messages_api import FakeMessagesAPI, slow
from tests.harness import create_topic, monitor_env, wait_for
from tests.monitor.runtime.test_faults import MonitorProcess

pytestmark = pytest.mark.slow

REPLICAS = 3
ROUNDS = 3
PARTITIONS = 6
SESSION_MS = 3000  # tansu: a join takes about the session timeout; heartbeats every second
GRACE_S = 4.0  # MONITOR_SHUTDOWN_GRACE_S: the drain budget, from the signal to the clients closed
EXIT_S = 8.0  # on top of it, for the process to close its judge and store and end (seconds on a loaded machine)
JUDGE_S = 0.8


def logged_after(replica: MonitorProcess, seen: int, event: str) -> bool:
    """Whether `replica` logged `event` in a line past its first `seen` lines."""
    return any(f'"event": "{event}"' in line for line in replica.lines[seen:])


async def stop_and_wait(replica: MonitorProcess, signalled: float) -> str | None:
    """Wait for a signalled replica to end; what it did wrong, if anything: it outstayed its grace period (then it is
    killed), exited with an error, never logged `draining`, or took part in a rebalance after it began draining."""
    assert replica.proc is not None
    try:
        code = await asyncio.wait_for(replica.proc.wait(), GRACE_S + EXIT_S)
    except TimeoutError:
        replica.proc.kill()
        await replica.proc.wait()
        return f"still running {time.monotonic() - signalled:.1f}s after SIGTERM"
    finally:
        if replica._reader is not None:
            await replica._reader
    events = [json.loads(line).get("event") for line in replica.lines if line.startswith("{")]
    if code != 0:
        return f"exit code {code}"
    if "draining" not in events:
        return "no draining line"
    if "partitions_assigned" in events[events.index("draining") :]:
        return "assigned partitions again while draining"
    return None


@pytest.mark.long(seconds=97)
async def test_sigterm_to_every_replica_while_a_member_joins_drains_at_once_and_exits_in_the_grace(
    broker: LocalBroker, fake_messages_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    """In each of several rounds, a member joins a group of replicas and every replica gets SIGTERM at once, at a
    random point of the rebalance that follows: each logs `draining`, takes no further part in the group's rebalances,
    and exits 0 within its grace period plus a few seconds to end the process. (The old code waited for the group's
    join to end before it noticed the stop, then revoked, joined and was assigned partitions again while it drained,
    and its close waited for a join in flight: it outstayed the grace.)"""
    fake_messages_api.always(slow(JUDGE_S))
    topic = f"rolling-{tmp_path.name[-8:]}"
    await create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    rng = random.Random(40)
    # Drawn as they are sent: at 30 a second the rounds send a few thousand of the 50,000 (generating them all first
    # cost 2 CPU-s).
    values = generate_events(50_000, seed=40, malformed_share=0.0)
    producing = asyncio.create_task(produce(broker.bootstrap, topic, values, rate=30, partitions=PARTITIONS))

    def replica(group: str, n: int) -> MonitorProcess:
        return MonitorProcess(
            monitor_env(
                MONITOR_KAFKA_BOOTSTRAP_SERVERS=broker.bootstrap,
                MONITOR_KAFKA_TOPICS=topic,
                MONITOR_KAFKA_GROUP_ID=group,
                MONITOR_DLQ_TOPIC=f"{topic}.dlq",
                MONITOR_CLICKHOUSE_URL=f"chdb://{tmp_path / f'replica-{n}'}",
                MONITOR_METRICS_PORT="0",
                MONITOR_JUDGE="rubric",
                MONITOR_SAMPLE_RATE="1.0",
                MONITOR_BATCH_MAX_SECONDS="0.5",
                MONITOR_COMMIT_INTERVAL_S="0.2",
                MONITOR_KAFKA_SESSION_TIMEOUT_MS=str(SESSION_MS),
                MONITOR_SHUTDOWN_GRACE_S=str(GRACE_S),
                MONITOR_LOG_FORMAT="json",
                **fake_messages_api.env(),
            )
        )

    failures: list[str] = []
    replicas: list[MonitorProcess] = []
    try:
        for rnd in range(1, ROUNDS + 1):
            group = f"g{rnd}-{topic}"
            replicas = [replica(group, n) for n in range(REPLICAS)]
            for r in replicas:
                await r.start()

            async def settled() -> bool:
                for r in replicas:
                    assert r.proc is not None and r.proc.returncode is None, "".join(r.lines[-10:])
                return all(r.assigned.is_set() for r in replicas)

            await wait_for(settled, 120, "every replica to join")
            seen = [len(r.lines) for r in replicas]
            newcomer = AIOKafkaConsumer(
                topic, bootstrap_servers=broker.bootstrap, group_id=group, session_timeout_ms=SESSION_MS
            )
            await newcomer.start()
            try:
                # The signal lands at a random point of the rebalance: from the newcomer's start (before the replicas
                # hear of it, or in their revoke), or from the first replica's revoke (in the join that follows).
                after_revoke = rng.random() < 0.5
                if after_revoke:
                    revoked: Callable[[], bool] = lambda: any(  # noqa: E731
                        logged_after(r, s, "partitions_revoked") for r, s in zip(replicas, seen, strict=True)
                    )
                    await wait_for(lambda: _true(revoked()), 60, "a replica to revoke its partitions")
                await asyncio.sleep(rng.uniform(0.0, 1.0 if after_revoke else 2.0))
                signalled = time.monotonic()
                for r in replicas:
                    assert r.proc is not None and r.proc.returncode is None, "".join(r.lines[-10:])
                    r.proc.send_signal(signal.SIGTERM)
                problems = await asyncio.gather(*(stop_and_wait(r, signalled) for r in replicas))
            finally:
                await newcomer.stop()
            print(f"round {rnd} ({'after a revoke' if after_revoke else 'from the join'}):", problems)
            for r, problem in zip(replicas, problems, strict=True):
                if problem is not None:
                    failures.append(f"round {rnd}: {problem}; its last lines:\n" + "".join(r.lines[-12:]))
    finally:
        producing.cancel()
        for r in replicas:
            if r.proc is not None and r.proc.returncode is None:
                r.proc.kill()
                await r.proc.wait()
    assert not failures, "\n".join(failures)


async def _true(value: bool) -> bool:
    return value
