"""`alerts run` with the canary: ALERTS_CANARY_INTERVAL and ALERTS_CANARY_FILE (flags and variables), what `--once`
prints, and the one-line errors of a bad setting or labels file."""

from __future__ import annotations

import argparse
import io
from datetime import timedelta
from pathlib import Path

import pytest

from monitor.alerts.settings import load_alert_settings
from monitor.cli.alerts import alert_settings, register, run_alerts
from monitor.store.connection import ClickHouseStore
from schemas.canary import CANARY_TABLE
from schemas.errors import ConfigError, UsageError


def parse(*argv: str) -> argparse.Namespace:
    """Parse `argv` with a parser that holds only the `alerts` commands."""
    parser = argparse.ArgumentParser(prog="relevancy-monitor")
    register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(list(argv))


@pytest.fixture
def flags(store: ClickHouseStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The store's flags for `alerts run --once --no-lease`, with no ALERTS_* or judge variable from outside."""
    for var in ("ALERTS_CANARY_INTERVAL", "ALERTS_CANARY_FILE", "ALERTS_RULES", "ALERTS_WEBHOOK_URL", "MONITOR_JUDGE"):
        monkeypatch.delenv(var, raising=False)
    return [
        "alerts",
        "run",
        "--once",
        "--no-lease",
        "--clickhouse-url",
        store.url,
        "--clickhouse-database",
        store.database,
    ]


def canary_rows(store: ClickHouseStore) -> list[tuple[object, ...]]:
    """(labels, rows) per labelled set in the canary table."""
    return store.query(f"SELECT labels, count() FROM {store.database}.{CANARY_TABLE} FINAL GROUP BY labels").rows


def test_settings_default_to_an_hour_on_the_golden_set_and_off_is_zero_or_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """The canary runs hourly on the shipped set by default; `0` and `off` turn it off; under a minute is refused by
    name."""
    monkeypatch.delenv("ALERTS_CANARY_INTERVAL", raising=False)
    monkeypatch.delenv("ALERTS_CANARY_FILE", raising=False)
    default = load_alert_settings()
    assert default.canary_interval == timedelta(hours=1) and default.canary_on and default.canary_file is None
    for off in ("0", "off", "OFF"):
        monkeypatch.setenv("ALERTS_CANARY_INTERVAL", off)
        assert not load_alert_settings().canary_on
    monkeypatch.setenv("ALERTS_CANARY_INTERVAL", "90m")
    assert load_alert_settings().canary_interval == timedelta(minutes=90)
    monkeypatch.setenv("ALERTS_CANARY_INTERVAL", "30s")
    with pytest.raises(ConfigError, match=r"^invalid setting ALERTS_CANARY_INTERVAL: must be 0 \(off\) or at least 1m"):
        load_alert_settings()
    monkeypatch.delenv("ALERTS_CANARY_INTERVAL")
    monkeypatch.setenv("ALERTS_CANARY_FILE", "/nonexistent/labels.jsonl")
    with pytest.raises(ConfigError, match=r"^invalid setting ALERTS_CANARY_FILE: no such file"):
        load_alert_settings()


def test_run_once_judges_the_golden_set_and_prints_the_figures_then_waits_an_interval(
    store: ClickHouseStore, flags: list[str]
) -> None:
    """The first `run --once` writes a canary run and prints its figures; the next one only says when the next is
    due."""
    out = io.StringIO()
    assert run_alerts(parse(*flags), out) == 0
    lines = out.getvalue().splitlines()
    [line] = [x for x in lines if x.startswith("canary: ")]
    assert "107 pairs, 0 errors; rho 0.430, kappa 0.423, mean shift -0.072; no cost (an offline heuristic)" in line
    assert "(lexical judge lexical-" in line and "golden_set.jsonl:" in line and "next run due at" in line
    assert lines.index(line) == 3 and lines[-1].startswith("no notifier configured")
    [(labels, n)] = canary_rows(store)
    assert str(labels).startswith("golden_set.jsonl:") and n == 107

    again = io.StringIO()
    assert run_alerts(parse(*flags), again) == 0
    assert next(x for x in again.getvalue().splitlines() if x.startswith("canary: ")).startswith(
        "canary: next run due at"
    )
    assert canary_rows(store) == [(labels, 107)]


def test_off_runs_no_canary_and_a_labels_file_of_your_own_is_its_own_history(
    store: ClickHouseStore, flags: list[str], tmp_path: Path
) -> None:
    """`--canary-interval off` judges nothing; `--canary-file` judges that file instead, under its own name and hash."""
    out = io.StringIO()
    assert run_alerts(parse(*flags, "--canary-interval", "off"), out) == 0
    assert not any(x.startswith("canary") for x in out.getvalue().splitlines()) and canary_rows(store) == []
    mine = tmp_path / "mine.jsonl"
    mine.write_text(
        '{"id": "m1", "question": "When did order A17 ship?", "answer": "Order A17 shipped on 3 March.", "label": 4}\n'
        '{"id": "m2", "question": "When did order A17 ship?", "answer": "We sell gift cards.", "label": 0}\n',
        encoding="utf-8",
    )
    ns = parse(*flags, "--canary-file", str(mine))
    assert alert_settings(ns).canary_file == mine
    assert run_alerts(ns, io.StringIO()) == 0
    [(labels, n)] = canary_rows(store)
    assert str(labels).startswith("mine.jsonl:") and n == 2


def test_a_bad_labels_file_or_a_missing_api_key_stops_before_any_round(
    store: ClickHouseStore, flags: list[str], tmp_path: Path
) -> None:
    """A labels file with a bad line is a one-line error naming the line; an LLM judge without a key names the
    variable."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answer": "a", "label": 9}\n', encoding="utf-8")
    with pytest.raises(UsageError, match=r"bad.jsonl line 1: label 9 is out of range 0–4"):
        run_alerts(parse(*flags, "--canary-file", str(bad)), io.StringIO())
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MONITOR_JUDGE", "rubric")
        env.delenv("MONITOR_ANTHROPIC_API_KEY", raising=False)
        env.delenv("ANTHROPIC_API_KEY", raising=False)
        with pytest.raises(ConfigError, match="MONITOR_ANTHROPIC_API_KEY"):
            run_alerts(parse(*flags), io.StringIO())
    assert canary_rows(store) == []
