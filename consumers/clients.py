"""aiokafka client construction: connection and security options in one place, and start-up failures turned
into `KafkaUnavailable` (one line for the operator).

Security (`client_kwargs`, shared by the consumer, the dead-letter producer, the admin client and `produce`): TLS
with the CA, client certificate and key of the MONITOR_KAFKA_SSL_* settings, and SASL PLAIN or SCRAM-SHA-256/512.
An incomplete or contradictory combination is a one-line `ConfigError` naming the variables."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple, Protocol

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaConnectionError, KafkaError, TopicAlreadyExistsError, for_code
from aiokafka.helpers import create_ssl_context
from pydantic import AfterValidator, Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings

from consumers.otlp.dialects import DEFAULT_PROMPT_VERSION_ATTRIBUTES
from schemas.errors import ConfigError, KafkaUnavailable
from schemas.settings import MONITOR_SLICE, CommaSeparated, ReadableFile, host_ports

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


class _Startable(Protocol):
    async def start(self) -> None: ...


_TLS_FILES = (
    ("ssl_cafile", "MONITOR_KAFKA_SSL_CAFILE"),
    ("ssl_certfile", "MONITOR_KAFKA_SSL_CERTFILE"),
    ("ssl_keyfile", "MONITOR_KAFKA_SSL_KEYFILE"),
)


def _file_error(variable: str, path: Path, e: Exception) -> ConfigError:
    reason = (
        e.strerror
        if isinstance(e, OSError) and e.strerror
        else (getattr(e, "reason", None) or str(e) or type(e).__name__)
    )
    return ConfigError(f"invalid setting {variable}: cannot use {path} ({reason})")


def _holds_certificates(path: Path) -> bool:
    try:
        ssl.create_default_context().load_verify_locations(cafile=path)
    except (OSError, ssl.SSLError, ValueError):
        return False
    return True


def ssl_context(kafka: KafkaSettings) -> ssl.SSLContext:
    """The TLS context of the Kafka clients: the CA of MONITOR_KAFKA_SSL_CAFILE (else the system's), the client
    certificate and key for mutual TLS, hostname checking per MONITOR_KAFKA_SSL_CHECK_HOSTNAME. A file that cannot
    be read or is not PEM of its kind is a one-line `ConfigError` naming its variable."""
    try:
        context: ssl.SSLContext = create_ssl_context(cafile=kafka.ssl_cafile)
    except (OSError, ssl.SSLError, ValueError) as e:
        assert kafka.ssl_cafile is not None  # the system's CAs load without error
        raise _file_error("MONITOR_KAFKA_SSL_CAFILE", kafka.ssl_cafile, e) from None
    if kafka.ssl_certfile is not None:
        try:
            context.load_cert_chain(kafka.ssl_certfile, kafka.ssl_keyfile)
        except (OSError, ssl.SSLError, ValueError) as e:
            bad_key = kafka.ssl_keyfile is not None and _holds_certificates(kafka.ssl_certfile)
            variable, path = (
                ("MONITOR_KAFKA_SSL_KEYFILE", kafka.ssl_keyfile)
                if bad_key
                else ("MONITOR_KAFKA_SSL_CERTFILE", kafka.ssl_certfile)
            )
            assert path is not None
            raise _file_error(variable, path, e) from None
    context.check_hostname = kafka.ssl_check_hostname
    return context


def check_security(kafka: KafkaSettings) -> None:
    """Refuse, in one line naming the variables, security settings that cannot work together: TLS files without a
    TLS protocol, a SASL mechanism without a SASL protocol, SASL without both username and password."""
    tls = kafka.security_protocol in ("SSL", "SASL_SSL")
    sasl = kafka.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")
    for attr, variable in _TLS_FILES:
        if getattr(kafka, attr) is not None and not tls:
            raise ConfigError(
                f"invalid setting {variable}: needs MONITOR_KAFKA_SECURITY_PROTOCOL=SSL or SASL_SSL (it is "
                f"{kafka.security_protocol})"
            )
    if kafka.sasl_mechanism and not sasl:
        raise ConfigError(
            f"invalid setting MONITOR_KAFKA_SASL_MECHANISM: needs MONITOR_KAFKA_SECURITY_PROTOCOL=SASL_SSL or "
            "SASL_PLAINTEXT "
            f"(it is {kafka.security_protocol})"
        )
    if sasl:
        missing = [
            v
            for v, given in (
                ("MONITOR_KAFKA_SASL_USERNAME", kafka.sasl_username),
                ("MONITOR_KAFKA_SASL_PASSWORD", kafka.sasl_password),
            )
            if not given
        ]
        if missing:
            mechanism = kafka.sasl_mechanism or "PLAIN"
            raise ConfigError(
                f"invalid setting MONITOR_KAFKA_SASL_MECHANISM: SASL {mechanism} needs MONITOR_KAFKA_SASL_USERNAME and "
                f"MONITOR_KAFKA_SASL_PASSWORD ({' and '.join(missing)} not set)"
            )


def client_kwargs(kafka: KafkaSettings) -> dict[str, Any]:
    """Connection and security options shared by consumer, producer and admin client; raises `ConfigError`
    (one line naming the variables) for security settings that cannot work."""
    check_security(kafka)
    kw: dict[str, Any] = {
        "bootstrap_servers": kafka.bootstrap_servers,
        "security_protocol": kafka.security_protocol,
        "client_id": "relevancy-monitor",
    }
    if kafka.security_protocol in ("SSL", "SASL_SSL"):
        kw["ssl_context"] = ssl_context(kafka)
    if kafka.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        kw["sasl_mechanism"] = kafka.sasl_mechanism or "PLAIN"
        kw["sasl_plain_username"] = kafka.sasl_username
        kw["sasl_plain_password"] = kafka.sasl_password.get_secret_value() if kafka.sasl_password else None
    return kw


def make_consumer(kafka: KafkaSettings) -> AIOKafkaConsumer:
    """A group consumer with manual commits; offsets are committed explicitly by the pipeline."""
    return AIOKafkaConsumer(
        group_id=kafka.group_id,
        enable_auto_commit=False,
        auto_offset_reset=kafka.auto_offset_reset,
        session_timeout_ms=kafka.session_timeout_ms,
        heartbeat_interval_ms=max(1000, kafka.session_timeout_ms // 3),
        max_poll_records=kafka.max_poll_records,
        **client_kwargs(kafka),
    )


def make_producer(kafka: KafkaSettings, **extra: Any) -> AIOKafkaProducer:
    """A producer that waits for all in-sync replicas (the dead-letter topic, the traffic generator)."""
    return AIOKafkaProducer(acks="all", **client_kwargs(kafka), **extra)


async def start_client(client: _Startable, kafka: KafkaSettings) -> None:
    """`client.start()` within `connect_timeout_s`, with a failure to reach the brokers raised as `KafkaUnavailable`.

    A failed start closes the client (no "Unclosed AIOKafka..." warning later) and holds back aiokafka's own log
    line about it: the one-line error says the same, with the reason found by `unreachable_reason`."""
    try:
        with _library_quiet():
            await asyncio.wait_for(client.start(), timeout=kafka.connect_timeout_s)
    except BaseException as e:
        await _close_quietly(client)
        if not isinstance(e, KafkaError | TimeoutError):
            raise  # a cancel or a bug, not the brokers
        raise _start_failure(e, kafka, await unreachable_reason(kafka)) from e


def _start_failure(e: KafkaError | TimeoutError, kafka: KafkaSettings, reason: str | None) -> KafkaUnavailable:
    """The operator's one line for a failed start, from the probe's `reason` rather than aiokafka's message (which
    ends in Python reprs such as `<AddressFamily.AF_UNSPEC: 0>`)."""
    servers, hint = kafka.bootstrap_servers, "(check MONITOR_KAFKA_BOOTSTRAP_SERVERS)"
    if not isinstance(e, TimeoutError | KafkaConnectionError):
        return KafkaUnavailable(f"Kafka error: {type(e).__name__}: {e}")
    if reason is not None and reason.startswith("TLS"):
        hint = "(check MONITOR_KAFKA_SSL_CAFILE, MONITOR_KAFKA_SSL_CERTFILE and MONITOR_KAFKA_SSL_CHECK_HOSTNAME)"
    elif reason is None and isinstance(e, TimeoutError):
        return KafkaUnavailable(
            f"no answer from Kafka at {servers} within {kafka.connect_timeout_s:g}s "
            "(check MONITOR_KAFKA_BOOTSTRAP_SERVERS, or raise MONITOR_KAFKA_CONNECT_TIMEOUT_S)"
        )
    elif reason is None:  # the port answers, but not as a Kafka broker speaking this protocol
        reason = "the server accepts connections but did not answer as a Kafka broker"
        hint = "(check the port in MONITOR_KAFKA_BOOTSTRAP_SERVERS and MONITOR_KAFKA_SECURITY_PROTOCOL)"
    return KafkaUnavailable(f"cannot reach Kafka at {servers}: {reason} {hint}")


class _LibraryQuiet(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return False


_QUIET_LOGGERS = ("aiokafka", "aiokafka.conn", "aiokafka.client")


@contextlib.contextmanager
def _library_quiet() -> Iterator[None]:
    """Hold back aiokafka's records while a client starts: a failure is reported once, by `start_client`."""
    quiet = _LibraryQuiet()
    loggers = [logging.getLogger(name) for name in _QUIET_LOGGERS]
    for logger in loggers:
        logger.addFilter(quiet)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(quiet)


