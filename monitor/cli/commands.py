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

from monitor.cli.flags import (
    CLUSTER_SETTINGS,
    KAFKA_CONNECTION_SETTINGS,
    KAFKA_ENV_ONLY,
    RETENTION_SETTINGS,
    add_renamed_flag,
    add_setting_flags,
    add_settings_flags,
    add_store_flags,
    settings_from_args,
)
from monitor.cli.table import print_result
from schemas.errors import LocalBrokerError, UsageError

if TYPE_CHECKING:
    from monitor.devtools.outgoing import Outgoing
    from monitor.store.migrations import Migrations


def register(sub: Any) -> None:
    """Add `run`, `migrate`, `sql`, `produce` and `broker` to the CLI's subparsers."""
    _add_run(sub)
    _add_migrate(sub)
    _add_sql(sub)
    _add_produce(sub)
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


def _add_produce(sub: Any) -> None:
    p = _parser(sub, "produce", "produce events to a topic: a JSONL file as-is, or generated traffic")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--file",
        metavar="FILE",
        help="one record value per line, sent as-is, malformed lines included (this or --generate is required)",
    )
    src.add_argument(
        "--generate", type=int, metavar="N", help="generate N synthetic events (this or --file is required)"
    )
    p.add_argument(
        "--kafka-topic",
        metavar="TOPIC",
        help="topic to produce to, created if missing [default: the first of MONITOR_KAFKA_TOPICS, which defaults to "
        "conversations]",
    )
    p.add_argument("--partitions", type=int, default=3, help="partitions of the topic if it is created (default: 3)")
    p.add_argument(
        "--rate",
        type=float,
        default=0.0,
        metavar="PER_SECOND",
        help="records per second (feedback records included), 0 for as fast as possible (default: 0)",
    )
    _add_generated_traffic_flags(p)
    add_setting_flags(p, "Kafka", KAFKA_CONNECTION_SETTINGS, KAFKA_ENV_ONLY)
    # Former spellings, from before the flags were named after the settings they set.
    add_renamed_flag(p, "--bootstrap-servers", "--kafka-bootstrap-servers", "kafka_bootstrap_servers")
    add_renamed_flag(p, "--topic", "--kafka-topic", "kafka_topic")
    p.set_defaults(func=cmd_produce)


def _add_generated_traffic_flags(p: argparse.ArgumentParser) -> None:
    """`produce`'s flags shaping generated events and their encoding."""
    p.add_argument(
        "--seed",
        type=int,
        default=7,
        metavar="N",
        help="seed of the generated events: the same seed gives the same events (default: 7)",
    )
    p.add_argument(
        "--malformed-share",
        type=float,
        default=0.02,
        help="share of generated events malformed on purpose, 0..1 (default: 0.02)",
    )
    p.add_argument(
        "--pii-share",
        type=float,
        default=0.0,
        help="share of generated events carrying synthetic personal data (to see redaction), 0..1 (default: 0)",
    )
    p.add_argument(
        "--feedback",
        type=float,
        default=0.0,
        metavar="RATE",
        help="share of generated answers that get users' feedback (a thumbs or a 1-5 rating, more often negative on "
        "padded or off-topic answers), sent after the answer and keyed by its conversation, 0..1 (default: 0)",
    )
    p.add_argument(
        "--feedback-topic",
        metavar="TOPIC",
        help="topic of the feedback, created if missing [default: the events' own topic; with --format otlp_*, where "
        "feedback is `gen_ai.evaluation.result` log records, the first of MONITOR_OTLP_LOGS_TOPICS (otlp_logs)]",
    )
    p.add_argument(
        "--format",
        choices=("events", "otlp_proto", "otlp_json"),
        default="events",
        help="events: the monitor's JSON, one event a record; otlp_proto or otlp_json: the events as GenAI spans, "
        "many to a record, as an OpenTelemetry Collector's Kafka exporter writes them (default: events)",
    )
    p.add_argument(
        "--dialect",
        choices=("mixed", "gen_ai", "legacy_events", "openllmetry", "openinference"),
        default="mixed",
        help="with --format otlp_*: the GenAI attributes the spans carry; mixed cycles through all four "
        "(default: mixed)",
    )
    p.add_argument(
        "--spans-per-record",
        type=int,
        default=50,
        help="with --format otlp_*: LLM calls per record (default: 50)",
    )


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
            query = _read_file(ns.file).decode("utf-8")
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


