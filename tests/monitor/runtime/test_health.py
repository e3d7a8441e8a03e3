"""Readiness: the HTTP endpoints beside the metrics, and the store's state as the sink sees it."""

from __future__ import annotations

import asyncio
import json
import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from monitor.runtime.health import Health, HealthGauges, HealthServer
from monitor.runtime.metrics import Metrics
from monitor.runtime.sink import ClickHouseSink
from monitor.store.async_store import AsyncStore
from schemas.errors import PortInUse
from tests.harness import cli, monitor_env
from tests.monitor.runtime.test_sink import FAST, FaultyStore, rows


def _get(port: int, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_readyz_is_503_with_the_reason_while_a_dependency_is_down_and_metrics_stay_served() -> None:
    """/readyz answers 503 naming the component and its problem, /healthz stays 200, /metrics shows the gauges."""
    registry, health = CollectorRegistry(), Health(joined=True, store_answered=True)
    gauges = HealthGauges(registry)
    server = HealthServer(registry, health, 0, host="127.0.0.1").start()
    try:
        assert _get(server.port, "/readyz")[0] == 200
        assert health.mark("kafka", False, "KafkaConnectionError: connection refused") and not health.mark(
            "kafka", False, "again"
        )
        gauges.update(health)
        status, body = _get(server.port, "/readyz")
        report = json.loads(body)
        assert status == 503 and report["ready"] is False and report["components"]["kafka"]["reason"] == "again"
        assert _get(server.port, "/healthz")[0] == 200
        metrics = _get(server.port, "/metrics")[1].decode()
        assert 'relevancy_monitor_up{component="kafka"} 0.0' in metrics and "relevancy_monitor_ready 0.0" in metrics
        assert _get(server.port, "/nope")[0] == 404
    finally:
        server.stop()


async def test_a_failing_store_shows_in_readiness_until_a_write_succeeds(async_store: AsyncStore) -> None:
    """Insert failures past the threshold mark the store down (with the error) and the first durable write marks it
    up."""
    health = Health(joined=True, store_answered=True, unready_after_s=0.0)
    seen: list[bool] = []
    store = FaultyStore(async_store, fail_before=2)
    sink: ClickHouseSink[int] = ClickHouseSink(
        store,
        lambda t, r: seen.append(health.component_up("store")),
        Metrics(),
        health,
        backoff=FAST,
    )
    original = store.insert_rows

    async def watching(rows_: object, token: str) -> None:
        seen.append(health.component_up("store"))
        if health.writes_failing_since is not None:
            assert health.reason("store").startswith("inserts failing for ")
        await original(rows_, token)  # type: ignore[arg-type]

    store.insert_rows = watching  # type: ignore[method-assign]
    for i, r in enumerate(rows(2)):
        sink.add(r, i)
    await asyncio.wait_for(sink.flush(), 10)
    assert seen == [True, False, False, True] and health.ready


def test_readiness_turns_on_inserts_failing_longer_than_the_threshold_and_recovers_on_a_write() -> None:
    """The store answering probes is not enough: inserts failing for more than `unready_after_s` make /readyz say
    why, and one successful write makes it ready again."""
    health = Health(joined=True, store_answered=True, unready_after_s=60.0)
    health.write_failed("StoreError: Table relevancy.relevancy_scores does not exist", now=100.0)
    health.write_failed("StoreError: Table relevancy.relevancy_scores does not exist", now=130.0)
    assert health.component_up("store", now=159.0) and health.writes_failing_s(now=159.0) == 59.0
    assert not health.component_up("store", now=175.0)
    assert (
        health.reason("store", now=175.0)
        == "inserts failing for 75 s: StoreError: Table relevancy.relevancy_scores does not exist"
    )
    health.write_succeeded()
    assert health.ready and health.report()["components"]["store"] == {"up": True, "reason": ""}


def test_not_ready_until_joined_and_the_store_answered_and_the_judge_circuit_never_gates() -> None:
    """A fresh monitor is not ready (saying why) until both milestones; an open judge circuit is reported, not
    gating."""
    health = Health()
    assert not health.ready and health.starting() == ["joining the consumer group", "opening the store"]
    health.store_answered = True
    health.joined = True
    health.info["judge_circuit"] = "open"
    assert health.ready and health.report()["info"] == {"judge_circuit": "open"} and health.report()["starting"] == []


def test_liveness_fails_only_when_the_event_loop_stops_beating() -> None:
    """/healthz is 200 while the loop beats, even with every dependency down, and 503 once it has been silent."""
    registry, health = CollectorRegistry(), Health()
    for component in ("kafka", "store", "dead_letter_topic"):
        health.mark(component, False, "down")
    server = HealthServer(registry, health, 0, host="127.0.0.1", max_silence_s=0.5).start()
    try:
        assert _get(server.port, "/healthz")[0] == 200
        health.beat -= 1.0  # as if the loop had been wedged for a second
        status, body = _get(server.port, "/healthz")
        assert status == 503 and json.loads(body)["alive"] is False
    finally:
        server.stop()


async def test_the_heartbeat_keeps_liveness_up_while_the_loop_runs() -> None:
    """The heartbeat task refreshes the beat from the event loop."""
    health = Health()
    health.beat -= 100
    task = asyncio.create_task(health.heartbeat(every_s=0.01))
    await asyncio.sleep(0.05)
    task.cancel()
    assert health.alive(1.0)


async def test_a_metrics_port_in_use_stops_run_in_one_line(tmp_path: Path) -> None:
    """`run` with MONITOR_METRICS_PORT held by another process exits 2 with one error line naming the port and the
    setting (it was a 25-line OSError traceback)."""
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        env = monitor_env(
            MONITOR_METRICS_PORT=str(port),
            MONITOR_CLICKHOUSE_URL=f"chdb://{tmp_path}/store",
            MONITOR_KAFKA_BOOTSTRAP_SERVERS="127.0.0.1:9",
            MONITOR_JUDGE="lexical",
        )
        code, _, err = await cli("run", env=env)
    lines = [line for line in err.strip().splitlines() if not line.startswith("{")]  # not the JSON log lines
    assert (code, len(lines)) == (2, 1), err
    assert f"port {port} is in use by another process (MONITOR_METRICS_PORT)" in lines[0]


def test_the_port_in_use_error_names_the_alert_evaluator_s_own_setting() -> None:
    """The evaluator's health server names ALERTS_METRICS_PORT."""
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        with pytest.raises(PortInUse, match="ALERTS_METRICS_PORT"):
            HealthServer(CollectorRegistry(), Health(), held.getsockname()[1], setting="ALERTS_METRICS_PORT")
