"""No command prints the store's password: every `relevancy-monitor` subcommand, run against a server URL that
carries one (a test endpoint over the embedded engine, reached over HTTP like a ClickHouse server), leaves it out of
its output and its log lines."""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import chdb
import pytest

from monitor.cli.main import build_parser
from monitor.store.connection import ClickHouseStore
from monitor.store.embedded_reader import READER_USER, EmbeddedReader
from tests.harness import cli, monitor_env

PASSWORD = "planted-Pa55word-7f3c"

# The arguments each subcommand needs to reach the store and then end on its own. A subcommand not listed here runs
# with none: a new command is covered as soon as it exists (and a new one that never ends times out here).
ARGUMENTS: dict[tuple[str, ...], list[list[str]]] = {
    ("run",): [[]],  # Kafka at a closed port: it opens the store, then stops with one line about Kafka
    ("migrate",): [[], ["--check"]],
    ("sql",): [["SELECT 1"]],
    ("produce",): [["--generate", "1"]],
    ("broker",): [["--port", "{port}"]],  # the endpoint's port, taken: it stops at once
    ("judge",): [["-q", "When did order A17 ship?", "-a", "Order A17 shipped on 3 March."]],
    ("calibrate",): [["--labels", "{labels}"]],
    ("alerts", "run"): [["--once", "--no-lease"]],
    ("alerts", "accept"): [["relevancy_drop", "app=support-bot"]],
    ("alerts", "backtest"): [["--since=-1h"]],
    ("forget",): [["--event-id", "e0", "--dry-run"], ["--event-id", "e0"]],
    ("demo",): [["--clickhouse-url", "{url}"]],  # refused: the demo replaces a store of its own, never a server's
    ("report",): [["--out", "{out}"]],
    ("ui",): [["--port", "{port}"]],  # the endpoint's port, taken: it opens the store, then stops with one line
    ("replay",): [["--from-store", "--since=-1h", "--dry-run"]],
}


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The name paths of every runnable subcommand (`alerts run`, ...), walking nested subparsers."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path
        return
    for name, child in subs[0].choices.items():
        yield from _leaves(child, (*path, name))


class _WritableEndpoint(EmbeddedReader):
    """The embedded engine over ClickHouse's HTTP interface, like a server that accepts DDL (the reader's session
    without readonly), with a password of the test's choosing."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        readonly, self._conn = self._conn, chdb.connect(os.path.realpath(directory))  # type: ignore[no-untyped-call]
        readonly.close()
        self._password = PASSWORD


@pytest.fixture
def server(store: ClickHouseStore, chdb_dir: Path) -> Iterator[_WritableEndpoint]:
    """A server URL for the test's migrated database, its password in the URL."""
    endpoint = _WritableEndpoint(chdb_dir)
    endpoint.start()
    try:
        yield endpoint
    finally:
        endpoint.stop()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.long(seconds=100)
async def test_no_command_prints_the_password_of_the_store_url(
    server: _WritableEndpoint, store: ClickHouseStore, tmp_path: Path
) -> None:
    """Each subcommand (walked from the parser), with MONITOR_CLICKHOUSE_URL=http://reader:<password>@host and its
    log level at debug, prints the password in neither stdout nor stderr (its log lines included); `migrate` and
    `migrate --check` name the server without it."""
    url = f"http://{READER_USER}:{PASSWORD}@127.0.0.1:{server.port}"
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"question": "When did order A17 ship?", "answer": "On 3 March.", "label": 1}\n')
    env = monitor_env(
        MONITOR_CLICKHOUSE_URL=url,
        MONITOR_CLICKHOUSE_DATABASE=store.database,
        MONITOR_KAFKA_BOOTSTRAP_SERVERS=f"127.0.0.1:{_closed_port()}",
        MONITOR_KAFKA_CONNECT_TIMEOUT_S="1",
        MONITOR_METRICS_PORT="0",
        MONITOR_JUDGE="lexical",
        MONITOR_LOG_LEVEL="debug",
    )
    values = {"{port}": str(server.port), "{labels}": str(labels), "{url}": url, "{out}": str(tmp_path / "r.html")}
    runs = [
        [*leaf, *(values.get(a, a) for a in args)]
        for leaf in _leaves(build_parser())
        for args in ARGUMENTS.get(leaf, [[]])
    ]
    assert len(runs) > len(ARGUMENTS)
    slots = asyncio.Semaphore(4)

    async def run(argv: list[str]) -> tuple[list[str], int, str]:
        async with slots:
            code, out, err = await cli(*argv, env=env, limit_s=120)
        return argv, code, out + err

    results = await asyncio.gather(*(run(argv) for argv in runs))
    leaked = [(argv, code, output) for argv, code, output in results if PASSWORD in output]
    assert not leaked, leaked
    shown = {" ".join(argv): output for argv, _, output in results}
    assert f"applied at http://127.0.0.1:{server.port} " in shown["migrate"], shown["migrate"]
    assert f"at http://127.0.0.1:{server.port} is current" in shown["migrate --check"], shown["migrate --check"]
