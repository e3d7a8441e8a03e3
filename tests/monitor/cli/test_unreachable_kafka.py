"""`run` against brokers that do not answer gives up in a bounded, configurable time, with one line."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from tests.harness import cli, monitor_env


async def test_a_silent_broker_is_one_line_within_the_connect_timeout(tmp_path: Path) -> None:
    """A port that accepts TCP but never answers Kafka: exit 1 after MONITOR_KAFKA_CONNECT_TIMEOUT_S, one line, no
    Unclosed client."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)  # the kernel completes handshakes; nobody ever reads or answers
        port = silent.getsockname()[1]
        env = monitor_env(
            MONITOR_KAFKA_BOOTSTRAP_SERVERS=f"127.0.0.1:{port}",
            MONITOR_KAFKA_CONNECT_TIMEOUT_S="2",
            MONITOR_CLICKHOUSE_URL=f"chdb://{tmp_path / 'ch'}",
            MONITOR_METRICS_PORT="0",
        )
        started = time.monotonic()
        code, _, err = await cli("run", env=env, limit_s=120)
        took = time.monotonic() - started
    last = err.strip().splitlines()[-1]
    assert code == 1, err
    assert last.startswith(f"relevancy-monitor: error: no answer from Kafka at 127.0.0.1:{port} within 2s"), err
    assert "Traceback" not in err and "Unclosed" not in err and sum("error" in ln for ln in err.splitlines()) == 1
    # Well under the default timeout of 60 s, so the 2 s setting is what ended it; the rest is the process's start-up,
    # which took up to 23 s on a loaded 2-core machine.
    assert took < 45, f"took {took:.1f}s"
