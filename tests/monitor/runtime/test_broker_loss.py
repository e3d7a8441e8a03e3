"""Losing the broker mid-run, through a TCP proxy the test cuts and restores (tansu keeps its topics): the
monitor keeps its unfinished events, says so once, shows it in readiness, resumes without loss, and stops cleanly
even while the broker is away."""

from __future__ import annotations

import asyncio
import json
import signal
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from monitor.devtools.localbroker import free_port
from monitor.devtools.traffic import generate_events
from monitor.store.connection import ClickHouseStore
from tests.harness import committed_offsets, create_topic, monitor_env, produce_values, wait_for
from tests.monitor.runtime.test_faults import MonitorProcess
from tests.tcp_proxy import ProxiedBroker

pytestmark = pytest.mark.slow


def _readiness(port: int) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
    except OSError:
        return 0, {}


def _env(pb: ProxiedBroker, topic: str, tmp_path: Path, port: int) -> dict[str, str]:
    return monitor_env(
        MONITOR_KAFKA_BOOTSTRAP_SERVERS=pb.bootstrap,
        MONITOR_KAFKA_TOPICS=topic,
        MONITOR_KAFKA_GROUP_ID=f"g-{topic}",
        MONITOR_DLQ_TOPIC=f"{topic}.dlq",
        MONITOR_CLICKHOUSE_URL=f"chdb://{tmp_path / 'ch'}",
        MONITOR_METRICS_PORT=str(port),
        MONITOR_LAG_CHECK_S="0.5",
        MONITOR_COMMIT_INTERVAL_S="0.2",
        MONITOR_BATCH_MAX_SECONDS="0.2",
        MONITOR_KAFKA_SESSION_TIMEOUT_MS="6000",
        MONITOR_SHUTDOWN_GRACE_S="5",
        MONITOR_LOG_FORMAT="json",
    )


async def _committed(pb: ProxiedBroker, topic: str) -> int:
    return sum(v or 0 for v in (await committed_offsets(pb.bootstrap, f"g-{topic}", topic)).values())


@pytest.mark.long(seconds=19)
async def test_a_lost_broker_is_reported_once_shown_in_readiness_and_nothing_is_lost(tmp_path: Path) -> None:
    """Cut for 10 s: a few log lines (not hundreds), /readyz 503 naming kafka; after restore every event is scored
    once."""
    topic, port = f"loss-{uuid.uuid4().hex[:6]}", free_port()
    with ProxiedBroker() as pb:
        await create_topic(pb.bootstrap, topic)
        await produce_values(pb.bootstrap, topic, list(generate_events(200, seed=1, malformed_share=0.0)))
        monitor = MonitorProcess(_env(pb, topic, tmp_path, port))
        await monitor.start()
        await wait_for(lambda: _at_least(_committed(pb, topic), 200), 60, "the first 200 events committed")
        assert _readiness(port)[0] == 200

        lines_before = len(monitor.lines)
        pb.proxy.cut()
        cut_at = time.monotonic()
        await wait_for(lambda: _is(_readiness(port)[0] == 503), 15, "/readyz to report the broker gone")
        _, report = _readiness(port)
        assert report["ready"] is False and report["components"]["kafka"]["up"] is False  # type: ignore[index]
        await asyncio.sleep(max(0.0, 10 - (time.monotonic() - cut_at)))
        during = monitor.lines[lines_before:]
        pb.proxy.restore()

        assert sum('"kafka_unreachable"' in ln for ln in during) == 1
        assert len(during) < 40, f"{len(during)} log lines in a 10 s outage:\n{''.join(during[-10:])}"
        await produce_values(pb.bootstrap, topic, list(generate_events(200, seed=2, malformed_share=0.0)))
        await wait_for(
            lambda: _at_least(_committed(pb, topic), 400), 90, "all 400 events committed after the broker returned"
        )
        await wait_for(lambda: _is(_readiness(port)[0] == 200), 15, "/readyz to recover")
        assert any('"kafka_reachable"' in ln for ln in monitor.lines)
        code = await monitor.terminate()
    assert code == 0
    text = "".join(monitor.lines)
    assert "Traceback" not in text and "Unclosed" not in text
    store = ClickHouseStore(f"chdb://{tmp_path / 'ch'}", "relevancy", "relevancy_scores")
    try:
        rows = store.query("SELECT count(), uniqExact(event_id) FROM relevancy.relevancy_scores FINAL").rows[0]
    finally:
        store.close()
    assert tuple(rows) == (400, 400)


