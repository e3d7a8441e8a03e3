"""`relevancy-monitor <command> --help` as a new user reads it: only the flags the command uses, each with a
description and its default, and one name per setting across commands."""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from monitor.cli.flags import JUDGE_SETTINGS, KAFKA_CONNECTION_SETTINGS, STORE_SETTINGS
from monitor.cli.main import build_parser
from monitor.config import FIELDS
from monitor.devtools.config_reference import env_only

REPO = Path(__file__).resolve().parents[3]
COMMANDS = ("run", "migrate", "sql", "produce", "broker", "judge", "forget", "demo", "report", "calibrate", "compare")


def subparser(name: str) -> argparse.ArgumentParser:
    """The parser of one subcommand, as `relevancy-monitor` builds it."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: argparse.ArgumentParser = sub.choices[name]
    return found


def help_text(name: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """`relevancy-monitor NAME --help` on an 80-column terminal."""
    monkeypatch.setenv("COLUMNS", "80")
    out = io.StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit):
        build_parser().parse_args([name, "--help"])
    return out.getvalue()


def shown(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The arguments the help lists (not -h, not the hidden former spellings)."""
    return [a for a in parser._actions if a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_has_a_description_and_a_default(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each option in a command's help says what it does and its default, or that it is required, or is a switch."""
    for action in shown(subparser(command)):
        assert action.help and action.help.strip(), f"{command} {action.option_strings or action.dest}: no description"
        if not action.option_strings:
            continue
        switch = action.nargs == 0 or isinstance(action, argparse.BooleanOptionalAction)
        says = "default" in action.help or "required" in action.help
        assert switch or says, (
            f"{command} {action.option_strings[0]}: neither a default nor 'required' in {action.help!r}"
        )
    text = help_text(command, monkeypatch)
    assert "default: None" not in text and "default None" not in text


def test_sql_help_is_short_and_lists_the_store_flags_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """`sql --help` fits a screen: the query, --file, --format and the store flags; no judge or Kafka flags."""
    text = help_text("sql", monkeypatch)
    assert len(text.splitlines()) <= 60, text
    assert "--judge" not in text and "--kafka" not in text and "--sample-rate" not in text
    for name in STORE_SETTINGS:
        flag = "--" + name.replace("_", "-")
        assert flag in text, flag
    assert "MONITOR_CLICKHOUSE_PASSWORD" in text  # read from the environment, named in the help
    assert "--clickhouse-password" not in text  # a secret is never a flag (argv shows in `ps`)


def test_run_has_a_flag_for_every_setting_but_the_env_only_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """`run` keeps every setting as a flag, grouped by topic; secrets and the prices table stay in the environment."""
    dests = {a.dest for a in shown(subparser("run"))}
    for name, field in FIELDS.items():
        assert (name in dests) is not env_only(name, field), name
    text = help_text("run", monkeypatch)
    assert (
        "--anthropic-api-key" not in text
        and "--clickhouse-password" not in text
        and "--kafka-sasl-password" not in text
    )
    assert "Kafka (each flag" in text and "Judge (each flag" in text
    assert "[env MONITOR_SAMPLE_RATE; default: 1.0]" in " ".join(text.split())


@pytest.mark.parametrize(
    ("command", "names"),
    [
        ("migrate", (*STORE_SETTINGS, "clickhouse_cluster", "retention_days", "text_retention_days")),
        ("sql", STORE_SETTINGS),
        ("forget", (*STORE_SETTINGS, "clickhouse_cluster")),
        ("produce", KAFKA_CONNECTION_SETTINGS),
        ("judge", JUDGE_SETTINGS),
        ("broker", ()),
    ],
)
def test_commands_take_the_flags_of_the_settings_they_read(command: str, names: tuple[str, ...]) -> None:
    """Each command offers the flags of exactly the settings it reads, each named `--<setting>` as in `run`."""
    actions = shown(subparser(command))
    settings = {a.dest: a for a in actions if a.dest in FIELDS}
    assert set(settings) == set(names)
    for name, action in settings.items():
        assert "--" + name.replace("_", "-") in action.option_strings


def test_no_option_names_a_setting_differently(monkeypatch: pytest.MonkeyPatch) -> None:
    """No command's help spells a setting's flag differently from `run` (e.g. --bootstrap-servers for
    --kafka-bootstrap-servers, --model for --judge-model)."""
    run_flags = {a.option_strings[0]: a.dest for a in shown(subparser("run")) if a.option_strings}
    for command in COMMANDS:
        for action in shown(subparser(command)):
            for option in action.option_strings:
                if option.startswith("--") and option.removeprefix("--").replace("-", "_") in FIELDS:
                    assert action.dest == option.removeprefix("--").replace("-", "_"), (command, option)
            if action.dest in FIELDS:
                assert "--" + action.dest.replace("_", "-") in action.option_strings, (command, action.option_strings)
    assert run_flags["--kafka-bootstrap-servers"] == "kafka_bootstrap_servers"
    for command, old in (
        ("produce", "--bootstrap-servers"),
        ("produce", "--topic"),
        ("judge", "--model"),
        ("judge", "--json"),
    ):
        assert old not in help_text(command, monkeypatch), (command, old)  # former spellings are hidden


def test_building_the_parser_imports_no_statistics_or_llm_client() -> None:
    """Every command builds the whole parser, so it stays cheap: numpy, scipy and anthropic load in the commands."""
    probe = (
        "import sys; from monitor.cli.main import build_parser; build_parser(); "
        "print(sorted(m for m in ('numpy', 'scipy', 'anthropic', 'matplotlib') if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
