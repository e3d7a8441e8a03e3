"""The `relevancy-monitor` command line."""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import sys
import time
import typing
from collections.abc import Callable, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any

from monitor.config import ConfigError, Settings, load_settings

EXIT_USAGE = 2


class CliError(Exception):
    """A one-line error for the user; printed without a traceback."""


# ---- settings as flags -----------------------------------------------------------------------------------

# Secrets stay out of argv (visible in `ps`); structured values are JSON in the environment.
_ENV_ONLY = frozenset({"anthropic_api_key", "kafka_sasl_password", "judge_prices"})

def _add_settings_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("settings (each also from the env var MONITOR_<NAME>)")
    for name, field in Settings.model_fields.items():
        if name in _ENV_ONLY:
            continue
        flag = "--" + name.replace("_", "-")
        help_text = f"{field.description or name} [env MONITOR_{name.upper()}]"
        args = typing.get_args(field.annotation)
        if field.annotation is bool:
            group.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=None, help=help_text)
        elif typing.get_origin(field.annotation) is typing.Literal:
            group.add_argument(flag, dest=name, choices=list(args), default=None, help=help_text)
        else:
            group.add_argument(flag, dest=name, default=None, metavar=name.split("_")[-1].upper(), help=help_text)


def settings_from_args(ns: argparse.Namespace) -> Settings:
    """Env vars, overridden by the flags given on the command line."""
    given = {name: getattr(ns, name) for name in Settings.model_fields if getattr(ns, name, None) is not None}
    return load_settings(**given)


# ---- commands --------------------------------------------------------------------------------------------

def cmd_run(ns: argparse.Namespace) -> int:
    from monitor.logs import configure_logging
    from monitor.service import run_service

    settings = settings_from_args(ns)
    configure_logging(settings.log_format, settings.log_level)
    asyncio.run(run_service(settings))
    return 0


def _cell(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, float):
        return round(value, 6)
    return value


def print_result(columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str, out: typing.TextIO = sys.stdout) -> None:
    """Print query results as a table, CSV or JSON lines."""
    if fmt == "csv":
        w = csv.writer(out)
        w.writerow(columns)
        w.writerows([[_cell(v) for v in r] for r in rows])
    elif fmt == "json":
        for r in rows:
            out.write(json.dumps({c: _cell(v) for c, v in zip(columns, r, strict=True)}, default=str) + "\n")
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(*columns, show_lines=False)
        for r in rows:
            table.add_row(*(str(_cell(v)) for v in r))
        Console(file=out).print(table)
        Console(file=out, stderr=False).print(f"{len(rows)} row(s)", style="dim")


def cmd_sql(ns: argparse.Namespace) -> int:
    from monitor.store import ClickHouseStore

    settings = settings_from_args(ns)
    if ns.file:
        query = Path(ns.file).read_text(encoding="utf-8")
    elif ns.query:
        query = ns.query
    else:
        raise CliError("give a query or --file FILE")
    store = ClickHouseStore(settings.clickhouse_url, settings.clickhouse_database, settings.clickhouse_table)
    try:
        store.ensure_schema()
        result = store.query(query.replace("{table}", store.qualified_table))
    finally:
        store.close()
    print_result(result.columns, result.rows, ns.format)
    return 0


def cmd_produce(ns: argparse.Namespace) -> int:
    from monitor.traffic import generate_events

    if ns.file:
        lines = Path(ns.file).read_bytes().splitlines()
        values: typing.Iterable[bytes] = [ln for ln in lines if ln.strip()]
    else:
        values = generate_events(ns.generate, seed=ns.seed, malformed_share=ns.malformed_share)
    sent = asyncio.run(produce(ns.bootstrap_servers, ns.topic, values, rate=ns.rate, partitions=ns.partitions))
    print(f"produced {sent} record(s) to {ns.topic} at {ns.bootstrap_servers}", file=sys.stderr)
    return 0


async def produce(bootstrap: str, topic: str, values: typing.Iterable[bytes], *, rate: float = 0.0, partitions: int = 3) -> int:
    """Produce record values to `topic` (created if missing), at `rate` per second (0: as fast as possible)."""
    from aiokafka import AIOKafkaProducer

    from monitor.kafka import ensure_topics

    await ensure_topics(load_settings(kafka_bootstrap_servers=bootstrap), {topic: partitions})
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    sent = 0
    started = time.monotonic()
    try:
        for value in values:
            await producer.send(topic, value)
            sent += 1
            if rate > 0:
                ahead = sent / rate - (time.monotonic() - started)
                if ahead > 0:
                    await asyncio.sleep(ahead)
        await producer.flush()
    finally:
        await producer.stop()
    return sent


def cmd_broker(ns: argparse.Namespace) -> int:
    from monitor.localbroker import LocalBroker

    with LocalBroker(port=ns.port) as broker:
        print(f"local Kafka-protocol broker (tansu, in-memory) listening on {broker.bootstrap}; Ctrl-C stops it", file=sys.stderr)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


def cmd_demo(ns: argparse.Namespace) -> int:
    from monitor.demo import run_demo

    return run_demo(seconds=ns.seconds, rate=ns.rate, data_dir=Path(ns.data_dir))


# ---- parser ----------------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="relevancy-monitor", description="Answer-relevancy monitoring for LLM assistants.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("run", help="run the monitor service (SIGTERM/SIGINT stop it cleanly)")
    _add_settings_flags(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("sql", help="run a query against the configured store and print the result")
    p.add_argument("query", nargs="?", help="SQL; {table} expands to the scores table")
    p.add_argument("--file", help="read the query from a file")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table")
    _add_settings_flags(p)
    p.set_defaults(func=cmd_sql)

    from monitor.alerts.cli import register as register_alerts
    from monitor.judge_cli import register as register_judge

    register_judge(sub)
    register_alerts(sub)

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
    p.set_defaults(func=cmd_produce)

    p = sub.add_parser("broker", help="run a local in-memory Kafka-protocol broker (tansu) for trying things out")
    p.add_argument("--port", type=int, default=9092)
    p.set_defaults(func=cmd_broker)

    p = sub.add_parser("demo", help="local broker + generated traffic + the monitor on embedded ClickHouse, then a summary")
    p.add_argument("--seconds", type=float, default=20.0, help="how long to run the monitor")
    p.add_argument("--rate", type=float, default=100.0, help="generated events per second")
    p.add_argument("--data-dir", default=".relevancy-monitor/demo", help="where the embedded ClickHouse keeps its files")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    parser = build_parser()
    ns = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = ns.func
    try:
        return func(ns)
    except (ConfigError, CliError) as e:
        print(f"relevancy-monitor: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # expected operational failures (store, broker) as one line; bugs keep the traceback
        from monitor.errors import operator_message

        msg = operator_message(e)
        if msg is None:
            raise
        print(f"relevancy-monitor: error: {msg}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
