"""Each operator error seen in a tried-out install is exactly one line on stderr, with no library log line, no
Python repr and no usage text before it (issue 27, item 10)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.harness import cli, monitor_env

PREFIX = "relevancy-monitor"


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def only_error(err: str) -> str:
    """The error line, asserting it is the only line of stderr that is not one of the monitor's own JSON events."""
    lines = err.splitlines()
    foreign = [ln for ln in lines if not ln.startswith(PREFIX) and not _own_event(ln)]
    errors = [ln for ln in lines if ln.startswith(PREFIX)]
    assert not foreign and len(errors) == 1, err
    assert "<" not in errors[0] and "object at 0x" not in err and "Unclosed" not in err, err
    return errors[0]


def _own_event(line: str) -> bool:
    try:
        event = json.loads(line)
    except ValueError:
        return False
    # aiokafka's records carry their message as the event ("Unable connect to ..."); the monitor's are snake_case.
    return isinstance(event, dict) and str(event.get("event", "")).replace("_", "").isalpha()


async def test_a_closed_broker_port_says_connection_refused_in_words(tmp_path: Path) -> None:
    """`run` against a port nothing listens on: one error line saying "connection refused", no aiokafka line."""
    port = closed_port()
    env = monitor_env(
        MONITOR_KAFKA_BOOTSTRAP_SERVERS=f"127.0.0.1:{port}",
        MONITOR_CLICKHOUSE_URL=f"chdb://{tmp_path / 'ch'}",
        MONITOR_METRICS_PORT="0",
    )
    code, _, err = await cli("run", env=env, limit_s=120)
    assert code == 1, err
    assert only_error(err) == (
        f"{PREFIX}: error: cannot reach Kafka at 127.0.0.1:{port}: connection refused "
        "(check MONITOR_KAFKA_BOOTSTRAP_SERVERS)"
    )


async def test_an_unknown_broker_host_says_it_is_not_resolved(tmp_path: Path) -> None:
    """A broker host name that does not resolve is named as such, in one line."""
    env = monitor_env(
        MONITOR_KAFKA_BOOTSTRAP_SERVERS="no-such-broker.invalid:9092",
        MONITOR_CLICKHOUSE_URL=f"chdb://{tmp_path / 'ch'}",
        MONITOR_METRICS_PORT="0",
    )
    code, _, err = await cli("run", env=env, limit_s=120)
    assert code == 1 and "host name no-such-broker.invalid not resolved" in only_error(err), err


@pytest.mark.long(seconds=21)
async def test_replay_against_a_closed_broker_leaves_no_unclosed_consumer(tmp_path: Path) -> None:
    """`replay` that cannot reach the brokers closes its consumer: no "Unclosed AIOKafkaConsumer" after the error."""
    env = monitor_env(
        MONITOR_KAFKA_BOOTSTRAP_SERVERS=f"127.0.0.1:{closed_port()}", MONITOR_CLICKHOUSE_URL=f"chdb://{tmp_path}/ch"
    )
    assert (await cli("migrate", env=env))[0] == 0
    code, _, err = await cli("replay", "--since=-1h", env=env, limit_s=120)
    assert code == 1 and "connection refused" in only_error(err), err


async def test_a_refused_clickhouse_server_is_one_line() -> None:
    """A ClickHouse URL with nothing listening: one line ending in the reason, not the driver's pool repr."""
    port = closed_port()
    code, _, err = await cli("sql", "SELECT 1", env=monitor_env(MONITOR_CLICKHOUSE_URL=f"http://127.0.0.1:{port}"))
    assert code != 0
    assert only_error(err) == (
        f"{PREFIX}: error: cannot open ClickHouse at http://127.0.0.1:{port}: connection refused "
        "(check MONITOR_CLICKHOUSE_URL)"
    )


async def test_a_missing_sampling_file_is_the_only_line(tmp_path: Path) -> None:
    """MONITOR_SAMPLING_FILE naming no file stops `run` before the start-up log: the error is all of stderr."""
    env = monitor_env(
        MONITOR_SAMPLING_FILE=str(tmp_path / "missing.yaml"),
        MONITOR_CLICKHOUSE_URL=f"chdb://{tmp_path / 'ch'}",
        MONITOR_METRICS_PORT="0",
    )
    code, _, err = await cli("run", env=env)
    assert code == 2 and err.splitlines() == [only_error(err)] and "missing.yaml" in err, err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("alerts", "run", "--interval", "-1m"), "--interval=VALUE"),
        (("run", "--judge-concurency", "3"), "did you mean --judge-concurrency?"),
    ],
)
async def test_a_bad_command_line_is_one_line(args: tuple[str, ...], says: str, tmp_path: Path) -> None:
    """A misused flag is one line with its remedy; nothing (not even a blank line) comes before it."""
    code, _, err = await cli(*args, env=monitor_env(MONITOR_CLICKHOUSE_URL=f"chdb://{tmp_path}/ch"))
    assert code == 2 and err.splitlines() == [only_error(err)] and says in err, err


async def test_a_backtest_span_ending_before_it_starts_is_one_line(tmp_path: Path) -> None:
    """`alerts backtest` with --until before --since, on a store that exists: the error with no blank line first."""
    env = monitor_env(MONITOR_CLICKHOUSE_URL=f"chdb://{tmp_path}/ch")
    assert (await cli("migrate", env=env))[0] == 0
    code, _, err = await cli("alerts", "backtest", "--since", "2026-11-02", "--until", "2026-11-01", env=env)
    assert code == 2 and err.splitlines() == [only_error(err)] and "must be after --since" in err, repr(err)