async def _close_quietly(client: _Startable) -> None:
    # Consumers and producers stop; the admin client has close() instead, which its caller already calls.
    stop = getattr(client, "stop", None)
    if stop is not None:
        with contextlib.suppress(Exception):
            await stop()


async def unreachable_reason(kafka: KafkaSettings) -> str | None:
    """Why the first bootstrap server cannot be reached, in words (refused, not resolved, TLS), or None when a
    connection (and TLS handshake, with TLS) succeeds: aiokafka reports only "Unable to bootstrap", with reprs."""
    host, _, port = kafka.bootstrap_servers.split(",")[0].strip().rpartition(":")
    host, port = (host, port) if host else (port, "9092")
    tls = kafka.security_protocol in ("SSL", "SASL_SSL")
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(host.strip("[]"), int(port), ssl=ssl_context(kafka) if tls else None),
            timeout=min(5.0, kafka.connect_timeout_s),
        )
    except ssl.SSLCertVerificationError as e:
        return f"TLS handshake failed: certificate verify failed: {e.verify_message}"
    except ssl.SSLError as e:
        return f"TLS handshake failed: {e.reason or e}"
    except ConnectionRefusedError:
        return "connection refused"
    except socket.gaierror:
        return f"host name {host} not resolved"
    except TimeoutError:
        return "no answer"
    except OSError as e:
        return f"{host}:{port}: {e.strerror or type(e).__name__}"
    except ValueError:
        return None
    writer.close()
    return None


