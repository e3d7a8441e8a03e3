"""Store errors say what failed and keep their cause: a failed insert of scored rows is a `StoreError` like every
other call's, and a running monitor's read endpoint that does not answer is named in the refusal, not passed over."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from clickhouse_connect.driver.exceptions import ClickHouseError

from monitor.store.connection import ClickHouseStore
from monitor.store.embedded_reader import READER_FILE
from schemas.errors import StoreError
from tests.harness import cli, monitor_env
from tests.monitor.runtime.test_sink import rows


def test_a_failed_insert_of_scored_rows_is_a_store_error_with_the_driver_s_cause(store: ClickHouseStore) -> None:
    """With the scores table gone, `insert_rows` raises `StoreError` with ClickHouse's reason, the driver's
    exception as its cause, as `insert_table` and `command` do."""
    store.command(f"DROP TABLE {store.qualified_table} SYNC")
    with pytest.raises(StoreError, match="UNKNOWN_TABLE") as caught:
        store.insert_rows(rows(1), dedup_token="gone")
    assert isinstance(caught.value.__cause__, ClickHouseError)


async def test_a_read_endpoint_that_does_not_answer_is_named_in_the_refusal(
    store: ClickHouseStore, chdb_dir: Path
) -> None:
    """The directory is held by a live process (this one) whose published read endpoint refuses connections: `sql`
    from another process exits 1 with one line saying the endpoint did not answer and why (not that `sql` writes)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = int(s.getsockname()[1])
    address = chdb_dir / READER_FILE
    address.write_text(json.dumps({"url": f"http://127.0.0.1:{closed}", "password": "x", "pid": os.getpid()}))
    try:
        env = monitor_env(MONITOR_CLICKHOUSE_URL=f"chdb://{chdb_dir}", MONITOR_CLICKHOUSE_DATABASE=store.database)
        code, _out, err = await cli("sql", "SELECT 1", env=env)
    finally:
        address.unlink()
    assert code == 1, err
    [line] = err.strip().splitlines()
    assert (
        f"held by process {os.getpid()} (a running monitor" in line and f"endpoint at http://127.0.0.1:{closed}" in line
    )
    assert "did not answer (connection refused)" in line and "this command never writes" not in line, line
