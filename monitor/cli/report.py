"""`relevancy-monitor report`: write one self-contained HTML report of a time range of the store.

It opens an existing store like the other read paths (no DDL, nothing created) and reads the scores, the traffic
counts and the alert state; the file needs nothing from the network when opened."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from monitor.cli.time_flags import parse_time
from monitor.config import load_settings
from monitor.store.settings import DEFAULT_CLICKHOUSE_URL
from schemas.errors import UsageError

DEFAULT_OUT = "relevancy-report.html"


def register(subparsers: Any) -> None:
    """Add the `report` command to the CLI's subparsers."""
    p = subparsers.add_parser(
        "report",
        help="write a self-contained HTML report of a time range: relevancy, alerts, coverage, judge health, cost, "
        "worst answers",
        description=(
            "Read the stored scores, traffic counts and alert state for --since..--until and write one HTML file with "
            "inline charts (nothing is fetched when it is opened). Reads only: creates nothing in the store."
        ),
    )
    # Where the store is; credentials and TLS come from MONITOR_CLICKHOUSE_USER, _PASSWORD, _CA_FILE and _VERIFY.
    p.add_argument(
        "--clickhouse-url",
        default=None,
        help="the store: chdb:///abs/dir or chdb:rel/dir (embedded) or http(s)://user:pass@host:8123 "
        f"[env MONITOR_CLICKHOUSE_URL; default: {DEFAULT_CLICKHOUSE_URL}]",
    )
    p.add_argument(
        "--clickhouse-database",
        default=None,
        help="database of the scores, traffic counts and alert state [env MONITOR_CLICKHOUSE_DATABASE; default: "
        "relevancy]",
    )
    p.add_argument(
        "--clickhouse-table",
        default=None,
        help="the scores table [env MONITOR_CLICKHOUSE_TABLE; default: relevancy_scores]",
    )
    p.add_argument(
        "--since",
        default="-24h",
        help="start: ISO 8601 (UTC without an offset), or relative as --since=-7d (default: -24h)",
    )
    p.add_argument("--until", default="now", help="end: ISO 8601, or relative as --until=-1d, or now (default: now)")
    p.add_argument(
        "--include-replays",
        action="store_true",
        help="also read the rows `relevancy-monitor replay` wrote (default: the live consumer's rows only; the page "
        "says how many it left out)",
    )
    p.add_argument(
        "--out", default=DEFAULT_OUT, help=f"the HTML file to write (default: {DEFAULT_OUT} in the working directory)"
    )
    p.set_defaults(func=cmd_report)


def cmd_report(ns: argparse.Namespace) -> int:
    """`report`: query the range, write the file, print its path as one line on stderr."""
    from monitor.report import write_report
    from monitor.store.connection import ClickHouseStore

    now = datetime.now(UTC)
    since, until = parse_time("--since", ns.since, now), parse_time("--until", ns.until, now)
    if since >= until:
        raise UsageError(f"--since ({since.isoformat()}) must be before --until ({until.isoformat()})")
    out = Path(ns.out).expanduser().absolute()
    if not out.parent.is_dir():
        raise UsageError(f"--out: directory {out.parent} does not exist")
    settings = load_settings(
        clickhouse_url=ns.clickhouse_url,
        clickhouse_database=ns.clickhouse_database,
        clickhouse_table=ns.clickhouse_table,
    )
    store = ClickHouseStore.from_settings(settings.store)
    try:
        store.open_for_reads()
        summary = write_report(store, since, until, out, now=now, include_replays=ns.include_replays)
    finally:
        store.close()
    print(summary.path, file=sys.stderr)
    return 0
