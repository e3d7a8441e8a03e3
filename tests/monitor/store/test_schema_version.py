"""`run` checks the schema version at start (issue 11): a store behind this release stops `run` with one line saying
to run `migrate`, unless MONITOR_AUTO_MIGRATE, which defaults to true for the embedded store and false for servers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

import monitor.runtime.logs
import monitor.runtime.service
from monitor.cli.commands import _prepare_schema
from monitor.cli.main import main
from monitor.config import load_settings
from monitor.store.async_store import AsyncStore
from monitor.store.connection import ClickHouseStore
from monitor.store.migrations import Migrations
from schemas.ddl import migrations, render_ddl
from schemas.errors import StoreError


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
    """MONITOR_AUTO_MIGRATE=true: the start-up step applies and records the pending migrations, then the check
    passes."""
    s = load_settings(clickhouse_url=behind.url, clickhouse_database=behind.database, auto_migrate=True)
    _prepare_schema(s.store)
    assert Migrations(behind).pending() == []
    _prepare_schema(
        load_settings(clickhouse_url=behind.url, clickhouse_database=behind.database, auto_migrate=False).store
    )


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


@pytest.mark.parametrize(("extra", "step"), [((), "check_schema"), (("--auto-migrate", "true"), "migrate")])
def test_run_on_a_server_checks_unless_told_to_migrate(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], extra: tuple[str, ...], step: str
) -> None:
    """For an http(s) server `run` only checks the version by default (the operator migrates);
    MONITOR_AUTO_MIGRATE=true migrates."""
    called: list[str] = []

    def refuse(self: Migrations) -> Any:
        called.append("check_schema")
        raise StoreError(
            "the schema of relevancy at https://ch:8443 is behind this release: run `relevancy-monitor migrate` first"
        )

    monkeypatch.setattr(Migrations, "check", refuse)

    def migrate(self: Migrations) -> list[Any]:
        called.append("migrate")
        return []

    monkeypatch.setattr(Migrations, "migrate", migrate)
    monkeypatch.setattr(ClickHouseStore, "close", lambda self: None)

    async def no_service(settings: Any) -> None:
        called.append("service")

    monkeypatch.setattr(monitor.runtime.service, "run_service", no_service)
    code = main(["run", "--clickhouse-url", "https://ch:8443", "--metrics-port", "0", *extra])
    assert called[0] == step
    if step == "check_schema":
        assert code == 1 and "relevancy-monitor migrate" in capsys.readouterr().err and called == ["check_schema"]
    else:
        assert code == 0 and called == ["migrate", "service"]


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
