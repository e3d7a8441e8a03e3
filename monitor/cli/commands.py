"""The service and tooling subcommands: `run`, `migrate`, `sql`, `produce` and `broker`.

`run` and `migrate` write the store (and create it); `sql` only reads: it opens an existing store, issues no DDL,
and needs neither write rights nor a judge's API key."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monitor.cli.flags import RETENTION_SETTINGS, add_settings_flags, add_store_flags, settings_from_args
from monitor.cli.table import print_result
from schemas.errors import LocalBrokerError, UsageError

if TYPE_CHECKING:
    from monitor.runtime.store import StoreSettings


def register(sub: Any) -> None:
    """Add `run`, `migrate`, `sql`, `produce` and `broker` to the CLI's subparsers."""
    p = sub.add_parser("run", help="run the monitor service (SIGTERM/SIGINT stop it cleanly)")
    add_settings_flags(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "migrate",
        help="create the store and apply the pending schema migrations in order, each once (recorded in schema_migrations); idempotent",
    )
    add_store_flags(p, *RETENTION_SETTINGS)
    p.set_defaults(func=cmd_migrate)

    p = sub.add_parser("sql", help="run a query against the configured store and print the result (reads only, creates nothing)")
    p.add_argument("query", nargs="?", help="SQL; {table} expands to the scores table, unqualified names resolve in the database")
    p.add_argument("--file", help="read the query from a file")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table")
    add_settings_flags(p)
    p.set_defaults(func=cmd_sql)

    p = sub.add_parser("produce", help="produce events to a topic: a JSONL file as-is, or generated traffic")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--file", help="one record value per line (sent as-is, malformed lines included)")
    src.add_argument("--generate", type=int, metavar="N", help="generate N synthetic events")
    p.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    p.add_argument("--topic", default="conversations")
    p.add_argument("--partitions", type=int, default=3, help="partitions if the topic is created")
    p.add_argument("--rate", type=float, default=0.0, help="events per second (0: as fast as possible)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--malformed-share", type=float, default=0.02)
    p.add_argument("--pii-share", type=float, default=0.0, help="share of generated events carrying synthetic personal data (to see redaction)")
    p.set_defaults(func=cmd_produce)

    p = sub.add_parser("broker", help="run a local in-memory Kafka-protocol broker (tansu) for trying things out; SIGTERM/Ctrl-C stop it")
    p.add_argument("--port", type=int, default=9092)
    p.set_defaults(func=cmd_broker)


def cmd_run(ns: argparse.Namespace) -> int:
    """`run`: the service, until SIGTERM or SIGINT. The Kafka security settings are checked first; then, for a
    server (or an explicit MONITOR_AUTO_MIGRATE), the schema version: behind, `run` stops with one line saying to run
    `migrate`, unless MONITOR_AUTO_MIGRATE (default true only for the embedded store, which the service migrates). A
    retention that differs from the settings only logs a warning saying to run `migrate` (or is applied, migrating)."""
    from consumers.clients import client_kwargs
    from monitor.runtime.logs import configure_logging
    from monitor.runtime.service import run_service

    settings = settings_from_args(ns)
    configure_logging(settings.log_format, settings.log_level)
    client_kwargs(settings.kafka)  # SASL and TLS settings (and the PEM files) checked before anything starts
    if not settings.store.url.startswith("chdb:") or settings.store.auto_migrate is not None:
        _prepare_schema(settings.store)
    asyncio.run(run_service(settings))
    return 0


def _prepare_schema(s: StoreSettings) -> None:
    """Migrate the store (MONITOR_AUTO_MIGRATE) or check that its schema is current; raises `StoreError`. Without
    migrating, a retention (TTLs) that differs from the settings is a warning naming `relevancy-monitor migrate`."""
    import structlog

    from monitor.runtime.store import ClickHouseStore

    log = structlog.get_logger("monitor.cli")
    store = ClickHouseStore.from_settings(s)
    try:
        if s.auto_migrates:
            applied = store.migrate()
            if applied:
                log.info("migrated", database=s.database, migrations=[m.name for m in applied])
            retention = store.retention_applied
            if retention:
                log.info("retention applied", database=s.database, retention=retention.wanted, changes=retention.describe())
        else:
            store.check_schema()
            if store.retention_pending:
                log.warning(
                    "the store's retention differs from the settings: run `relevancy-monitor migrate` to apply it",
                    database=s.database,
                    retention=store.retention_pending.wanted,
                    changes=store.retention_pending.describe(),
                )
    finally:
        store.close()


