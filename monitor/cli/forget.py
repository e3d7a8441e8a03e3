"""`relevancy-monitor forget`: erase a person's rows for a data-subject request, by conversation id or event id, from
every scores table of the database and from users' feedback on those answers (see `monitor.store.erasure`), after
recording the ids' hashes in `erased_ids` so that a replay never scores them again, and print what was done: one line
per table, one for the hashes recorded and a total, or JSON (`--format json`) with the time, the ids and the counts,
for the audit trail.

It opens an existing store only (a missing one is a one-line error and nothing is created) and needs DELETE rights."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from monitor.cli.flags import CLUSTER_SETTINGS, add_store_flags, settings_from_args
from monitor.store.erased_ids import ERASED_TABLE
from schemas.errors import StoreError, UsageError

if TYPE_CHECKING:
    from monitor.store.erasure import ErasureReport


def register(sub: Any) -> None:
    """Add `forget` to the CLI's subparsers."""
    about = (
        "erase the rows of conversations or events from every scores table and users' feedback (data-subject "
        "requests) and report what was deleted"
    )
    p = sub.add_parser("forget", help=about, description=f"{about[0].upper()}{about[1:]}.")
    needed = "repeatable; at least one --conversation-id or --event-id is required"
    p.add_argument(
        "--conversation-id",
        dest="conversation_ids",
        action="append",
        default=[],
        metavar="ID",
        help=f"a conversation to erase ({needed})",
    )
    p.add_argument(
        "--event-id", dest="event_ids", action="append", default=[], metavar="ID", help=f"an event to erase ({needed})"
    )
    p.add_argument("--dry-run", action="store_true", help="count the rows that would be deleted, delete nothing")
    p.add_argument(
        "--format",
        choices=["table", "json"],
        default="table",
        help="table: one line per table and a total; json: for an audit trail (default: table)",
    )
    add_store_flags(p, *CLUSTER_SETTINGS)
    p.set_defaults(func=cmd_forget)


def cmd_forget(ns: argparse.Namespace) -> int:
    """`forget`: erase (or with --dry-run count) the rows of the ids given and print the report; exit 1 with one
    line if rows still match afterwards."""
    from monitor.store.connection import ClickHouseStore
    from monitor.store.erasure import forget
    from monitor.store.migrations import Migrations

    conversations: list[str] = ns.conversation_ids
    events: list[str] = ns.event_ids
    if not conversations and not events:
        raise UsageError("give at least one --conversation-id ID or --event-id ID")
    if any(not i.strip() for i in (*conversations, *events)):
        raise UsageError("an id is empty: an empty id would match every row without one")
    s = settings_from_args(ns).store
    store = ClickHouseStore.from_settings(s)
    try:
        if ns.dry_run:
            store.open_for_reads()
        else:
            Migrations(store).ensure(migrate=False)
        report = forget(store, conversations, events, dry_run=ns.dry_run)
    finally:
        store.close()
    if ns.format == "json":
        print(json.dumps(report.as_json(), indent=2, ensure_ascii=False))
    else:
        for line in report_lines(report):
            print(line)
    if not report.dry_run and report.rows_remaining:
        raise StoreError(
            f"{report.rows_remaining} row(s) still match after the delete (rows arriving meanwhile, or a delete still "
            "running): run forget again"
        )
    return 0


def report_lines(report: ErasureReport) -> list[str]:
    """The report as text: one line per scores table and the feedback table, one per aggregate table (nothing
    deleted), one for the id hashes recorded in `erased_ids` and a total."""
    verb = "would be deleted" if report.dry_run else "deleted"
    lines = []
    for t in report.tables:
        found = []
        if report.conversation_ids:
            found.append(f"{len(t.conversation_ids_found)} of {len(report.conversation_ids)} conversation id(s) found")
        if report.event_ids:
            found.append(f"{len(t.event_ids_found)} of {len(report.event_ids)} event id(s) found")
        count = t.rows_matched if report.dry_run else t.rows_deleted
        lines.append(f"{t.table}: {count} row(s) {verb} ({', '.join(found)})")
    for name in report.aggregate_tables:
        lines.append(f"{name}: 0 rows {verb} (aggregates only: no ids or text)")
    if report.dry_run:
        lines.append(
            f"{report.database}.{ERASED_TABLE}: {len(report.conversation_ids) + len(report.event_ids)} id hash(es) "
            "would be recorded"
        )
    else:
        lines.append(
            f"{report.database}.{ERASED_TABLE}: {report.ids_recorded} id hash(es) recorded (a replay skips those ids)"
        )
    total = report.rows_matched if report.dry_run else report.rows_deleted
    mode = "dry run, nothing deleted" if report.dry_run else f"{report.at.isoformat()}"
    lines.append(
        f"total: {total} row(s) {verb} from {len(report.tables)} table(s) of {report.database} ({mode}; "
        f"{report.elapsed_s:.2f} s)"
    )
    return lines
