"""`relevancy-monitor report`: write one self-contained HTML report of a time range of the store.

It opens an existing store like the other read paths (no DDL, nothing created) and reads the scores, the traffic
counts and the alert state; the file needs nothing from the network when opened."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from monitor.cli.flags import add_store_flags, settings_from_args
from monitor.cli.time_flags import add_span_flags, optional_span_from_args
from schemas.errors import UsageError

DEFAULT_OUT = "relevancy-report.html"


def register(subparsers: Any) -> None:
    """Add the `report` command to the CLI's subparsers."""
    p = subparsers.add_parser(
        "report",
        help="write a self-contained HTML report of a time range: relevancy, alerts, coverage, judge health, cost, "
        "worst answers and conversations",
        description=(
            "Read the stored scores, traffic counts and alert state for --since..--until (by default all the data, up "
            "to 7 days) and write one HTML file with inline charts (nothing is fetched when it is opened). Reads only: "
            "creates nothing in the store."
        ),
    )
    add_span_flags(p, None, since_absent="all the data in the store, up to 7 days before --until")
    p.add_argument(
        "--include-replays",
        action="store_true",
        help="also read the rows `relevancy-monitor replay` wrote (default: the live consumer's rows only; the page "
        "says how many it left out)",
    )
    p.add_argument(
        "--out",
        default=DEFAULT_OUT,
        metavar="FILE",
        help=f"the HTML file to write (default: {DEFAULT_OUT} in the working directory)",
    )
    add_store_flags(p)
    p.set_defaults(func=cmd_report)


def cmd_report(ns: argparse.Namespace) -> int:
    """`report`: query the range, write the file, print its path as one line on stderr."""
    from monitor.report import write_report
    from monitor.report.page import when
    from monitor.store.connection import ClickHouseStore

    now = datetime.now(UTC)
    since, until = optional_span_from_args(ns, now)
    out = Path(ns.out).expanduser().absolute()
    if not out.parent.is_dir():
        raise UsageError(f"--out: directory {out.parent} does not exist")
    settings = settings_from_args(ns)
    store = ClickHouseStore.from_settings(settings.store)
    try:
        store.open_for_reads()
        summary = write_report(store, since, until, out, now=now, include_replays=ns.include_replays)
    finally:
        store.close()
    print(summary.path, file=sys.stderr)
    print(f"{when(summary.since)} – {when(summary.until)}: {summary.headline}", file=sys.stderr)
    return 0
