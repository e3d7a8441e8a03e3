"""The read paths (`sql`, `alerts check|backtest|run`) open an existing store only (issue 10, items 7 and 14): no DDL,
so a read-only ClickHouse user suffices; no judge API key; unqualified table names resolve in the configured
database; relative `chdb:` paths are resolved and shown absolute; a missing store or table is a one-line error
that creates nothing. `migrate` (like `run`) creates the store."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import clickhouse_connect
import pytest
from clickhouse_connect.driver.client import Client

import monitor.store.connection as store_module
from monitor.cli.main import main
from monitor.config import load_settings
from monitor.store.connection import ClickHouseStore
from tests.monitor.alerts.conftest import insert, make_row

MIGRATE_HINT = "run the monitor (relevancy-monitor run) or `relevancy-monitor migrate` first"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in list(os.environ):
        if k.startswith(("MONITOR_", "ALERTS_", "ANTHROPIC_")):
            monkeypatch.delenv(k)


def _read_only_client(url: str, **options: Any) -> Client:
    return clickhouse_connect.get_client(dsn=url, **{**options, "settings": {"readonly": 1}})


def _read_only_from_now_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every client the store opens from here on is a `readonly=1` session: any DDL or write fails."""
    monkeypatch.setattr(store_module, "open_client", _read_only_client)


def _flags(store: ClickHouseStore) -> list[str]:
    return ["--clickhouse-url", store.url, "--clickhouse-database", store.database]


def test_a_read_only_session_refuses_ddl(store: ClickHouseStore) -> None:
    """The premise of the tests below: under `readonly=1` even an idempotent CREATE ... IF NOT EXISTS fails."""
    client = _read_only_client(store.url)
    try:
        with pytest.raises(Exception, match="readonly"):
            client.command(f"CREATE DATABASE IF NOT EXISTS {store.database}")
    finally:
        client.close()


def test_sql_runs_for_a_read_only_user_without_a_judge_key(
    store: ClickHouseStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sql` issues no DDL and needs no API key (MONITOR_JUDGE=rubric, none set); `FROM relevancy_scores` and
    `FROM {table}` both read the configured database."""
    insert(store, [make_row(datetime.now(UTC) - timedelta(minutes=i)) for i in range(3)])
    _read_only_from_now_on(monkeypatch)
    monkeypatch.setenv("MONITOR_JUDGE", "rubric")
    for sql in ("SELECT count() AS n FROM relevancy_scores", "SELECT count() AS n FROM {table}"):
        assert main(["sql", *_flags(store), "--format", "csv", sql]) == 0, capsys.readouterr().err
        assert capsys.readouterr().out.splitlines() == ["n", "3"]


def test_alerts_check_and_backtest_run_for_a_read_only_user_without_a_judge_key(
    store: ClickHouseStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`alerts check` and `alerts backtest` issue no DDL and need no API key."""
    insert(store, [make_row(datetime.now(UTC) - timedelta(minutes=i)) for i in range(3)])
    _read_only_from_now_on(monkeypatch)
    monkeypatch.setenv("MONITOR_JUDGE", "statements")
    assert main(["alerts", "check", "--json", *_flags(store)]) == 0, capsys.readouterr().err
    assert main(["alerts", "backtest", "--since=-1h", "--json", *_flags(store)]) == 0, capsys.readouterr().err


def test_a_missing_table_is_a_one_line_error_saying_to_migrate(
    store: ClickHouseStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sql` and `alerts check` on a database without the scores table exit 1 with one line naming it and `migrate`."""
    flags = ["--clickhouse-url", store.url, "--clickhouse-database", f"{store.database}_missing"]
    for argv in (["sql", *flags, "SELECT 1"], ["alerts", "check", *flags]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f" {store.database}_missing.relevancy_scores" in err and MIGRATE_HINT in err, (
            err
        )


@pytest.mark.parametrize(
    "url", ["chdb://relative/dir", "chdb:relative/dir", "chdb:./relative/dir", "chdb://relative/dir/"]
)
def test_relative_chdb_paths_are_resolved_and_shown_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    """A relative `chdb:` path resolves against the working directory, in the settings, the start-up log and the
    store."""
    monkeypatch.chdir(tmp_path)
    want = f"chdb://{tmp_path / 'relative' / 'dir'}"
    s = load_settings(clickhouse_url=url)
    assert s.store.url == want and s.redacted()["clickhouse_url"] == want
    assert ClickHouseStore(url, "relevancy", "relevancy_scores").url == want


def test_other_urls_keep_their_form(tmp_path: Path) -> None:
    """Absolute chdb paths keep their options; server URLs and the in-memory engine are left as given."""
    assert load_settings(clickhouse_url=f"chdb://{tmp_path}?verbose=1").store.url == f"chdb://{tmp_path}?verbose=1"
    for url in ("https://u:pw@ch:8443/db", "chdb://memory", "chdb://:memory:"):
        assert load_settings(clickhouse_url=url).store.url == url


def _cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MONITOR_", "ALERTS_", "ANTHROPIC_"))}
    return subprocess.run(
        [sys.executable, "-m", "monitor.cli.main", *args],
        env={**base, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("args", "where"),
    [
        (
            ("sql", "SELECT count() FROM {table}"),
            ".relevancy-monitor/chdb",
        ),  # the default store, from another directory
        (("sql", "--clickhouse-url", "chdb://relative/dir", "SELECT 1"), "relative/dir"),
        (("sql", "--clickhouse-url", "chdb:relative", "SELECT 1"), "relative"),
        (("alerts", "check", "--clickhouse-url", "chdb://relative/dir"), "relative/dir"),
        (("alerts", "backtest", "--since=-1h", "--clickhouse-url", "chdb://relative/dir"), "relative/dir"),
        (("alerts", "run", "--once", "--clickhouse-url", "chdb://relative/dir"), "relative/dir"),
    ],
)
def test_a_read_path_on_a_missing_store_is_one_line_and_creates_nothing(
    tmp_path: Path, args: tuple[str, ...], where: str
) -> None:
    """A read path on a store that does not exist exits 1 with one line naming its absolute path, and leaves no
    directory."""
    done = _cli(*args, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert (
        done.stderr == f"relevancy-monitor: error: no embedded ClickHouse store at {tmp_path / where}: {MIGRATE_HINT}\n"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.long(seconds=25)
def test_migrate_creates_the_store_the_read_paths_then_open(tmp_path: Path) -> None:
    """`migrate` (idempotent) creates the store at the resolved path; `sql` and `alerts check` then read it, from a
    relative or an absolute URL, with an LLM judge configured and no key."""
    for _ in range(2):
        done = _cli("migrate", "--clickhouse-url", "chdb://relative/dir", cwd=tmp_path)
        assert done.returncode == 0 and f"applied at chdb://{tmp_path / 'relative' / 'dir'}" in done.stderr, done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["relative"]
    absolute = f"chdb://{tmp_path / 'relative' / 'dir'}"
    done = _cli(
        "sql",
        "--format",
        "csv",
        "SELECT count() AS n FROM relevancy_scores",
        cwd=tmp_path,
        MONITOR_CLICKHOUSE_URL=absolute,
        MONITOR_JUDGE="rubric",
    )
    assert done.returncode == 0 and done.stdout.splitlines() == ["n", "0"], done.stderr
    done = _cli(
        "alerts", "check", "--json", "--clickhouse-url", "chdb://relative/dir", cwd=tmp_path, MONITOR_JUDGE="rubric"
    )
    assert done.returncode == 0, done.stderr