# Replicas of a created topic when none is configured: Kafka's usual 3, or every broker of a smaller cluster.
DEFAULT_REPLICATION = 3


async def ensure_dlq_topic(kafka: KafkaSettings) -> list[str]:
    """Create the dead-letter topic if it is missing (see `ensure_topics`); returns it if it was created."""
    return await ensure_topics(kafka, {kafka.dlq_topic: kafka.dlq_partitions})


async def ensure_topics(kafka: KafkaSettings, topics: dict[str, int]) -> list[str]:
    """Create missing topics ({name: partitions}); returns those created.

    Each is created with `kafka.dlq_replication_factor` replicas, by default min(3, brokers in the cluster) (aiokafka
    speaks CreateTopics v0-v3, which cannot ask for the broker's default with -1). The dead-letter topic
    (`kafka.dlq_topic`) always gets `kafka.dlq_partitions`, whatever `topics` says, and is skipped when
    `kafka.dlq_create` is false (MONITOR_DLQ_CREATE=false: clusters where the app may not create topics). A broker
    refusing to create a topic is a one-line `KafkaUnavailable` naming it."""
    wanted = {name: (kafka.dlq_partitions if name == kafka.dlq_topic else n) for name, n in topics.items()}
    if not kafka.dlq_create:
        wanted.pop(kafka.dlq_topic, None)
    if not wanted:
        return []  # no admin client at all: it may lack even the right to list topics
    admin = AIOKafkaAdminClient(**client_kwargs(kafka))
    try:
        await start_client(admin, kafka)
        existing = set(await admin.list_topics())
        names = [name for name in wanted if name not in existing]
        if not names:
            return []
        replication = kafka.dlq_replication_factor or min(
            DEFAULT_REPLICATION, len((await admin.describe_cluster())["brokers"]) or 1
        )
        missing = [NewTopic(name, num_partitions=wanted[name], replication_factor=replication) for name in names]
        try:
            response = await admin.create_topics(missing)
        except TopicAlreadyExistsError:
            return []  # a replica created it at the same time
        created = []
        for topic, code, *message in response.topic_errors:
            if code == 0:
                created.append(topic)
            elif code != TopicAlreadyExistsError.errno:  # else a replica created it at the same time
                error = for_code(code)
                detail = f": {message[0]}" if message and message[0] else ""
                hint = " (or create it and set MONITOR_DLQ_CREATE=false)" if topic == kafka.dlq_topic else ""
                raise KafkaUnavailable(
                    f"Kafka refused to create topic {topic} with {wanted[topic]} partitions x {replication} replicas: "
                    f"{error.__name__}{detail}{hint}"
                )
        return created
    finally:
        await admin.close()
