"""The embedded store while a monitor holds it: read-only over the holder's loopback endpoint, writes refused."""

from __future__ import annotations

import asyncio
import json
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import clickhouse_connect
import pytest
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import DatabaseError

from monitor.devtools.localbroker import LocalBroker
from monitor.devtools.traffic import generate_events
from monitor.store.connection import ClickHouseStore
from monitor.store.embedded_reader import READER_FILE, READER_USER, EmbeddedReader, reader_address
from monitor.store.migrations import Migrations
from tests.harness import CLI, cli, monitor_env, produce_values, wait_for


@pytest.fixture
def reader(store: ClickHouseStore, chdb_dir: Path) -> Iterator[EmbeddedReader]:
    """A reader on the suite's own embedded directory (chDB shares one engine per process)."""
    Migrations(store).ensure()
    r = EmbeddedReader(chdb_dir).start()
    try:
        yield r
    finally:
        r.stop()


def _client(reader: EmbeddedReader, database: str, password: str | None = None) -> Client:
    address = reader_address(reader.directory)
    assert address is not None
    return clickhouse_connect.get_client(
        dsn=address.url, username=READER_USER, password=password or address.password, database=database
    )


def test_reads_match_the_engine_and_writes_are_refused_by_readonly(
    reader: EmbeddedReader, store: ClickHouseStore, database: str
) -> None:
    """Queries with bound parameters answer as the engine does; INSERT, DELETE, DDL and setting changes are refused
    by ClickHouse's readonly mode (code 164), and the table is unchanged."""
    client = _client(reader, database)
    sql = "SELECT count() FROM relevancy_scores WHERE has({ids:Array(String)}, event_id) OR {n:UInt8} = 1"
    assert (
        client.query(sql, parameters={"ids": ["a"], "n": 1}).result_rows
        == store.query(sql, {"ids": ["a"], "n": 1}).rows
    )
    before = store.query("SELECT count() FROM relevancy_scores").rows
    for statement in (
        "INSERT INTO relevancy_scores (event_id) VALUES ('x')",
        "DELETE FROM relevancy_scores WHERE 1",
        "DROP TABLE relevancy_scores",
        "CREATE TABLE t_new (x UInt8) ENGINE = Memory",
        "SELECT 1 SETTINGS readonly = 0",
        "SET readonly = 0",
    ):
        with pytest.raises(DatabaseError, match="READONLY"):
            client.command(statement)
    assert store.query("SELECT count() FROM relevancy_scores").rows == before


def test_a_wrong_password_is_refused(reader: EmbeddedReader, database: str) -> None:
    """The endpoint answers only with the password in the 0600 address file."""
    with pytest.raises(DatabaseError, match="Authentication failed"):
        _client(reader, database, password="guess").query("SELECT 1")
    mode = stat.S_IMODE((reader.directory / READER_FILE).stat().st_mode)
    assert mode == 0o600


async def test_a_store_opened_twice_serves_one_reader_and_close_stops_it(
    store: ClickHouseStore, chdb_dir: Path
) -> None:
    """A pipeline opens the store its caller opened: one reader serves it, and closing the store withdraws it."""
    from monitor.store.async_store import AsyncStore

    shared = AsyncStore(ClickHouseStore(store.url, store.database, store.table))
    await shared.open()
    first = reader_address(chdb_dir)
    await shared.open()
    assert first is not None and reader_address(chdb_dir) == first
    await shared.close()
    assert reader_address(chdb_dir) is None and not (chdb_dir / READER_FILE).exists()


def test_the_address_goes_with_the_process(reader: EmbeddedReader, tmp_path: Path) -> None:
    """An address left by a process that has ended is ignored; a stopped reader removes its address."""
    (tmp_path / READER_FILE).write_text(
        json.dumps({"url": "http://127.0.0.1:1", "password": "p", "pid": 2**22 + 12345})
    )
    assert reader_address(tmp_path) is None
    assert reader_address(reader.directory) is not None
    reader.stop()
    assert reader_address(reader.directory) is None
    assert not (reader.directory / READER_FILE).exists()
    reader.start = lambda: reader  # type: ignore[method-assign] # the fixture's stop must stay harmless
    reader.stop = lambda: None  # type: ignore[method-assign]


async def _count(env: dict[str, str]) -> int:
    code, out, err = await cli("sql", "--format", "csv", "SELECT count() FROM {table} FINAL", env=env)
    assert code == 0, err
    return int(out.splitlines()[1])


@pytest.mark.long(seconds=127)
@pytest.mark.slow
async def test_sql_during_a_live_run_sees_the_rows_grow(broker: LocalBroker, topic: str, tmp_path: Path) -> None:
    """While `run` holds the embedded directory, `sql` (another process) sees the row count grow, and `alerts check`,
    `alerts backtest` and `report` answer; `migrate` and `forget` are refused in one line naming the monitor's pid;
    the address goes on stop."""
    data = tmp_path / "ch"
    env = monitor_env(
        MONITOR_KAFKA_BOOTSTRAP_SERVERS=broker.bootstrap,
        MONITOR_KAFKA_TOPICS=topic,
        MONITOR_KAFKA_GROUP_ID=f"reader-{topic}",
        MONITOR_DLQ_TOPIC=f"{topic}.dlq",
        MONITOR_CLICKHOUSE_URL=f"chdb://{data}",
        MONITOR_METRICS_PORT="0",
        MONITOR_BATCH_MAX_SECONDS="0.2",
        MONITOR_COMMIT_INTERVAL_S="0.2",
    )
    await produce_values(broker.bootstrap, topic, list(generate_events(40, seed=1, malformed_share=0.0)))
    service = await asyncio.create_subprocess_exec(
        CLI, "run", env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    try:

        async def first_batch() -> bool:
            return reader_address(data) is not None and await _count(env) == 40

        await wait_for(first_batch, 60, "the first 40 rows, read by `sql` while `run` holds the store")
        await produce_values(broker.bootstrap, topic, list(generate_events(25, seed=2, malformed_share=0.0)))

        async def second_batch() -> bool:
            return await _count(env) == 65

        await wait_for(second_batch, 60, "65 rows, read by `sql` while `run` holds the store")
        code, out, err = await cli("alerts", "check", "--json", env=env)
        assert code == 0 and out.strip(), err
        code, _, err = await cli("alerts", "backtest", "--since=-10m", "--step", "1m", env=env)
        assert code == 0, err
        code, _, err = await cli("report", "--since=-7d", "--out", str(tmp_path / "report.html"), env=env)
        assert code == 0 and "support-bot" in (tmp_path / "report.html").read_text(encoding="utf-8"), err
        assert service.pid is not None
        code, out, err = await cli("sql", "--format", "csv", "SELECT any(event_id) FROM {table}", env=env)
        assert code == 0, err
        for args in (("migrate",), ("forget", "--event-id", out.splitlines()[1])):
            code, _, err = await cli(*args, env=env)
            assert code != 0 and len(err.strip().splitlines()) == 1 and f"pid {service.pid}" in err, (args, err)
        service.send_signal(signal.SIGTERM)
        await asyncio.wait_for(service.communicate(), 30)
    finally:
        if service.returncode is None:
            service.kill()
    assert service.returncode == 0
    assert not (data / READER_FILE).exists()
    assert await _count(env) == 65  # and with the monitor gone, `sql` opens the directory itself
