"""The consumers' settings slices: the Kafka clients' (`KafkaSettings`: brokers, security, group timings, the
dead-letter topic, input limits and formats) and sampling's (`SamplingSettings`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, NamedTuple

from pydantic import AfterValidator, Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings

from consumers.otlp.dialects import DEFAULT_PROMPT_VERSION_ATTRIBUTES
from schemas.settings import MONITOR_SLICE, CommaSeparated, ReadableFile, host_ports

SampleKey = Literal["conversation_id", "event_id"]
OtlpEncoding = Literal["otlp_proto", "otlp_json"]
FORMATS = ("events", "otlp_proto", "otlp_json")


class TopicFormat(NamedTuple):
    """What one topic's records hold, and the OTLP encoding (None for the monitor's own events)."""

    holds: Literal["events", "spans", "logs"]
    encoding: OtlpEncoding | None


def parse_input_formats(text: str) -> dict[str, str]:
    """{topic: format} from `format` (every topic, under the key "") or `topic=format,...`; raises `ValueError`."""
    out: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        topic, _, fmt = item.rpartition("=")
        if fmt not in FORMATS:
            raise ValueError(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")
        out[topic.strip()] = fmt
    return out


def input_formats(text: str) -> str:
    """The setting, checked: every format known."""
    parse_input_formats(text)
    return text


class KafkaSettings(BaseSettings):
    """What the Kafka clients need: where the brokers are, how to authenticate, the group's timings, the dead-letter
    topic and the input limits. Env: MONITOR_<setting> (the alias, else the field's name)."""

    model_config = MONITOR_SLICE

    bootstrap_servers: Annotated[str, AfterValidator(host_ports)] = Field(
        "127.0.0.1:9092",
        validation_alias="kafka_bootstrap_servers",
        description="the Kafka brokers to connect to first",
        json_schema_extra={"shown_type": "host:port[,host:port…]"},
    )
    topics: CommaSeparated = Field(
        ("conversations",),
        validation_alias="kafka_topics",
        min_length=1,
        description="topics to consume, comma-separated",
    )
    group_id: str = Field(
        "relevancy-monitor",
        validation_alias="kafka_group_id",
        min_length=1,
        description="consumer group id (the replicas of one deployment share it)",
    )
    auto_offset_reset: Literal["earliest", "latest"] = Field(
        "earliest",
        validation_alias="kafka_auto_offset_reset",
        description="where a group without committed offsets starts: the oldest retained record, or only records "
        "produced from now on",
    )
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT",
        validation_alias="kafka_security_protocol",
        description="how every Kafka client connects: SSL is TLS; SASL_* authenticate with user and password (over TLS "
        "for SASL_SSL)",
    )
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        None,
        validation_alias="kafka_sasl_mechanism",
        description="SASL mechanism; only with a SASL_* protocol",
        json_schema_extra={"shown_default": "`PLAIN` with a SASL_* protocol"},
    )
    sasl_username: str | None = Field(
        None,
        validation_alias="kafka_sasl_username",
        description="SASL user name; a SASL_* protocol needs it and MONITOR_KAFKA_SASL_PASSWORD",
    )
    sasl_password: SecretStr | None = Field(
        None,
        validation_alias="kafka_sasl_password",
        description="SASL password (environment only, never a flag: argv is visible in `ps`)",
    )
    ssl_cafile: ReadableFile = Field(
        None,
        validation_alias="kafka_ssl_cafile",
        description="PEM file of the CA that signed the brokers' certificates; SSL or SASL_SSL only",
        json_schema_extra={"shown_default": "the system's CAs"},
    )
    ssl_certfile: ReadableFile = Field(
        None,
        validation_alias="kafka_ssl_certfile",
        description="PEM client certificate for mutual TLS (may hold the key too); SSL or SASL_SSL only",
    )
    ssl_keyfile: ReadableFile = Field(
        None,
        validation_alias="kafka_ssl_keyfile",
        description="PEM private key of MONITOR_KAFKA_SSL_CERTFILE, if not in that file",
    )
    ssl_check_hostname: bool = Field(
        True,
        validation_alias="kafka_ssl_check_hostname",
        description="check that the broker's certificate names the host connected to",
    )
    session_timeout_ms: int = Field(
        10_000,
        ge=1000,
        validation_alias="kafka_session_timeout_ms",
        description="consumer group session timeout: heartbeats every third of it; on a rebalance, revoked partitions "
        "get half of it to finish",
    )
    max_poll_records: int = Field(
        500, ge=1, validation_alias="kafka_max_poll_records", description="most records taken from Kafka in one fetch"
    )
    connect_timeout_s: float = Field(
        60.0,
        gt=0,
        validation_alias="kafka_connect_timeout_s",
        description="start-up gives up (one line, exit 1) when the brokers do not answer within this",
    )
    dlq_topic: str = Field(
        "relevancy-monitor.dlq", min_length=1, description="dead-letter topic for events that cannot be judged"
    )
    dlq_create: bool = Field(
        True,
        description="create the dead-letter topic at start if it is missing (false where the app may not create "
        "topics)",
    )
    dlq_partitions: int = Field(3, ge=1, description="partitions of the dead-letter topic when it is created")
    dlq_replication_factor: int | None = Field(
        None,
        ge=1,
        description="replicas of each topic `run` or `produce` creates (the dead-letter topic, produce's target)",
        json_schema_extra={"shown_default": "min(3, brokers in the cluster)"},
    )
    max_event_bytes: int = Field(
        1_000_000, ge=1024, description="record values larger than this are dead-lettered as `oversized`"
    )
    # Event times further ahead than this are a bad clock: dead-lettered.
    max_future_skew_s: float | None = Field(
        3600.0, gt=0, description="event times further ahead of the monitor's clock are dead-lettered"
    )
    input_format: Annotated[str, AfterValidator(input_formats)] = Field(
        "events",
        description="what the topics carry: `events` (the monitor's JSON), `otlp_proto` or `otlp_json` (an "
        "OpenTelemetry Collector's Kafka exporter); one for every topic, or per topic as topic=format pairs",
        json_schema_extra={"shown_type": "format | topic=format[,topic=format…]"},
    )
    otlp_logs_topics: CommaSeparated = Field(
        ("otlp_logs",),
        description="OTLP topics that carry log records (the Collector's `otlp_logs`); other OTLP topics carry spans",
    )
    otlp_app_attribute: str | None = Field(
        None,
        min_length=1,
        description="the span or resource attribute that names the app on OTLP topics, in place of `service.name`",
    )
    otlp_prompt_version_attributes: CommaSeparated = Field(
        DEFAULT_PROMPT_VERSION_ATTRIBUTES,
        min_length=1,
        description="the span or resource attributes that hold the prompt version on OTLP topics, first found wins",
    )

    otlp_join_wait_s: float = Field(
        30.0,
        gt=0,
        le=600,
        description="how long a span without content and the one-message GenAI log records of its call wait for each "
        "other (when both a spans and a logs topic are read); their offsets are not committed meanwhile",
    )
    otlp_join_max_waiting: int = Field(
        10_000, ge=1, description="calls waiting for that join at most; beyond it the oldest is let go first"
    )

    def format_of(self, topic: str) -> TopicFormat:
        """What `topic`'s records hold (events, OTLP spans or OTLP logs) and, for OTLP, their encoding."""
        formats = parse_input_formats(self.input_format)
        found = formats.get(topic, formats.get("", "events"))
        if found == "events":
            return TopicFormat("events", None)
        encoding: OtlpEncoding = "otlp_json" if found == "otlp_json" else "otlp_proto"
        return TopicFormat("logs" if topic in self.otlp_logs_topics else "spans", encoding)

    def joins_logs(self) -> bool:
        """Whether the topics read include both OTLP spans and OTLP log records (so the two are joined)."""
        holds = {self.format_of(topic).holds for topic in self.topics}
        return {"spans", "logs"} <= holds

    @field_validator("ssl_keyfile")
    @classmethod
    def _key_needs_cert(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is not None and info.data.get("ssl_certfile") is None:
            raise ValueError("needs MONITOR_KAFKA_SSL_CERTFILE (the certificate of this key)")
        return value

    @field_validator("input_format")
    @classmethod
    def _formats_of_consumed_topics(cls, value: str, info: ValidationInfo) -> str:
        # A misspelt topic would leave the real one on the default format, dead-lettering every record it holds.
        topics = info.data.get("topics", ())
        unknown = sorted(t for t in parse_input_formats(value) if t and t not in topics)
        if unknown:
            raise ValueError(f"names {', '.join(unknown)}, which MONITOR_KAFKA_TOPICS does not consume")
        return value

    @field_validator("dlq_topic")
    @classmethod
    def _dlq_not_an_input(cls, value: str, info: ValidationInfo) -> str:
        if value in info.data.get("topics", ()):
            raise ValueError("must not be one of MONITOR_KAFKA_TOPICS")
        return value


class SamplingSettings(BaseSettings):
    """The sampling slice of the settings: the base rate, what the hash is over, and an optional rules file.
    Env: MONITOR_<setting>."""

    model_config = MONITOR_SLICE

    rate: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        validation_alias="sample_rate",
        description="share of conversations (or events, see MONITOR_SAMPLE_KEY) judged where no sampling rule decides",
    )
    key: SampleKey = Field(
        "conversation_id",
        validation_alias="sample_key",
        description="what the sampling hash is over: conversation_id judges all turns of a conversation or none",
    )
    file: Path | None = Field(
        None,
        validation_alias="sampling_file",
        description="YAML sampling rules (segment rates, always/never, minimum per segment)",
    )
