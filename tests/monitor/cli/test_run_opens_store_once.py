"""`run` opens the store once and checks (or migrates) its schema once, in one place (`AsyncStore.open`), whether it
migrates the store itself or only checks it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import structlog

import monitor.store.connection
from monitor.cli.main import main
from monitor.devtools.localbroker import LocalBroker
from monitor.runtime.pipeline import Pipeline
from monitor.store.migrations import Migrations


@pytest.mark.parametrize("auto_migrate", [[], ["--auto-migrate", "true"], ["--auto-migrate", "false"]])
def test_run_opens_and_checks_the_store_once(
    broker: LocalBroker,
    topic: str,
    clickhouse_url: str,
    database: str,
    auto_migrate: list[str],
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    """A `run` stopped as soon as its pipeline starts has opened one connection to the store and read the schema's
    migrations once (by default, migrating itself, and with MONITOR_AUTO_MIGRATE true or false)."""
    logging_before = structlog.get_config()  # `run` configures logging for its process; later tests capture lines
    request.addfinalizer(lambda: structlog.configure(**logging_before))
    connections: list[str] = []
    checks: list[str] = []
    open_client, pending, run = monitor.store.connection.open_client, Migrations.pending, Pipeline.run

    def counted_open_client(url: str, **options: Any) -> Any:
        connections.append(url)
        return open_client(url, **options)

    def counted_pending(self: Migrations) -> Any:
        checks.append(self.store.database)
        return pending(self)

    async def run_until_started(self: Pipeline, stop: asyncio.Event) -> None:
        stop.set()  # the pipeline opens the store and starts its clients, then drains at once
        await run(self, stop)

    monkeypatch.setattr(monitor.store.connection, "open_client", counted_open_client)
    monkeypatch.setattr(Migrations, "pending", counted_pending)
    monkeypatch.setattr(Pipeline, "run", run_until_started)
    if auto_migrate[-1:] == ["false"]:  # a store that does not migrate itself must be current already
        Migrations(monitor.store.connection.ClickHouseStore(clickhouse_url, database, "relevancy_scores")).migrate()
        connections.clear()
        checks.clear()
    flags = ["--clickhouse-url", clickhouse_url, "--clickhouse-database", database, "--kafka-topics", topic]
    kafka = ["--kafka-bootstrap-servers", broker.bootstrap, "--kafka-group-id", f"g-{topic}", "--judge", "lexical"]
    try:
        assert main(["run", *flags, *kafka, "--metrics-port", "0", *auto_migrate]) == 0
        assert (len(connections), len(checks)) == (1, 1), (connections, checks)
    finally:
        monitor.store.connection.ClickHouseStore(clickhouse_url, database, "relevancy_scores").command(
            f"DROP DATABASE IF EXISTS {database} SYNC"
        )
