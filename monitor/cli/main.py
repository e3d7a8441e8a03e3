"""The `relevancy-monitor` command line: the parser, and the one place where an error becomes one line."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from schemas.errors import MonitorError


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand (nothing is read from the environment here)."""
    from monitor.cli import alerts, calibrate, commands, compare, demo, forget, judge, replay, report

    parser = argparse.ArgumentParser(
        prog="relevancy-monitor", description="Answer-relevancy monitoring for LLM assistants."
    )
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
