"""The `relevancy-monitor` command line: the parser, and the one place where an error becomes one line."""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from schemas.errors import MonitorError


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line: the problem, a did-you-mean for a misspelt option (looked up in
    every subcommand), and where the options are listed; not the whole usage."""

    def error(self, message: str) -> NoReturn:
        """Print one line and exit 2."""
        hint = _hint(self, message)
        self.exit(2, f"{self.prog}: error: {message}{hint} (--help lists the options)\n")


def _hint(parser: argparse.ArgumentParser, message: str) -> str:
    if message.startswith("argument ") and message.endswith("expected one argument"):
        flag = message.removeprefix("argument ").split(":")[0].split("/")[-1]
        return f"; a value that starts with '-' is written {flag}=VALUE"
    if message.startswith("unrecognized arguments: "):
        known = sorted(_option_strings(parser))
        for word in message.removeprefix("unrecognized arguments: ").split():
            near = (
                difflib.get_close_matches(word.split("=")[0], known, n=1, cutoff=0.8) if word.startswith("--") else []
            )
            if near:
                return f"; did you mean {near[0]}?"
    return ""


def _option_strings(parser: argparse.ArgumentParser) -> set[str]:
    """Every long option of `parser` and of its subcommands, however deep."""
    found = {o for a in parser._actions for o in a.option_strings if o.startswith("--")}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found |= _option_strings(child)
    return found


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand (nothing is read from the environment here)."""
    from monitor.cli import alerts, calibrate, commands, compare, demo, forget, judge, labels, replay, report, ui

    parser = OneLineParser(prog="relevancy-monitor", description="Answer-relevancy monitoring for LLM assistants.")
    parser.add_argument("--version", action="version", version=f"relevancy-monitor {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.register(sub)
    judge.register(sub)
    calibrate.register(sub)
    compare.register(sub)
    alerts.register(sub)
    forget.register(sub)
    demo.register(sub)
    report.register(sub)
    replay.register(sub)
    labels.register(sub)
    ui.register(sub)
    return parser


def _version() -> str:
    """The installed distribution's version (a source tree that is not installed says so)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("relevancy-monitor")
    except PackageNotFoundError:
        return "(not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script: a `MonitorError` is printed as one line; a bug keeps its traceback."""
    ns = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = ns.func
    try:
        return func(ns)
    except MonitorError as e:
        print(f"relevancy-monitor: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `... | head`: the reader has gone; no traceback, and none at exit when stdout is flushed
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports it


if __name__ == "__main__":
    sys.exit(main())
