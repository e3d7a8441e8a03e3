"""The service and tooling subcommands: `run`, `migrate`, `sql` and `broker` (and `produce`, `monitor.cli.produce`).

`run` and `migrate` write the store (and create it); `sql` only reads: it opens an existing store, issues no DDL,
and needs neither write rights nor a judge's API key."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

from monitor.cli.flags import (
    CLUSTER_SETTINGS,
    RETENTION_SETTINGS,
    add_settings_flags,
    add_store_flags,
    read_file_flag,
    settings_from_args,
)
from monitor.cli.produce import add_produce
from monitor.cli.table import print_result
from schemas.errors import LocalBrokerError, UsageError

if TYPE_CHECKING:
    from monitor.store.migrations import Migrations


def register(sub: Any) -> None:
    """Add `run`, `migrate`, `sql`, `produce` and `broker` to the CLI's subparsers."""
    _add_run(sub)
    _add_migrate(sub)
    _add_sql(sub)
    add_produce(sub)
    _add_broker(sub)


def _parser(sub: Any, name: str, about: str, description: str | None = None, **kwargs: Any) -> argparse.ArgumentParser:
    """A subcommand whose help is `about` and whose description is `about` as a sentence (unless given)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=about, description=description or f"{about[0].upper()}{about[1:]}.", **kwargs
    )
    return parser


def _add_run(sub: Any) -> None:
    about = "run the monitor service (SIGTERM/SIGINT stop it cleanly)"
    p = _parser(
        sub,
        "run",
        about,
        description=f"{about[0].upper()}{about[1:]}. Each flag is also the environment variable its help names (flags "
        "win).",
        # The flags are listed by topic below; a usage line of every one would fill the screen.
        usage="%(prog)s [flags]",
    )
    add_settings_flags(p)
    p.set_defaults(func=cmd_run)


def _add_migrate(sub: Any) -> None:
    about = (
        "create the store, apply the pending schema migrations in order (each once, recorded in schema_migrations) and "
        "re-create any table, view or column the store lacks; idempotent"
    )
    p = _parser(sub, "migrate", about)
    p.add_argument(
        "--check",
        action="store_true",
        help="change nothing: list the pending migrations and how the store differs from this release's schema and "
        "from the retention settings; exit 1 if anything does",
    )
    add_store_flags(p, *CLUSTER_SETTINGS, *RETENTION_SETTINGS)
    p.set_defaults(func=cmd_migrate)


def _add_sql(sub: Any) -> None:
    p = _parser(
        sub, "sql", "run a query against the configured store and print the result (reads only, creates nothing)"
    )
    p.add_argument(
        "query",
        nargs="?",
        help="SQL; {table} expands to the scores table, unqualified names resolve in the database (or give --file)",
    )
    p.add_argument("--file", metavar="FILE", help="read the query from this file instead (default: the query argument)")
    p.add_argument(
        "--format",
        choices=["table", "csv", "json"],
        default="table",
        help="table: for people, long values cut to fit the terminal; csv, or json (one object per line): full values "
        "(default: table)",
    )
    add_store_flags(p)
    p.set_defaults(func=cmd_sql)


def _add_broker(sub: Any) -> None:
    about = "run a local in-memory Kafka-protocol broker (tansu) for trying things out; SIGTERM/Ctrl-C stop it"
    p = _parser(sub, "broker", about)
    p.add_argument("--port", type=int, default=9092, help="port to listen on, on 127.0.0.1 (default: 9092)")
    p.set_defaults(func=cmd_broker)


def cmd_run(ns: argparse.Namespace) -> int:
    """`run`: the service, until SIGTERM or SIGINT. The Kafka security settings are checked first; the store is then
    opened once, by the service (`AsyncStore.open`), which migrates it (MONITOR_AUTO_MIGRATE, by default only for the
    embedded store) or checks its schema: behind, `run` stops with one line saying to run `migrate`. A retention that
    differs from the settings only logs a warning saying to run `migrate` (or is applied, migrating)."""
    from consumers.clients import client_kwargs
    from monitor.runtime.logs import configure_logging
    from monitor.runtime.service import run_service

    settings = settings_from_args(ns)
    configure_logging(settings.process.log_format, settings.process.log_level)
    client_kwargs(settings.kafka)  # SASL and TLS settings (and the PEM files) checked before anything starts
    asyncio.run(run_service(settings))
    return 0


def cmd_migrate(ns: argparse.Namespace) -> int:
    """`migrate`: create the store if need be, apply the pending migrations, in order, each once, and re-create what
    the store lacks; exit 1 if something differs that it cannot fix. `--check` changes nothing and exits 1 on any
    difference."""
    from monitor.store.connection import ClickHouseStore
    from monitor.store.migrations import Migrations

    s = settings_from_args(ns).store
    store = ClickHouseStore.from_settings(s)
    schema = Migrations.from_settings(store, s)
    if ns.check:
        return _check_migrations(schema)
    try:
        store.open()
        applied = schema.migrate()
    finally:
        store.close()
    done = (
        f"{len(applied)} migration(s) applied: {', '.join(m.name for m in applied)}"
        if applied
        else "already up to date"
    )
    print(f"schema of {store.qualified_table} applied at {store.safe_url} ({done})", file=sys.stderr)
    for difference in schema.repaired:
        print(f"repaired: {difference}: {difference.repair}", file=sys.stderr)
    for difference in schema.unfixed:
        print(f"{'cannot fix' if difference.blocking else 'left as it is'}: {difference}", file=sys.stderr)
    if any(d.blocking for d in schema.unfixed):
        print(
            f"{len(schema.unfixed)} difference(s) left as they are: migrate adds what is missing and changes nothing "
            "else",
            file=sys.stderr,
        )
        return 1
    retention = schema.retention_applied
    if retention:
        changed = f"{len(retention.changes)} TTL change(s); rows already stored follow in the background"
        print(f"retention set to {retention.wanted} ({changed}):", file=sys.stderr)
        for line in retention.describe():
            print(f"  {line}", file=sys.stderr)
    elif retention is not None:
        print(f"retention unchanged: {retention.wanted}", file=sys.stderr)
    else:
        print(
            "retention not managed (MONITOR_RETENTION_DAYS unset): the tables' TTLs were left as they are",
            file=sys.stderr,
        )
    return 0


def _check_migrations(schema: Migrations) -> int:
    """`migrate --check`: print what is pending or differs (nothing is created or changed); 1 if anything is."""
    store = schema.store
    try:
        pending, differences = schema.check_report()
    finally:
        store.close()
    for m in pending:
        print(f"pending migration: {m.name}", file=sys.stderr)
    for difference in differences:
        fix = "`migrate` re-creates it" if difference.fixable else "`migrate` cannot fix this"
        print(f"differs: {difference} ({fix})", file=sys.stderr)
    retention = schema.retention_pending
    if retention:
        print(f"differs: {retention.summary()} (`migrate` applies it)", file=sys.stderr)
    if pending or differences or retention:
        print(
            f"schema of {store.qualified_table} at {store.safe_url} is not current: {len(pending)} pending, "
            f"{len(differences) + bool(retention)} difference(s)",
            file=sys.stderr,
        )
        return 1
    print(f"schema of {store.qualified_table} at {store.safe_url} is current", file=sys.stderr)
    return 0


def cmd_sql(ns: argparse.Namespace) -> int:
    """`sql`: one query against the existing store, printed; no DDL, so a read-only ClickHouse user suffices."""
    from monitor.store.connection import ClickHouseStore

    settings = settings_from_args(ns)
    if ns.file:
        try:
            query = read_file_flag(ns.file).decode("utf-8")
        except UnicodeDecodeError:
            raise UsageError(f"--file {ns.file} is not UTF-8 text") from None
    elif ns.query:
        query = ns.query
    else:
        raise UsageError("give a query or --file FILE")
    s = settings.store
    store = ClickHouseStore.from_settings(s)
    try:
        store.open_for_reads()
        result = store.query(query.replace("{table}", store.qualified_table))
    finally:
        store.close()
    print_result(result.columns, result.rows, ns.format)
    return 0


def cmd_broker(ns: argparse.Namespace) -> int:
    """`broker`: a local tansu broker in the foreground until SIGTERM, SIGINT (Ctrl-C) or SIGHUP; tansu stops with
    it."""
    from monitor.devtools.localbroker import LocalBroker

    # Python's default SIGTERM/SIGHUP end the process without unwinding, which left tansu running (and holding
    # the port); these handlers turn every stop signal into a normal exit through `LocalBroker.__exit__`.
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    with LocalBroker(port=ns.port) as broker:
        print(
            f"local Kafka-protocol broker (tansu, in-memory) listening on {broker.bootstrap}; Ctrl-C stops it",
            file=sys.stderr,
        )
        while not stop.wait(1.0) and broker.running:
            pass
        if not stop.is_set():
            raise LocalBrokerError(f"tansu on {broker.bootstrap} exited by itself")
    return 0