def cmd_produce(ns: argparse.Namespace) -> int:
    """`produce`: a JSONL file's lines as-is, or generated traffic (with users' feedback if asked), to a topic; each
    conversation record keyed by its conversation id."""
    from monitor.devtools.outgoing import keyed_by_conversation
    from monitor.devtools.traffic import produce

    if not ns.rate >= 0:  # also NaN
        raise UsageError(
            f"--rate must be 0 (as fast as possible) or a positive number of events per second, got {ns.rate:g}"
        )
    settings = settings_from_args(ns)  # brokers, TLS and SASL from the flags and MONITOR_KAFKA_*, like `run`'s clients
    kafka = settings.kafka
    topic: str = ns.kafka_topic or settings.kafka.topics[0]
    records: Iterable[Outgoing]
    if ns.file:
        if ns.feedback:
            raise UsageError("--feedback needs --generate: feedback is on generated answers")
        lines = _read_file(ns.file).splitlines()
        records = [keyed_by_conversation(ln) for ln in lines if ln.strip()]
    else:
        records = _generated_records(ns, topic, settings.kafka.otlp_logs_topics)
    if ns.format != "events":
        from monitor.devtools.otlp_traffic import otlp_outgoing

        if ns.spans_per_record < 1:
            raise UsageError(f"--spans-per-record must be at least 1, got {ns.spans_per_record}")
        records = otlp_outgoing(
            records, encoding=ns.format, dialect=ns.dialect, per_record=ns.spans_per_record, seed=ns.seed
        )
    sent = asyncio.run(
        produce(kafka.bootstrap_servers, topic, records, rate=ns.rate, partitions=ns.partitions, kafka=kafka)
    )
    print(f"produced {sent} record(s) to {topic} at {kafka.bootstrap_servers}", file=sys.stderr)
    return 0


def _generated_records(ns: argparse.Namespace, topic: str, logs_topics: tuple[str, ...]) -> Iterable[Outgoing]:
    """`produce --generate`'s records, with feedback on `--feedback` of the answers; raises `UsageError` on a share
    outside 0..1 or a feedback topic that cannot carry it."""
    from monitor.devtools.feedback_traffic import FeedbackMix
    from monitor.devtools.traffic import generate_records

    for name in ("malformed_share", "pii_share", "feedback"):
        if not 0.0 <= getattr(ns, name) <= 1.0:
            raise UsageError(f"--{name.replace('_', '-')} must be between 0 and 1, got {getattr(ns, name)}")
    feedback = None
    if ns.feedback > 0:
        feedback_topic = ns.feedback_topic
        if ns.format != "events":
            feedback_topic = feedback_topic or (logs_topics[0] if logs_topics else "otlp_logs")
            if feedback_topic == topic:
                raise UsageError(
                    f"--feedback-topic {topic}: with --format {ns.format} the feedback is OTLP log records, which "
                    "need a topic of their own (one of MONITOR_OTLP_LOGS_TOPICS), not the spans' topic"
                )
        feedback = FeedbackMix(ns.feedback, topic=None if feedback_topic == topic else feedback_topic)
    return generate_records(
        ns.generate, seed=ns.seed, malformed_share=ns.malformed_share, pii_share=ns.pii_share, feedback=feedback
    )


def _read_file(path: str) -> bytes:
    """The bytes of a `--file`; raises `UsageError` (one line) when it cannot be read."""
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read --file {path}: {e.strerror or e}") from None


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
