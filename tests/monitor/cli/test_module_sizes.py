"""The command line stays a set of small modules: each parses its command's arguments and prints, and what it runs
lives in its room (`monitor.alerts.service` for the alert evaluator)."""

from __future__ import annotations

from pathlib import Path

import monitor.cli

CLI = Path(monitor.cli.__file__).parent
MAX_LINES = 400


def test_no_cli_module_is_over_400_lines() -> None:
    """Every module under monitor/cli has at most 400 lines."""
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in CLI.glob("*.py")}
    assert "alerts.py" in sizes and {name: n for name, n in sizes.items() if n > MAX_LINES} == {}
