"""`produce`: records to a topic, a JSONL file's lines as-is or generated traffic (with users' feedback if asked), each
conversation record keyed by its conversation id, as real producers key them."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from monitor.cli.flags import (
    KAFKA_CONNECTION_SETTINGS,
    KAFKA_ENV_ONLY,
    add_renamed_flag,
    add_setting_flags,
    read_file_flag,
    settings_from_args,
)
from schemas.errors import UsageError

if TYPE_CHECKING:
    from monitor.devtools.outgoing import Outgoing


def add_produce(sub: Any) -> None:
    """Add `produce` to the CLI's subparsers."""
    about = "produce events to a topic: a JSONL file as-is, or generated traffic"
    p: argparse.ArgumentParser = sub.add_parser("produce", help=about, description=f"{about[0].upper()}{about[1:]}.")
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
        lines = read_file_flag(ns.file).splitlines()
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
