"""Every subcommand's parser agrees with the others on the flags they share: one name, one metavar, one help."""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from collections.abc import Iterator

from monitor.cli.main import build_parser

# Flags whose help says what *this* command does with them (their name and metavar still agree):
PER_COMMAND_HELP = {
    "--dry-run",  # forget counts rows, replay prices a range
    "--file",  # a query, records to send, pairs to judge
    "--format",  # each command's own outputs
    "--json",  # each command's own document
    "--metrics-port",  # two settings: MONITOR_METRICS_PORT (run) and ALERTS_METRICS_PORT (alerts run)
    "--rate",  # produce: 0 is unthrottled; demo: capped for an LLM judge
    "--seed",  # generated events, the bootstrap
    "--clickhouse-url",  # demo takes an embedded store only, which it replaces
    "--out",  # report writes an HTML file, labels export a JSONL file
    "--port",  # broker: the local broker's port; ui: the web UI's (MONITOR_UI_PORT)
}
_DEFAULT_TAIL = re.compile(r"\s*\((default|required)[^()]*(\([^()]*\)[^()]*)*\)\s*$")


def flags() -> Iterator[tuple[str, argparse.Action]]:
    """(command path, action) of every documented option of every (sub)command."""

    def walk(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.Action]]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, f"{path} {name}".strip())
            elif action.option_strings and action.help != argparse.SUPPRESS and action.dest != "help":
                yield path, action

    yield from walk(build_parser(), "")


def uses() -> dict[str, list[tuple[str, argparse.Action]]]:
    """Each long flag with the commands that take it."""
    out: dict[str, list[tuple[str, argparse.Action]]] = defaultdict(list)
    for path, action in flags():
        out[next(o for o in action.option_strings if o.startswith("--"))].append((path, action))
    return out


def test_the_walk_reaches_every_command() -> None:
    """The walk sees the nested commands (alerts backtest, ...) and the shared store and time flags."""
    shared = uses()
    assert {"report", "replay", "compare", "alerts backtest"} <= {p for p, _ in shared["--since"]}
    assert len(shared["--clickhouse-url"]) >= 10 and "report" in {p for p, _ in shared["--clickhouse-user"]}


def test_a_shared_flag_has_one_metavar_everywhere() -> None:
    """A flag two commands share shows the same metavar (URL, TIME, FILE, ...) in both helps."""
    differ = {
        flag: sorted({(a.metavar or "") for _, a in found})
        for flag, found in uses().items()
        if len({a.metavar for _, a in found}) > 1
    }
    assert not differ, differ


def test_a_shared_flag_has_one_help_everywhere() -> None:
    """A shared flag's help is word for word the same, but for its default, unless it names a per-command action."""
    differ: dict[str, set[str]] = {}
    for flag, found in uses().items():
        texts = {_DEFAULT_TAIL.sub("", a.help or "") for _, a in found}
        if flag not in PER_COMMAND_HELP and len(texts) > 1:
            differ[flag] = texts
    assert not differ, differ


def test_every_command_reading_the_store_takes_the_same_store_flags() -> None:
    """The commands that take --clickhouse-url (but demo, embedded only) take user, CA file and verify too."""
    shared = uses()
    readers = {p for p, _ in shared["--clickhouse-url"]} - {"demo"}
    for flag in ("--clickhouse-user", "--clickhouse-ca-file", "--clickhouse-verify", "--clickhouse-table"):
        assert readers <= {p for p, _ in shared[flag]}, (flag, readers - {p for p, _ in shared[flag]})


def test_the_time_flags_say_the_same_forms() -> None:
    """--since and --until say ISO 8601, UTC without an offset, or relative, on every command that reads a range."""
    for flag in ("--since", "--until"):
        for path, action in uses()[flag]:
            assert "ISO 8601, UTC when it has no offset" in (action.help or "") and action.metavar == "TIME", path
