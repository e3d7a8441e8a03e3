"""Settings flags per command: what a command reads still comes from the environment, flags win, former flag
spellings still work with one line naming the new one, and a `--file` that cannot be read is one line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import monitor.devtools.traffic as traffic
from monitor.cli.flags import settings_from_args
from monitor.cli.main import build_parser, main


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in list(os.environ):
        if k.startswith(("MONITOR_", "ALERTS_", "ANTHROPIC_")):
            monkeypatch.delenv(k)


def test_sql_reads_every_store_setting_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`sql` offers only store flags, yet URL, database, table, user, password, CA and verify all come from the env."""
    ca = tmp_path / "ca.pem"
    ca.write_text("not read here", encoding="utf-8")
    env = {
        "MONITOR_CLICKHOUSE_URL": "https://ch.example:8443",
        "MONITOR_CLICKHOUSE_DATABASE": "scores_db",
        "MONITOR_CLICKHOUSE_TABLE": "scores",
        "MONITOR_CLICKHOUSE_USER": "reader",
        "MONITOR_CLICKHOUSE_PASSWORD": "s3cret",
        "MONITOR_CLICKHOUSE_CA_FILE": str(ca),
        "MONITOR_CLICKHOUSE_VERIFY": "false",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    s = settings_from_args(build_parser().parse_args(["sql", "SELECT 1"])).store
    assert (s.url, s.database, s.table, s.user, s.password and s.password.get_secret_value(), s.ca_file, s.verify) == (
        "https://ch.example:8443",
        "scores_db",
        "scores",
        "reader",
        "s3cret",
        ca,
        False,
    )
    s = settings_from_args(
        build_parser().parse_args(["sql", "--clickhouse-table", "other", "--clickhouse-verify", "SELECT 1"])
    ).store
    assert (s.table, s.verify, s.user) == ("other", True, "reader")  # flags win, the rest still from the env


def _capture_produce(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Replace the producer with one that records where it would have sent the events."""
    seen: dict[str, Any] = {}

    async def fake(bootstrap: str, topic: str, values: Any, **kw: Any) -> int:
        seen.update(bootstrap=bootstrap, topic=topic, kafka=kw["kafka"], count=len(list(values)))
        return int(seen["count"])

    monkeypatch.setattr(traffic, "produce", fake)
    return seen


def test_produce_defaults_to_the_monitors_kafka_settings(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`produce` sends where `run` reads: MONITOR_KAFKA_BOOTSTRAP_SERVERS and the first of MONITOR_KAFKA_TOPICS."""
    seen = _capture_produce(monkeypatch)
    monkeypatch.setenv("MONITOR_KAFKA_BOOTSTRAP_SERVERS", "kafka-1:9092,kafka-2:9092")
    monkeypatch.setenv("MONITOR_KAFKA_TOPICS", "assistant.conversations,other")
    assert main(["produce", "--generate", "3"]) == 0
    assert (seen["bootstrap"], seen["topic"], seen["count"]) == (
        "kafka-1:9092,kafka-2:9092",
        "assistant.conversations",
        3,
    )
    assert capsys.readouterr().err == "produced 3 record(s) to assistant.conversations at kafka-1:9092,kafka-2:9092\n"
    assert (
        main(
            [
                "produce",
                "--generate",
                "1",
                "--kafka-bootstrap-servers",
                "k:1",
                "--kafka-topic",
                "t",
                "--kafka-connect-timeout-s",
                "5",
            ]
        )
        == 0
    )
    assert (seen["bootstrap"], seen["topic"], seen["kafka"].connect_timeout_s) == ("k:1", "t", 5.0)


def test_former_spellings_still_work_and_name_the_new_flag(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--bootstrap-servers, --topic (produce), --model and --json (judge) still work, each with one stderr line
    naming the flag that replaced it."""
    seen = _capture_produce(monkeypatch)
    assert main(["produce", "--generate", "1", "--bootstrap-servers", "old:9092", "--topic", "old-topic"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert (seen["bootstrap"], seen["topic"]) == ("old:9092", "old-topic")
    assert err[:2] == [
        "relevancy-monitor: --bootstrap-servers is now --kafka-bootstrap-servers (the old spelling still works, for "
        "now)",
        "relevancy-monitor: --topic is now --kafka-topic (the old spelling still works, for now)",
    ]
    ns = build_parser().parse_args(["judge", "--model", "m-1", "--json", "-q", "q", "-a", "a"])
    assert (ns.judge_model, ns.format) == ("m-1", "json")
    assert capsys.readouterr().err.count("\n") == 2


@pytest.mark.parametrize(
    "argv", [["sql", "--file", "/nonexistent/q.sql"], ["produce", "--file", "/nonexistent/events.jsonl"]]
)
def test_an_unreadable_file_is_a_one_line_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """`sql --file` and `produce --file` on a missing file exit 2 with one line naming it, no traceback."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"relevancy-monitor: error: cannot read --file {argv[-1]}: No such file or directory\n"
