"""`relevancy-monitor labels export`: the reviewers' labels (the UI's review queue) as the labelled set `calibrate`
reads, one JSON object per label with the stored question and answer. Reads only: the store is opened with
`open_for_reads` (readonly = 1), nothing is created."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from monitor.cli.flags import add_store_flags, settings_from_args
from monitor.cli.time_flags import add_span_flags, optional_span_from_args
from schemas.errors import UsageError

# Labels are written from the UI's first day: "since the beginning" is any time before it.
EVERY_LABEL_SINCE = datetime(1970, 1, 1, tzinfo=UTC)


def register(subparsers: Any) -> None:
    """Add the `labels` command group (export) to the CLI's subparsers."""
    p = subparsers.add_parser(
        "labels",
        help="the reviewers' labels of the UI's review queue: export them as the file `calibrate --labels` reads",
        description="The labels reviewers gave on the review page of `relevancy-monitor ui` (table `labels`).",
    )
    sub = p.add_subparsers(dest="labels_command", required=True, metavar="ACTION")
    export = sub.add_parser(
        "export",
        help="write the labels as JSONL for `calibrate --labels FILE`",
        description=(
            "Write one JSON object per label (the latest of each reviewer and answer) written in --since..--until: "
            "question, response, context and system as stored, label 0-4, id event_id:reviewer, category the app, "
            "tags [route], rationale the comment; ordered by event id and reviewer. Refuses when the store kept no "
            "text (MONITOR_STORE_TEXT=none). Reads only: creates nothing in the store."
        ),
    )
    add_span_flags(export, None, since_absent="every label")
    export.add_argument("--out", required=True, metavar="FILE", help="the JSONL file to write ('-': stdout)")
    add_store_flags(export)
    export.set_defaults(func=cmd_labels_export)


def label_span(ns: argparse.Namespace, now: datetime) -> tuple[datetime, datetime]:
    """The labels' --since (default: every label) and --until (default now)."""
    since, until = optional_span_from_args(ns, now)
    return since or EVERY_LABEL_SINCE, until


def read_store_lines(ns: argparse.Namespace, now: datetime) -> list[str]:
    """The export's lines of the store the settings name, for the span of `ns`, on a read-only session."""
    from monitor.review.label_export import store_label_lines
    from monitor.review.label_rows import LABELS_TABLE
    from monitor.store.connection import ClickHouseStore

    since, until = label_span(ns, now)
    store = ClickHouseStore.from_settings(settings_from_args(ns).store)
    try:
        store.open_for_reads(LABELS_TABLE)
        return store_label_lines(store, since, until)
    finally:
        store.close()


def cmd_labels_export(ns: argparse.Namespace) -> int:
    """`labels export`: write the file, say how many labels on stderr."""
    lines = read_store_lines(ns, datetime.now(UTC))
    text = "".join(line + "\n" for line in lines)
    if ns.out == "-":
        sys.stdout.write(text)
    else:
        out = Path(ns.out).expanduser()
        if not out.parent.absolute().is_dir():
            raise UsageError(f"--out: directory {out.parent} does not exist")
        out.write_text(text, encoding="utf-8")
    print(f"{len(lines)} labels written to {ns.out}", file=sys.stderr)
    return 0
