"""`run` checks the schema version at start (issue 11): a store behind this release stops `run` with one line saying
to run `migrate`, unless MONITOR_AUTO_MIGRATE, which defaults to true for the embedded store and false for servers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

import monitor.runtime.logs
from monitor.cli.main import main
from monitor.config import load_settings
from monitor.store.async_store import AsyncStore
from monitor.store.connection import ClickHouseStore
from monitor.store.migrations import Migrations
from schemas.ddl import migrations, render_ddl
from schemas.errors import StoreError
from tests.monitor.store.opening import open_as_run


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in list(os.environ):
        if k.startswith(("MONITOR_", "ALERTS_", "ANTHROPIC_")):
            monkeypatch.delenv(k)
    monkeypatch.setattr(
        monitor.runtime.logs, "configure_logging", lambda *a, **k: None
    )  # leave the test's logging alone


@pytest.fixture
def behind(clickhouse_url: str, database: str) -> Iterator[ClickHouseStore]:
    """A store the previous release made: its tables, no schema_migrations, so every migration is pending."""
    s = ClickHouseStore(clickhouse_url, database, "relevancy_scores")
    for statement in render_ddl(database, "relevancy_scores"):
        s.command(statement)
    yield s
    s.command(f"DROP DATABASE IF EXISTS {database} SYNC")


def _run_args(store: ClickHouseStore, *extra: str) -> list[str]:
    return [
        "run",
        "--clickhouse-url",
        store.url,
        "--clickhouse-database",
        store.database,
        "--kafka-bootstrap-servers",
        "127.0.0.1:1",
        "--metrics-port",
        "0",
        *extra,
    ]


def test_run_on_a_store_behind_without_auto_migrate_stops_with_one_line(
    behind: ClickHouseStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """MONITOR_AUTO_MIGRATE=false and a store behind: `run` exits 1 before Kafka with one line saying to run
    `migrate`."""
    assert main(_run_args(behind, "--auto-migrate", "false")) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("relevancy-monitor: error: the schema of"), err
    assert (
        "run `relevancy-monitor migrate` first" in err and "MONITOR_AUTO_MIGRATE=true" in err and "Kafka" not in err
    ), err
    assert Migrations(behind).pending()  # nothing was applied


def test_auto_migrate_at_start_brings_a_store_behind_up_to_date(behind: ClickHouseStore) -> None:
    """MONITOR_AUTO_MIGRATE=true: opening the store at start applies and records the pending migrations, then the
    check passes."""
    s = load_settings(clickhouse_url=behind.url, clickhouse_database=behind.database, auto_migrate=True)
    open_as_run(s.store)
    assert Migrations(behind).pending() == []
    open_as_run(load_settings(clickhouse_url=behind.url, clickhouse_database=behind.database, auto_migrate=False).store)


async def test_the_service_store_migrates_the_embedded_store_by_default_and_checks_otherwise(
    behind: ClickHouseStore,
) -> None:
    """AsyncStore.open (the pipeline's way in) migrates a chdb: store by default, and only checks with auto_migrate
    false."""
    refusing = AsyncStore(
        refused := ClickHouseStore(behind.url, behind.database, behind.table), Migrations(refused, auto_migrate=False)
    )
    with pytest.raises(StoreError, match="relevancy-monitor migrate"):
        await refusing.open()
    await refusing.close()
    default = AsyncStore(ClickHouseStore(behind.url, behind.database, behind.table))
    await default.open()
    await default.close()
    assert Migrations(behind).pending() == [] and len(Migrations(behind).applied()) == len(
        migrations(behind.database, behind.table)
    )


@pytest.mark.parametrize(("auto_migrate", "step"), [({}, "check_schema"), ({"auto_migrate": True}, "migrate")])
async def test_run_s_store_on_a_server_checks_unless_told_to_migrate(
    monkeypatch: pytest.MonkeyPatch, auto_migrate: dict[str, bool], step: str
) -> None:
    """For an http(s) server, `run`'s one opening of the store (`AsyncStore.open`) only checks the version by default
    (the operator migrates); MONITOR_AUTO_MIGRATE=true migrates. No server here: the choice is what is checked."""
    called: list[str] = []

    def refuse(self: Migrations, remedy: str) -> None:
        called.append("check_schema")
        raise StoreError(f"the schema of relevancy at https://ch:8443 is behind this release: {remedy}")

    def migrate(self: Migrations, *, repair: bool = True) -> list[Any]:
        called.append("migrate")
        self.unfixed = []
        return []

    monkeypatch.setattr(Migrations, "_refuse_pending", refuse)
    monkeypatch.setattr(Migrations, "migrate", migrate)
    monkeypatch.setattr(ClickHouseStore, "open", lambda self: None)
    monkeypatch.setattr(ClickHouseStore, "use_database", lambda self: None)
    store = AsyncStore.from_settings(load_settings(clickhouse_url="https://ch:8443", **auto_migrate).store)
    try:
        if step == "check_schema":
            with pytest.raises(StoreError, match="relevancy-monitor migrate"):
                await store.open()
        else:
            await store.open()
    finally:
        await store.close()
    assert called == [step]


def test_the_per_url_default_of_auto_migrate() -> None:
    """Unset, auto-migration is on for chdb: and off for http(s) servers; an explicit value wins either way."""
    assert Migrations(ClickHouseStore("chdb:///tmp/x", "d", "t")).auto_migrates is True
    assert Migrations(ClickHouseStore("https://ch:8443", "d", "t")).auto_migrates is False
    assert Migrations(ClickHouseStore("http://ch:8123", "d", "t"), auto_migrate=True).auto_migrates is True


def test_alerts_on_a_store_behind_stop_with_one_line_naming_migrate(
    behind: ClickHouseStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """`alerts check` on a store behind this release exits 1 with one line saying to run `migrate`, instead of one
    failed rule (and a logged query) per table the store does not have yet."""
    code = main(["alerts", "check", "--clickhouse-url", behind.url, "--clickhouse-database", behind.database])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1, err
    assert "behind this release" in err and "relevancy-monitor migrate" in err