def cmd_migrate(ns: argparse.Namespace) -> int:
    """`migrate`: create the store if need be and apply the pending migrations, in order, each once."""
    from monitor.runtime.store import ClickHouseStore

    s = settings_from_args(ns).store
    store = ClickHouseStore.from_settings(s)
    try:
        applied = store.migrate()
    finally:
        store.close()
    done = f"{len(applied)} migration(s) applied: {', '.join(m.name for m in applied)}" if applied else "already up to date"
    print(f"schema of {store.qualified_table} applied at {store.url} ({done})", file=sys.stderr)
    retention = store.retention_applied
    if retention:
        changed = f"{len(retention.changes)} TTL change(s); rows already stored follow in the background"
        print(f"retention set to {retention.wanted} ({changed}):", file=sys.stderr)
        for line in retention.describe():
            print(f"  {line}", file=sys.stderr)
    elif retention is not None:
        print(f"retention unchanged: {retention.wanted}", file=sys.stderr)
    else:
        print("retention not managed (MONITOR_RETENTION_DAYS unset): the tables' TTLs were left as they are", file=sys.stderr)
    return 0


def cmd_sql(ns: argparse.Namespace) -> int:
    """`sql`: one query against the existing store, printed; no DDL, so a read-only ClickHouse user suffices."""
    from monitor.runtime.store import ClickHouseStore

    settings = settings_from_args(ns)
    if ns.file:
        query = Path(ns.file).read_text(encoding="utf-8")
    elif ns.query:
        query = ns.query
    else:
        raise UsageError("give a query or --file FILE")
    s = settings.store
    store = ClickHouseStore.from_settings(s)
    try:
        store.open_existing()
        result = store.query(query.replace("{table}", store.qualified_table))
    finally:
        store.close()
    print_result(result.columns, result.rows, ns.format)
    return 0


def cmd_produce(ns: argparse.Namespace) -> int:
    """`produce`: a JSONL file's lines as-is, or generated traffic, to a topic."""
    from monitor.devtools.traffic import generate_events, produce

    if ns.file:
        lines = Path(ns.file).read_bytes().splitlines()
        values: Iterable[bytes] = [ln for ln in lines if ln.strip()]
    else:
        for name in ("malformed_share", "pii_share"):
            if not 0.0 <= getattr(ns, name) <= 1.0:
                raise UsageError(f"--{name.replace('_', '-')} must be between 0 and 1, got {getattr(ns, name)}")
        values = generate_events(ns.generate, seed=ns.seed, malformed_share=ns.malformed_share, pii_share=ns.pii_share)
    from monitor.config import load_settings

    kafka = load_settings().kafka  # TLS and SASL from MONITOR_KAFKA_*, like the monitor's own clients
    sent = asyncio.run(produce(ns.bootstrap_servers, ns.topic, values, rate=ns.rate, partitions=ns.partitions, kafka=kafka))
    print(f"produced {sent} record(s) to {ns.topic} at {ns.bootstrap_servers}", file=sys.stderr)
    return 0


def cmd_broker(ns: argparse.Namespace) -> int:
    """`broker`: a local tansu broker in the foreground until SIGTERM, SIGINT (Ctrl-C) or SIGHUP; tansu stops with it."""
    from monitor.devtools.localbroker import LocalBroker

    # Python's default SIGTERM/SIGHUP end the process without unwinding, which left tansu running (and holding
    # the port); these handlers turn every stop signal into a normal exit through `LocalBroker.__exit__`.
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    with LocalBroker(port=ns.port) as broker:
        print(f"local Kafka-protocol broker (tansu, in-memory) listening on {broker.bootstrap}; Ctrl-C stops it", file=sys.stderr)
        while not stop.wait(1.0) and broker.running:
            pass
        if not stop.is_set():
            raise LocalBrokerError(f"tansu on {broker.bootstrap} exited by itself")
    return 0
