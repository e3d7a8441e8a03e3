"""`relevancy-monitor report` (monitor.cli.report): flags, the path on stderr, the default file, one-line errors."""

from __future__ import annotations

import argparse
import os
import uuid
from pathlib import Path

import pytest

from monitor.cli import report
from monitor.store.connection import ClickHouseStore
from schemas.errors import StoreError, UsageError
from tests.monitor.report.conftest import Filled, fill, read_page, replayed_rows


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in list(os.environ):
        if k.startswith(("MONITOR_", "ALERTS_", "ANTHROPIC_")):
            monkeypatch.delenv(k)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="relevancy-monitor")
    report.register(parser.add_subparsers(dest="command", required=True))
    return parser


def run(*argv: str) -> int:
    """Parse `report ARGV` like the CLI and run the command."""
    ns = _parser().parse_args(["report", *argv])
    code: int = ns.func(ns)
    return code


def _store_flags(filled: Filled) -> list[str]:
    return ["--clickhouse-url", filled.store.url, "--clickhouse-database", filled.store.database]


def test_writes_the_file_and_prints_its_path_and_headline(
    filled: Filled, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With ISO times and --out, the report is written there; stderr has its absolute path, then its range and
    headline."""
    out = tmp_path / "day.html"
    assert (
        run(
            *_store_flags(filled),
            "--since",
            "2026-11-02T00:00:00Z",
            "--until",
            "2026-11-03T00:00:00",
            "--out",
            str(out),
        )
        == 0
    )
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.splitlines() == [
        str(out),
        "2026-11-02 00:00:00 UTC – 2026-11-03 00:00:00 UTC: "
        "billing: firing relevancy_floor since 2026-11-02 02:00 UTC.",
    ]
    html = read_page(out)
    assert "2026-11-02 00:00:00 UTC – 2026-11-03 00:00:00 UTC" in html and "app support" in html


def test_defaults_to_the_stores_last_week_in_the_working_directory(
    filled: Filled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --since, --until and --out it reports the store's last 7 days to relevancy-report.html in the working
    directory: with the fixture's day long past, an empty last hour that says so."""
    monkeypatch.chdir(tmp_path)
    assert run(*_store_flags(filled)) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == str(tmp_path / "relevancy-report.html") and lines[1].endswith(
        ": No judged events in this range."
    )
    html = read_page(tmp_path / "relevancy-report.html")
    assert "No judged events between" in html and "all the data in the store, up to 7 days" in html


def test_include_replays_flag_reads_the_replayed_rows_too(store: ClickHouseStore, tmp_path: Path) -> None:
    """Without --include-replays the page leaves the replayed rows out and says how many; with it, it includes them."""
    fill(store)
    store.insert_rows(replayed_rows(), uuid.uuid4().hex)
    span = [
        "--clickhouse-url",
        store.url,
        "--clickhouse-database",
        store.database,
        "--since",
        "2026-11-02",
        "--until",
        "2026-11-03",
    ]
    assert run(*span, "--out", str(tmp_path / "live.html")) == 0
    assert run(*span, "--include-replays", "--out", str(tmp_path / "both.html")) == 0
    assert "13 from 2 replay runs in this range, left out (--include-replays includes them)." in read_page(
        tmp_path / "live.html"
    )
    assert "13 from 2 replay runs in this range, included (--include-replays)." in read_page(tmp_path / "both.html")


def test_relative_times_are_accepted(filled: Filled, tmp_path: Path) -> None:
    """--since=-7d --until=-1h parse like `alerts backtest` (before now)."""
    assert run(*_store_flags(filled), "--since=-7d", "--until=-1h", "--out", str(tmp_path / "r.html")) == 0
    assert (tmp_path / "r.html").is_file()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--since", "yesterday"], "--since: 'yesterday' is neither ISO 8601"),
        (["--until", "2026-13-40"], "--until: '2026-13-40' is neither ISO 8601"),
        (["--since=-1h", "--until=-2h"], "must be after --since"),
        (["--out", "/nonexistent-dir/r.html"], "--out: directory /nonexistent-dir does not exist"),
    ],
)
def test_bad_input_is_a_one_line_usage_error(filled: Filled, argv: list[str], message: str) -> None:
    """A bad time, an inverted range or an --out in a missing directory is a one-line `UsageError` before any query."""
    with pytest.raises(UsageError) as err:
        run(*_store_flags(filled), *argv)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_missing_store_is_a_one_line_error_that_creates_nothing(tmp_path: Path) -> None:
    """The report opens an existing store only: a missing embedded directory is a `StoreError`, and none is created."""
    missing = tmp_path / "nothing-here"
    with pytest.raises(StoreError, match="no embedded ClickHouse store") as err:
        run("--clickhouse-url", f"chdb://{missing}", "--out", str(tmp_path / "r.html"))
    assert "\n" not in str(err.value) and not missing.exists() and not (tmp_path / "r.html").exists()


def test_help_describes_the_store_flags_with_their_defaults_and_variables(capsys: pytest.CaptureFixture[str]) -> None:
    """--help names each store flag's default and MONITOR_* variable, and the range and output defaults."""
    with pytest.raises(SystemExit):
        _parser().parse_args(["report", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for needle in (
        "[env MONITOR_CLICKHOUSE_URL; default: chdb://",
        "[env MONITOR_CLICKHOUSE_DATABASE; default: relevancy]",
        "[env MONITOR_CLICKHOUSE_TABLE; default: relevancy_scores]",
        "(default: all the data in the store, up to 7 days before --until)",
        "(default: now)",
        "(default: relevancy-report.html in the working directory)",
    ):
        assert needle in text, needle
