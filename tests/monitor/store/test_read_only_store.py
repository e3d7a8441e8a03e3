"""Read commands cannot write: `sql` and every other read path get a session the engine keeps read-only, on the
embedded store in this process, through a running monitor's endpoint, and against a server that would accept writes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import clickhouse_connect
import pytest
import structlog

from monitor.cli.main import main
from monitor.store.connection import ClickHouseStore
from monitor.store.embedded_reader import READER_USER, EmbeddedReader
from monitor.store.migrations import Migrations
from schemas.errors import StoreError
from tests.harness import cli, monitor_env
from tests.monitor.runtime.test_sink import rows

WRITES = (
    "DROP TABLE {table}",
    "TRUNCATE TABLE {table}",
    "INSERT INTO {table} (event_id, app) VALUES ('intruder', 'x')",
    "ALTER TABLE {table} ADD COLUMN intruder UInt8",
    "CREATE TABLE intruder (x UInt8) ENGINE = Memory",
    "SET readonly = 0",
    "SELECT 1; DROP TABLE {table}",
    "SELECT count() FROM {table} SETTINGS readonly = 0",
)


@pytest.fixture
def filled(store: ClickHouseStore) -> ClickHouseStore:
    """The test's store with three scored rows in it."""
    store.insert_rows(rows(3), dedup_token="filled")
    return store


def _intact(store: ClickHouseStore) -> None:
    assert store.query(f"SELECT count() FROM {store.qualified_table}").rows == [(3,)]
    assert "intruder" not in {
        c for (c,) in store.query(f"SELECT name FROM system.columns WHERE database = '{store.database}'").rows
    }
    assert store.query(
        f"SELECT count() FROM system.tables WHERE database = '{store.database}' AND name = 'intruder'"
    ).rows == [(0,)]


def _one_line_refusal(err: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("relevancy-monitor: error: ") and "READONLY" in lines[0], err


@pytest.mark.parametrize("statement", WRITES)
def test_sql_refuses_every_write_on_the_embedded_store(
    filled: ClickHouseStore, statement: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the embedded store opened directly (no monitor serving it), each write is refused by the engine in one
    line with a non-zero exit, and the data is intact."""
    rc = main(["sql", statement, "--clickhouse-url", filled.url, "--clickhouse-database", filled.database])
    err = capsys.readouterr().err
    assert rc != 0
    _one_line_refusal(err)
    assert "this command only reads" in err
    _intact(filled)


@pytest.fixture
def serving(filled: ClickHouseStore, chdb_dir: Path) -> Iterator[EmbeddedReader]:
    """This process serves its embedded directory, as a running monitor does."""
    reader = EmbeddedReader(chdb_dir).start()
    try:
        yield reader
    finally:
        reader.stop()


async def test_sql_refuses_every_write_through_a_running_monitor(
    serving: EmbeddedReader, filled: ClickHouseStore
) -> None:
    """Another process's `sql`, reaching the store through the monitor that holds it, is refused every write."""
    env = monitor_env(MONITOR_CLICKHOUSE_URL=filled.url, MONITOR_CLICKHOUSE_DATABASE=filled.database)
    results = await asyncio.gather(*(cli("sql", statement, env=env) for statement in WRITES))
    for statement, (rc, _out, err) in zip(WRITES, results, strict=True):
        assert rc != 0, statement
        _one_line_refusal(err)
    _intact(filled)


@pytest.fixture
def server(serving: EmbeddedReader, monkeypatch: pytest.MonkeyPatch) -> EmbeddedReader:
    """The running monitor's endpoint, reached as a server URL with its password in MONITOR_CLICKHOUSE_PASSWORD."""
    monkeypatch.setenv("MONITOR_CLICKHOUSE_PASSWORD", serving._password)
    return serving


def test_sql_refuses_every_write_on_a_server_url(
    server: EmbeddedReader, filled: ClickHouseStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """Against an http:// URL, every write is refused in one line with a non-zero exit, and reads still answer."""
    flags = ["--clickhouse-url", server.url, "--clickhouse-user", READER_USER, "--clickhouse-database", filled.database]
    for statement in WRITES:
        assert main(["sql", statement, *flags]) != 0, statement
        _one_line_refusal(capsys.readouterr().err)
    assert main(["sql", "SELECT count() FROM {table}", "--format", "csv", *flags]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "3"
    _intact(filled)


def test_a_read_session_on_a_server_asks_for_readonly_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """A read session on a server URL is opened with readonly = 1 among its settings, so the server refuses writes
    even for a user that could write; a write session is not."""
    asked: list[dict[str, Any]] = []

    def get_client(**kwargs: Any) -> Any:
        asked.append(kwargs)
        raise ConnectionError("stop here")

    monkeypatch.setattr(clickhouse_connect, "get_client", get_client)
    for store in (ClickHouseStore("http://127.0.0.1:1", "relevancy", "relevancy_scores") for _ in range(2)):
        with pytest.raises(StoreError):
            store.open_for_reads() if not asked else Migrations(store).ensure()
    assert asked[0]["settings"] == {"readonly": "1"} and "settings" not in asked[1]


def _read_commands(store: ClickHouseStore) -> list[list[str]]:
    flags = ["--clickhouse-url", store.url, "--clickhouse-database", store.database]
    return [
        ["sql", "SELECT 1", *flags],
        ["report", "--out", "{out}", *flags],
        ["alerts", "check", *flags],
        ["alerts", "backtest", "--since=-1h", *flags],
        ["compare", *flags],
        ["replay", "--from-store", "--since=-1h", "--dry-run", "--progress", "lines", *flags],
        ["forget", "--event-id", "e0", "--dry-run", *flags],
    ]


@pytest.mark.long(seconds=19)
def test_every_read_command_holds_a_session_the_engine_keeps_read_only(
    filled: ClickHouseStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> None:
    """report, alerts check, alerts backtest, compare, replay --dry-run and forget --dry-run each read through a
    session whose readonly setting, asked of the engine itself, is 1 when the command closes it."""
    seen: list[Any] = []
    close = ClickHouseStore.close
    logging_before = structlog.get_config()  # replay configures logging for its screen; later tests capture info lines
    request.addfinalizer(lambda: structlog.configure(**logging_before))

    def checked_close(self: ClickHouseStore) -> None:
        if self._client is not None:
            seen.append(self.query("SELECT getSetting('readonly')").rows[0][0])
        close(self)

    monkeypatch.setattr(ClickHouseStore, "close", checked_close)
    for argv in _read_commands(filled):
        seen.clear()
        argv = [a.replace("{out}", str(tmp_path / "report.html")) for a in argv]
        main(argv)  # compare refuses a store with one judge (exit 2) after reading it: the session is what counts
        capsys.readouterr()
        assert seen and all(int(v) == 1 for v in seen), (argv, seen)
    _intact(filled)
