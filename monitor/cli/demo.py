"""`relevancy-monitor demo`: the whole path on this machine, ending with the alert it fired and a report."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from monitor.cli.table import print_result


def register(sub: Any) -> None:
    """Add `demo` to the CLI's subparsers."""
    p = sub.add_parser("demo", help="local broker + generated traffic + the monitor on embedded ClickHouse, then a summary")
    p.add_argument("--seconds", type=float, default=20.0, help="how long to run the monitor")
    p.add_argument("--rate", type=float, default=100.0, help="generated events per second")
    p.add_argument("--data-dir", default=".relevancy-monitor/demo", help="where the embedded ClickHouse keeps its files")
    p.set_defaults(func=cmd_demo)


def cmd_demo(ns: argparse.Namespace) -> int:
    """`demo`: run the whole path locally, then print what landed in ClickHouse."""
    from rich.console import Console

    from monitor.devtools.demo import run_demo

    console = Console(stderr=True)
    report = run_demo(seconds=ns.seconds, rate=ns.rate, data_dir=Path(ns.data_dir), console=console)
    for title, result in report.tables:
        console.print(f"\n[bold]{title}[/]")
        print_result(result.columns, result.rows, "table")
    console.print(
        f"\nconsumed {report.consumed}, scored {report.scored}, dead-lettered {report.dead_lettered} (malformed on purpose).\n"
        f"Query the rows yourself:\n  relevancy-monitor sql --clickhouse-url chdb://{report.data_dir} "
        '"SELECT judge, count(), avg(score) FROM {table} FINAL GROUP BY judge"'
    )
    return 0