async def test_a_stop_while_the_broker_is_away_exits_cleanly(tmp_path: Path) -> None:
    """SIGINT with the broker gone: the monitor writes what it has, exits 0 in bounded time, no traceback or Unclosed
    client."""
    topic, port = f"away-{uuid.uuid4().hex[:6]}", free_port()
    with ProxiedBroker() as pb:
        await create_topic(pb.bootstrap, topic)
        await produce_values(pb.bootstrap, topic, list(generate_events(100, seed=4, malformed_share=0.0)))
        monitor = MonitorProcess(_env(pb, topic, tmp_path, port))
        await monitor.start()
        await wait_for(lambda: _at_least(_committed(pb, topic), 100), 60, "100 events committed")
        pb.proxy.cut()
        await wait_for(lambda: _is(_readiness(port)[0] == 503), 15, "/readyz to report the broker gone")
        assert monitor.proc is not None
        started = time.monotonic()
        monitor.proc.send_signal(signal.SIGINT)
        try:
            code = await asyncio.wait_for(monitor.proc.wait(), 60)
        except TimeoutError:
            raise AssertionError(
                "no exit 60 s after SIGINT; its last lines:\n" + "".join(monitor.lines[-25:])
            ) from None
        took = time.monotonic() - started
    text = "".join(monitor.lines)
    assert code == 0, text[-2000:]
    assert took < 30, f"took {took:.1f}s to stop"
    assert "Traceback" not in text and "Unclosed" not in text and "CancelledError" not in text


async def test_readiness_transitions_against_a_broker_lost_mid_run(tmp_path: Path) -> None:
    """/readyz: 503 while starting, 200 once joined, 503 within 30 s of losing the broker, 200 again once it returns."""
    topic, port = f"ready-{uuid.uuid4().hex[:6]}", free_port()
    with ProxiedBroker() as pb:
        await create_topic(pb.bootstrap, topic)
        monitor = MonitorProcess(_env(pb, topic, tmp_path, port))
        started = time.monotonic()
        await monitor.start()
        await wait_for(lambda: _is(_readiness(port)[0] == 503), 30, "/readyz to answer 503 while starting")
        assert "joining the consumer group" in _readiness(port)[1].get("starting", [])  # type: ignore[operator]
        await wait_for(lambda: _is(_readiness(port)[0] == 200), 60, "/readyz 200 once joined")
        ready_s = time.monotonic() - started
        pb.proxy.cut()
        cut = time.monotonic()
        await wait_for(lambda: _is(_readiness(port)[0] == 503), 30, "/readyz 503 after the broker is lost")
        unready_s = time.monotonic() - cut
        pb.proxy.restore()
        back = time.monotonic()
        await wait_for(lambda: _is(_readiness(port)[0] == 200), 60, "/readyz 200 after the broker returns")
        ready_again_s = time.monotonic() - back
        print(
            f"ready after start {ready_s:.1f}s; unready {unready_s:.1f}s after the cut; ready {ready_again_s:.1f}s "
            "after restore"
        )
        code = await monitor.terminate()
    assert code == 0 and unready_s < 30


async def _at_least(value: object, n: int) -> bool:
    return await value >= n  # type: ignore[operator,no-any-return]


async def _is(value: bool) -> bool:
    return value
