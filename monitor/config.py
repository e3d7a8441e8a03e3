"""Settings: every one from an env var prefixed MONITOR_ or the matching CLI flag (flags win).

`Settings` holds the flat, validated MONITOR_* names operators depend on; each component receives only its typed
slice (`kafka`, `judge_client`, `flow`, `budget`, `sampling`, `store`), built by the properties below.

Every check is a field validator (cross-field ones read the fields defined before them), so each error has the
field as its location and `describe_error` can name the environment variable. Whether the judge needs an API key
is checked where the judge is built (`monitor.judges.factory`), so read-only commands never need one."""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AliasChoices, BeforeValidator, Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError

from consumers.clients import KafkaSettings
from consumers.sampling import SamplingSettings
from monitor.alerts.durations import parse_duration
from monitor.judges.pricing import DEFAULT_PRICES, ModelPrice
from monitor.judges.settings import JudgeSettings
from monitor.judging.budget import BudgetSettings
from monitor.judging.flow import FlowSettings
from monitor.judging.shadow import ShadowSettings
from monitor.privacy.settings import DEFAULT_PHONE_REGIONS, RedactionSettings
from monitor.store.settings import StoreSettings
from monitor.store.urls import normalize_url
from schemas.errors import ConfigError

S = TypeVar("S", bound=BaseSettings)

DEFAULT_CLICKHOUSE_URL = f"chdb://{Path('.relevancy-monitor/chdb').absolute()}"


_BOOLEAN_WORDS = frozenset({"true", "false", "1", "0", "yes", "no", "on", "off"})


def _split_csv(value: Any) -> Any:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _json(value: Any) -> Any:
    # Parsed here rather than by pydantic-settings, whose parse error is a traceback that names no variable.
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as e:
            raise ValueError(f"not valid JSON ({e})") from None
    return value


def _http_url(value: str | None) -> str | None:
    if value and not value.startswith(("http://", "https://")):
        raise ValueError("must be an http:// or https:// URL")
    return value


def _readable(value: Path | None) -> Path | None:
    if value is not None:
        if not value.is_file():
            raise ValueError(f"no such file {value.absolute()}")
        if not os.access(value, os.R_OK):
            raise ValueError(f"cannot read {value.absolute()} (permissions)")
    return value


def _host_ports(value: str) -> str:
    for server in value.split(","):
        host, colon, port = server.strip().rpartition(":")
        if not server.strip() or (colon and (not host or not port.isdigit() or not 0 < int(port) < 65536)):
            raise ValueError(f"expected host:port[,host:port], {server.strip()!r} is not host:port")
    return value


class Settings(BaseSettings):
    """All settings of the monitor. Env: MONITOR_<NAME>; CLI: --<name-with-dashes>."""

    model_config = SettingsConfigDict(
        env_prefix="MONITOR_", extra="forbid", validate_default=True, populate_by_name=True
    )

    # Kafka
    kafka_bootstrap_servers: str = Field(
        "127.0.0.1:9092",
        description="the Kafka brokers to connect to first",
        json_schema_extra={"shown_type": "host:port[,host:port…]"},
    )
    kafka_topics: Annotated[list[str], NoDecode] = Field(
        ["conversations"], min_length=1, description="topics to consume, comma-separated"
    )
    kafka_group_id: str = Field(
        "relevancy-monitor", min_length=1, description="consumer group id (the replicas of one deployment share it)"
    )
    kafka_auto_offset_reset: Literal["earliest", "latest"] = Field(
        "earliest",
        description="where a group without committed offsets starts: the oldest retained record, or only records produced from now on",
    )
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT",
        description="how every Kafka client connects: SSL is TLS; SASL_* authenticate with user and password (over TLS for SASL_SSL)",
    )
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        None,
        description="SASL mechanism; only with a SASL_* protocol",
        json_schema_extra={"shown_default": "`PLAIN` with a SASL_* protocol"},
    )
    kafka_sasl_username: str | None = Field(
        None, description="SASL user name; a SASL_* protocol needs it and MONITOR_KAFKA_SASL_PASSWORD"
    )
    kafka_sasl_password: SecretStr | None = Field(
        None, description="SASL password (environment only, never a flag: argv is visible in `ps`)"
    )
    kafka_ssl_cafile: Path | None = Field(
        None,
        description="PEM file of the CA that signed the brokers' certificates; SSL or SASL_SSL only",
        json_schema_extra={"shown_default": "the system's CAs"},
    )
    kafka_ssl_certfile: Path | None = Field(
        None, description="PEM client certificate for mutual TLS (may hold the key too); SSL or SASL_SSL only"
    )
    kafka_ssl_keyfile: Path | None = Field(
        None, description="PEM private key of MONITOR_KAFKA_SSL_CERTFILE, if not in that file"
    )
    kafka_ssl_check_hostname: bool = Field(
        True, description="check that the broker's certificate names the host connected to"
    )
    kafka_session_timeout_ms: int = Field(
        10_000,
        ge=1000,
        description="consumer group session timeout: heartbeats every third of it; on a rebalance, revoked partitions get half of it to finish",
    )
    kafka_max_poll_records: int = Field(500, ge=1, description="most records taken from Kafka in one fetch")
    kafka_connect_timeout_s: float = Field(
        60.0, gt=0, description="start-up gives up (one line, exit 1) when the brokers do not answer within this"
    )
    dlq_topic: str = Field(
        "relevancy-monitor.dlq", min_length=1, description="dead-letter topic for events that cannot be judged"
    )
    dlq_create: bool = Field(
        True,
        description="create the dead-letter topic at start if it is missing (false where the app may not create topics)",
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
    max_future_skew_s: float | None = Field(
        3600.0, gt=0, description="event times further ahead of the monitor's clock are dead-lettered"
    )

    # ClickHouse
    clickhouse_url: str = Field(
        DEFAULT_CLICKHOUSE_URL,
        description="the store: chdb:///abs/dir or chdb:rel/dir (embedded, relative to the working directory) or http(s)://user:pass@host:8123",
        json_schema_extra={
            "shown_type": "chdb:… or http(s)://…",
            "shown_default": "`chdb://<cwd>/.relevancy-monitor/chdb`",
        },
    )
    clickhouse_database: str = Field(
        "relevancy",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="database of every table; unqualified names in `sql` resolve in it",
    )
    clickhouse_table: str = Field(
        "relevancy_scores",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="the scores table (`{table}` in `sql` queries)",
    )
    clickhouse_user: str | None = Field(None, min_length=1, description="ClickHouse user (over one in the URL)")
    clickhouse_password: SecretStr | None = Field(
        None, description="ClickHouse password (over one in the URL; environment only, never a flag)"
    )
    clickhouse_ca_file: Path | None = Field(
        None, description="PEM file of the CA that signed the ClickHouse server's certificate (https)"
    )
    clickhouse_verify: bool = Field(True, description="verify the ClickHouse server's certificate (https)")
    clickhouse_cluster: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="create the schema ON CLUSTER this cluster, with Replicated engines",
    )
    auto_migrate: bool | None = Field(
        None,
        description="`run` applies pending schema migrations itself; otherwise it stops on a schema that is behind, asking for `migrate`",
        json_schema_extra={"shown_default": "`true` for chdb:, `false` for servers"},
    )
    store_text: Literal["redacted", "none", "full"] = Field(
        "redacted",
        description="text kept in each row: redacted (as the judge saw it), none (scores, verdicts, ids) or full (as received)",
    )
    retention_days: int | None = Field(
        None,
        ge=0,
        le=36500,
        description="days rows are kept in the scores, traffic, rollup and canary tables, by event or run time (0: forever; unset: TTLs kept)",
    )
    text_retention_days: int = Field(
        0,
        ge=0,
        le=36500,
        description="days the text columns of a row are kept before they are emptied (0: as long as the row)",
    )

    # Privacy
    redact: bool = Field(
        True, description="replace personal data with typed placeholders before the judge and the store see the text"
    )
    redact_patterns: Annotated[dict[str, str], NoDecode, BeforeValidator(_json)] = Field(
        default_factory=dict,
        description='extra kinds to redact, as JSON {"KIND": "regular expression"}; the placeholder is [KIND]',
    )
    redact_allow: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="values never redacted (exact, case-insensitive), comma-separated or a JSON list",
    )
    redact_phone_regions: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: list(DEFAULT_PHONE_REGIONS),
        description="regions (ISO 3166 codes) whose national phone formats are recognised, comma-separated; +country numbers always are",
    )

    # Judge
    judge: Literal["lexical", "rubric", "statements"] = Field(
        "lexical",
        description="judge method: rubric and statements are LLM judges (they need an API key), lexical an offline heuristic",
    )
    judge_concurrency: int = Field(
        8, ge=1, le=1024, description="most judge calls in flight at once (halved under 429s, grown back one at a time)"
    )
    judge_timeout_s: float = Field(
        150.0, gt=0, description="deadline for one judge call of an event, its API retries included"
    )
    judge_concurrency_floor: int = Field(1, ge=1, description="adaptive concurrency never goes below this under 429s")
    judge_requests_per_minute: float | None = Field(
        None, gt=0, description="client-side cap on judge requests per minute"
    )
    judge_tokens_per_minute: float | None = Field(
        None, gt=0, description="client-side cap on estimated judge input tokens per minute"
    )
    judge_event_attempts: int = Field(
        2, ge=1, le=10, description="judge calls per event on transient failure before an error row"
    )
    breaker_threshold: int = Field(5, ge=1, description="consecutive transient judge failures that open the circuit")
    breaker_cooldown_s: float = Field(
        2.0, gt=0, description="first wait before probing an open circuit (doubles, capped)"
    )
    breaker_max_cooldown_s: float = Field(60.0, gt=0, description="longest wait between probes")
    judge_model: str = Field("claude-haiku-5-5", min_length=1, description="model for the rubric and statements judges")
    anthropic_api_key: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("MONITOR_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY", "anthropic_api_key"),
        description="API key of the LLM judges (environment only, never a flag)",
    )
    anthropic_base_url: str | None = Field(
        None,
        validation_alias=AliasChoices("MONITOR_ANTHROPIC_BASE_URL", "ANTHROPIC_BASE_URL", "anthropic_base_url"),
        description="Messages API base URL",
        json_schema_extra={"shown_type": "http(s)://…", "shown_default": "the SDK's"},
    )
    judge_request_timeout_s: float = Field(20.0, gt=0, description="timeout of one judge API request")
    judge_max_retries: int = Field(
        3, ge=0, le=10, description="retries of a judge call on transient errors or invalid replies"
    )
    judge_max_tokens: int = Field(1024, ge=64, description="max output tokens of one judge reply")
    judge_max_input_chars: int = Field(
        20_000, ge=200, description="question/response text beyond this is truncated with a marker"
    )
    statements_strict_threshold: float | None = Field(
        None, ge=0.0, le=1.0, description="strict mode of the statements judge: a score below this becomes 0"
    )
    judge_prices: Annotated[dict[str, ModelPrice], NoDecode, BeforeValidator(_json)] = Field(
        default_factory=lambda: dict(DEFAULT_PRICES),
        description='USD per million tokens per model, as JSON {"model": {"input": …, "output": …, "cache_read": …, "cache_write": …}}, '
        "merged over the defaults",
        json_schema_extra={"shown_default": "list prices of the Claude Haiku, Sonnet and Opus 4.5 and 5.5 models"},
    )
    shadow_judge_model: str | None = Field(
        None,
        min_length=1,
        description="model of an LLM shadow judge",
        json_schema_extra={"shown_default": "the primary's, `MONITOR_JUDGE_MODEL`"},
    )
    shadow_judge: Literal["lexical", "rubric", "statements"] | None = Field(
        None,
        description="a second judge for a sub-sample of the judged events, to compare with `relevancy-monitor compare` (unset: none); its rows "
        "sit beside the primary's under its own judge_id with sample_rule `shadow:…`, within the same budget, rate limits, concurrency and circuit",
    )
    shadow_sample_rate: float = Field(
        0.05,
        ge=0.0,
        le=1.0,
        description="share of the events the primary judges that the shadow judge judges too (a salted hash of MONITOR_SAMPLE_KEY: the same "
        "events on every replica and replay)",
    )

    # Sampling
    sample_rate: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="share of conversations (or events, see MONITOR_SAMPLE_KEY) judged where no sampling rule decides",
    )
    sample_key: Literal["conversation_id", "event_id"] = Field(
        "conversation_id",
        description="what the sampling hash is over: conversation_id judges all turns of a conversation or none",
    )

    sampling_file: Path | None = Field(
        None, description="YAML sampling rules (segment rates, always/never, minimum per segment)"
    )
    budget_usd_per_hour: float | None = Field(
        None, gt=0, description="cap on estimated judge spend per clock hour (USD), all replicas together"
    )
    budget_usd_per_day: float | None = Field(
        None, gt=0, description="cap on estimated judge spend per UTC day (USD), all replicas together"
    )
    budget_requests_per_hour: float | None = Field(
        None, gt=0, description="cap on judge calls per clock hour, all replicas together"
    )
    budget_requests_per_day: float | None = Field(
        None, gt=0, description="cap on judge calls per UTC day, all replicas together"
    )
    budget_tokens_per_hour: float | None = Field(
        None, gt=0, description="cap on judge tokens per clock hour, all replicas together"
    )
    budget_tokens_per_day: float | None = Field(
        None, gt=0, description="cap on judge tokens per UTC day, all replicas together"
    )
    budget_soft_limit: float = Field(
        0.8, gt=0, le=1, description="share of a cap where the sampling rate starts to fall"
    )
    budget_sync_s: float = Field(30.0, gt=0, description="how often spend is re-read from the store (all replicas)")
    freshness_max_lag: int | None = Field(
        100_000,
        ge=1,
        description="consumer lag (records) above which the sampling rate halves every MONITOR_LAG_CHECK_S",
    )
    lag_check_s: float = Field(5.0, gt=0, description="how often consumer lag is measured (metrics and freshness)")
    freshness_min_factor: float = Field(
        0.01, gt=0, le=1, description="lowest share of the sampling rate kept under pressure"
    )
    cache_max_entries: int = Field(10_000, ge=0, description="verdict cache size (0 disables)")
    cache_ttl_s: float = Field(3600.0, gt=0, description="how long a cached verdict is reused")
    traffic_flush_s: float = Field(10.0, gt=0, description="how often per-segment traffic counts are written")
    replay_confirm_usd: float = Field(
        5.0,
        ge=0,
        description="`replay` asks for --yes before judging when its cost estimate is above this (USD; 0: always ask)",
    )

    # Flow and delivery
    max_in_flight: int = Field(
        2000, ge=2, description="events fetched and not yet finished; consumption pauses at this cap"
    )
    resume_in_flight: int | None = Field(
        None,
        ge=0,
        description="consumption resumes at or below this many events in flight",
        json_schema_extra={"shown_default": "half of MONITOR_MAX_IN_FLIGHT"},
    )
    batch_max_rows: int = Field(1000, ge=1, description="rows per ClickHouse insert")
    batch_max_seconds: float = Field(1.0, gt=0, description="longest a row waits before its batch is written")
    commit_interval_s: float = Field(1.0, gt=0, description="how often finished offsets are committed")
    shutdown_grace_s: float = Field(20.0, ge=0, description="drain budget on SIGTERM before exiting")
    progress_log_s: float = Field(30.0, gt=0, description="how often `run` logs a one-line progress summary at info")

    # Operations
    metrics_port: int = Field(9108, ge=0, le=65535, description="port of /metrics, /healthz and /readyz (0 disables)")
    store_unready_after_s: float = Field(
        60.0, gt=0, description="inserts failing this long turn /readyz to 503 with the reason, until one succeeds"
    )
    metrics_max_apps: int = Field(
        100, ge=1, description="distinct `app` label values exported; later ones are reported as `other`"
    )
    metrics_apps: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="allow-list of `app` label values, comma-separated (others are `other`); overrides the cap",
    )
    log_format: Literal["auto", "json", "console"] = Field(
        "auto", description="auto: console on a TTY, JSON lines otherwise"
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "info", description="lowest level logged (never conversation text, at any level)"
    )

    @field_validator("store_text", mode="before")
    @classmethod
    def _text_policy(cls, value: Any) -> Any:
        # The old boolean meant "verbatim or nothing"; guessing which policy it maps to could store personal data.
        if isinstance(value, bool) or (isinstance(value, str) and value.strip().lower() in _BOOLEAN_WORDS):
            raise ValueError(
                "is now redacted, none or full (true/false are no longer accepted: full was the old true, none the old false)"
            )
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("text_retention_days")
    @classmethod
    def _text_within_rows(cls, value: int, info: ValidationInfo) -> int:
        rows = info.data.get("retention_days")
        if value and rows is None:
            # Retention is managed only when MONITOR_RETENTION_DAYS is set, so that a run without it never undoes a TTL.
            raise ValueError("needs MONITOR_RETENTION_DAYS as well (0 keeps rows forever)")
        if value and rows and value > rows:
            raise ValueError(f"is longer than MONITOR_RETENTION_DAYS ({rows}): text cannot outlive its row")
        return value

    @field_validator("redact_allow", mode="before")
    @classmethod
    def _allow_list(cls, value: Any) -> Any:
        if isinstance(value, str) and value.lstrip().startswith("["):
            return _json(value)
        return _split_csv(value)

    @field_validator("redact_phone_regions", mode="before")
    @classmethod
    def _regions_csv(cls, value: Any) -> Any:
        return [region.upper() for region in _split_csv(value)] if isinstance(value, str) else value

    @field_validator("redact_patterns")
    @classmethod
    def _patterns_compile(cls, value: dict[str, str]) -> dict[str, str]:
        from monitor.privacy.custom import check_patterns

        try:
            check_patterns(value)
        except ConfigError as e:  # a ValueError here gets the env var's name in front, like every other setting
            raise ValueError(str(e)) from None
        return value

    @field_validator("redact_phone_regions")
    @classmethod
    def _regions_known(cls, value: list[str]) -> list[str]:
        from monitor.privacy.recognizers import check_phone_regions

        try:
            check_phone_regions(value)
        except ConfigError as e:
            raise ValueError(str(e)) from None
        return value

    @field_validator("metrics_apps", mode="before")
    @classmethod
    def _apps_csv(cls, value: Any) -> Any:
        return _split_csv(value)

    @field_validator("kafka_topics", mode="before")
    @classmethod
    def _topics_csv(cls, value: Any) -> Any:
        return _split_csv(value)

    @field_validator("judge_prices", mode="after")
    @classmethod
    def _merge_prices(cls, value: dict[str, ModelPrice]) -> dict[str, ModelPrice]:
        return {**DEFAULT_PRICES, **value}

    @field_validator("kafka_bootstrap_servers")
    @classmethod
    def _servers(cls, value: str) -> str:
        return _host_ports(value)

    @field_validator("dlq_topic")
    @classmethod
    def _dlq_not_an_input(cls, value: str, info: ValidationInfo) -> str:
        if value in info.data.get("kafka_topics", ()):
            raise ValueError("must not be one of MONITOR_KAFKA_TOPICS")
        return value

    @field_validator("clickhouse_url")
    @classmethod
    def _clickhouse_url(cls, value: str) -> str:
        if not value.startswith(("chdb:", "http://", "https://")):
            raise ValueError("must start with chdb:, http:// or https://")
        return normalize_url(value)  # relative chdb paths made absolute, as errors and the start-up log show them

    @field_validator("kafka_ssl_cafile", "kafka_ssl_certfile", "kafka_ssl_keyfile", "clickhouse_ca_file")
    @classmethod
    def _readable_file(cls, value: Path | None) -> Path | None:
        # Checked here so a wrong path names its variable; the content is checked where the TLS context is built.
        return _readable(value)

    @field_validator("kafka_ssl_keyfile")
    @classmethod
    def _key_needs_cert(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is not None and info.data.get("kafka_ssl_certfile") is None:
            raise ValueError("needs MONITOR_KAFKA_SSL_CERTFILE (the certificate of this key)")
        return value

    @field_validator("judge_concurrency_floor")
    @classmethod
    def _floor_within_concurrency(cls, value: int, info: ValidationInfo) -> int:
        ceiling = info.data.get("judge_concurrency")
        if ceiling is not None and value > ceiling:
            raise ValueError(f"must not exceed MONITOR_JUDGE_CONCURRENCY ({ceiling})")
        return value

    @field_validator("anthropic_base_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        return _http_url(value)

    @field_validator("shadow_judge")
    @classmethod
    def _shadow_is_another_judge(cls, value: str | None, info: ValidationInfo) -> str | None:
        model = info.data.get("shadow_judge_model")
        if value is None:
            if model is not None:
                raise ValueError(
                    "unset, but MONITOR_SHADOW_JUDGE_MODEL is set: name the shadow judge it is the model of"
                )
            return value
        primary, primary_model = info.data.get("judge"), info.data.get("judge_model")
        # Same method and model is the same judge_id (the other parameters are shared): its rows would replace the
        # primary's in the table instead of sitting beside them. The lexical judge has no model to tell them apart.
        if value == primary and (value == "lexical" or (model or primary_model) == primary_model):
            shown = "" if value == "lexical" else f" with model {primary_model}"
            raise ValueError(
                f"is the primary judge itself (MONITOR_JUDGE={primary}{shown}): choose another method or MONITOR_SHADOW_JUDGE_MODEL"
            )
        return value

    @field_validator("resume_in_flight")
    @classmethod
    def _resume_below_cap(cls, value: int | None, info: ValidationInfo) -> int | None:
        cap = info.data.get("max_in_flight")
        if value is not None and cap is not None and value >= cap:
            raise ValueError(f"must be below MONITOR_MAX_IN_FLIGHT ({cap})")
        return value

    @property
    def kafka(self) -> KafkaSettings:
        """What the Kafka clients and the decoder need."""
        return KafkaSettings(
            bootstrap_servers=self.kafka_bootstrap_servers,
            topics=tuple(self.kafka_topics),
            group_id=self.kafka_group_id,
            auto_offset_reset=self.kafka_auto_offset_reset,
            security_protocol=self.kafka_security_protocol,
            sasl_mechanism=self.kafka_sasl_mechanism,
            sasl_username=self.kafka_sasl_username,
            sasl_password=self.kafka_sasl_password.get_secret_value() if self.kafka_sasl_password else None,
            ssl_cafile=self.kafka_ssl_cafile,
            ssl_certfile=self.kafka_ssl_certfile,
            ssl_keyfile=self.kafka_ssl_keyfile,
            ssl_check_hostname=self.kafka_ssl_check_hostname,
            session_timeout_ms=self.kafka_session_timeout_ms,
            max_poll_records=self.kafka_max_poll_records,
            dlq_topic=self.dlq_topic,
            dlq_create=self.dlq_create,
            dlq_partitions=self.dlq_partitions,
            dlq_replication_factor=self.dlq_replication_factor,
            max_event_bytes=self.max_event_bytes,
            connect_timeout_s=self.kafka_connect_timeout_s,
            max_future_skew_s=self.max_future_skew_s,
        )

    @property
    def judge_client(self) -> JudgeSettings:
        """What the judges need: method, model, API client and prompt limits."""
        return JudgeSettings(
            method=self.judge,
            model=self.judge_model,
            api_key=self.anthropic_api_key.get_secret_value() if self.anthropic_api_key else None,
            base_url=self.anthropic_base_url,
            request_timeout_s=self.judge_request_timeout_s,
            max_retries=self.judge_max_retries,
            max_tokens=self.judge_max_tokens,
            max_input_chars=self.judge_max_input_chars,
            statements_strict_threshold=self.statements_strict_threshold,
            prices=dict(self.judge_prices),
        )

    @property
    def shadow(self) -> ShadowSettings:
        """The shadow judge: which, its model (None: the primary's) and its share of the judged events."""
        return ShadowSettings(
            method=self.shadow_judge, model=self.shadow_judge_model, sample_rate=self.shadow_sample_rate
        )

    @property
    def shadow_judge_client(self) -> JudgeSettings | None:
        """What the shadow judge needs (the primary's client settings with its own method and model), or None: off."""
        if self.shadow_judge is None:
            return None
        return dataclasses.replace(
            self.judge_client, method=self.shadow_judge, model=self.shadow_judge_model or self.judge_model
        )

    @property
    def flow(self) -> FlowSettings:
        """How judging is bounded and finished work delivered."""
        return FlowSettings(
            judge_concurrency=self.judge_concurrency,
            judge_concurrency_floor=self.judge_concurrency_floor,
            judge_requests_per_minute=self.judge_requests_per_minute,
            judge_tokens_per_minute=self.judge_tokens_per_minute,
            judge_timeout_s=self.judge_timeout_s,
            judge_event_attempts=self.judge_event_attempts,
            breaker_threshold=self.breaker_threshold,
            breaker_cooldown_s=self.breaker_cooldown_s,
            breaker_max_cooldown_s=self.breaker_max_cooldown_s,
            max_in_flight=self.max_in_flight,
            resume_in_flight=self.resume_in_flight,
            batch_max_rows=self.batch_max_rows,
            batch_max_seconds=self.batch_max_seconds,
            commit_interval_s=self.commit_interval_s,
            shutdown_grace_s=self.shutdown_grace_s,
            lag_check_s=self.lag_check_s,
            progress_log_s=self.progress_log_s,
        )

    @property
    def budget(self) -> BudgetSettings:
        """Spend caps, freshness, spend sync, the verdict cache and traffic counts."""
        return BudgetSettings(
            usd_per_hour=self.budget_usd_per_hour,
            usd_per_day=self.budget_usd_per_day,
            requests_per_hour=self.budget_requests_per_hour,
            requests_per_day=self.budget_requests_per_day,
            tokens_per_hour=self.budget_tokens_per_hour,
            tokens_per_day=self.budget_tokens_per_day,
            soft_limit=self.budget_soft_limit,
            sync_s=self.budget_sync_s,
            freshness_max_lag=self.freshness_max_lag,
            freshness_min_factor=self.freshness_min_factor,
            cache_max_entries=self.cache_max_entries,
            cache_ttl_s=self.cache_ttl_s,
            traffic_flush_s=self.traffic_flush_s,
        )

    @property
    def sampling(self) -> SamplingSettings:
        """The base rate, the sampling key and the rules file."""
        return SamplingSettings(rate=self.sample_rate, key=self.sample_key, file=self.sampling_file)

    @property
    def store(self) -> StoreSettings:
        """Where rows are written, how to connect and authenticate, whether rows carry the text, and the schema's options."""
        return StoreSettings(
            url=self.clickhouse_url,
            database=self.clickhouse_database,
            table=self.clickhouse_table,
            store_text=self.store_text,
            retention_days=self.retention_days,
            text_retention_days=self.text_retention_days,
            user=self.clickhouse_user,
            password=self.clickhouse_password.get_secret_value() if self.clickhouse_password else None,
            ca_file=self.clickhouse_ca_file,
            verify=self.clickhouse_verify,
            cluster=self.clickhouse_cluster,
            auto_migrate=self.auto_migrate,
        )

    @property
    def redaction(self) -> RedactionSettings | None:
        """How text is redacted before the judge and the store; None: MONITOR_REDACT=false (the one place it is read)."""
        if not self.redact:
            return None
        return RedactionSettings(
            patterns=dict(self.redact_patterns),
            allow=tuple(self.redact_allow),
            phone_regions=tuple(self.redact_phone_regions),
        )

    @property
    def auto_migrates(self) -> bool:
        """Whether `run` applies pending migrations: MONITOR_AUTO_MIGRATE, or by default true for the embedded store
        (chdb:) and false for a server, where the operator runs `relevancy-monitor migrate`."""
        return self.store.auto_migrates

    def redacted(self) -> dict[str, Any]:
        """Settings for a start-up log line, with secrets and URL passwords hidden."""
        out = self.model_dump(mode="json")
        out["kafka_sasl_password"] = "***" if self.kafka_sasl_password else None
        out["anthropic_api_key"] = "***" if self.anthropic_api_key else None
        out["clickhouse_password"] = "***" if self.clickhouse_password else None
        out.pop("judge_prices", None)
        out["clickhouse_url"] = _redact_url(self.clickhouse_url)
        return out


def _redact_url(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if sep and "@" in rest:
        creds, _, host = rest.rpartition("@")
        user = creds.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}"
    return url


class AlertSettings(BaseSettings):
    """Settings of `relevancy-monitor alerts`. Env: ALERTS_<NAME> (MONITOR_* stays the monitor's own); the
    ClickHouse connection comes from `Settings`. Read only by the commands that use them."""

    model_config = SettingsConfigDict(env_prefix="ALERTS_", extra="forbid", validate_default=True)

    rules: Path | None = Field(
        None, description="rules YAML", json_schema_extra={"shown_default": "the shipped default rules"}
    )
    traffic_table: str = Field(
        "traffic_counts", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="traffic table in the database"
    )
    interval: Annotated[timedelta, BeforeValidator(parse_duration)] = Field(
        timedelta(minutes=1), description="time between rounds"
    )
    webhook_url: str | None = Field(
        None, description="generic JSON webhook", json_schema_extra={"shown_type": "http(s)://…"}
    )
    slack_webhook_url: str | None = Field(
        None, description="Slack-compatible incoming webhook", json_schema_extra={"shown_type": "http(s)://…"}
    )
    alertmanager_url: str | None = Field(
        None,
        description="Alertmanager base URL; alerts go to /api/v2/alerts",
        json_schema_extra={"shown_type": "http(s)://…"},
    )
    generator_url: str = Field(
        "", description="link sent as generatorURL (a dashboard)", json_schema_extra={"shown_type": "http(s)://…"}
    )
    notify_timeout_s: float = Field(5.0, gt=0, description="seconds per HTTP attempt of a notification")
    replica_id: str = Field(
        "",
        description="name of this replica in the lease table",
        json_schema_extra={"shown_default": "`<host>:<pid>:<random>`"},
    )
    metrics_port: int = Field(0, ge=0, le=65535, description="Prometheus /metrics port of the evaluator (0 disables)")
    canary_interval: timedelta = Field(
        timedelta(hours=1),
        description="how often `alerts run` re-scores the canary's labelled pairs with the live judge (the MONITOR_JUDGE* settings and "
        "API key, as `run`), to tell a judge that drifted from a product that got worse; each run judges every pair (an LLM judge: one "
        "call each, see docs/alerting.md for the cost); 0 or off: no canary",
        json_schema_extra={"shown_type": "duration (`30m`, `1h`), or `0` / `off`"},
    )
    canary_file: Path | None = Field(
        None,
        description="labelled pairs the canary re-scores: JSON lines with question, answer (or response), label 0–4 and optional id and "
        "category, as `relevancy-monitor calibrate --labels`",
        json_schema_extra={"shown_default": "the shipped golden set (107 pairs)"},
    )

    @field_validator("interval")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value.total_seconds() <= 0:
            raise ValueError("must be a positive duration")
        return value

    @field_validator("canary_interval", mode="before")
    @classmethod
    def _canary_off(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() in ("0", "off"):
            return timedelta(0)
        return parse_duration(value)

    @field_validator("canary_interval")
    @classmethod
    def _canary_not_too_often(cls, value: timedelta) -> timedelta:
        # Every run judges the whole set: with an LLM judge, a run every few seconds is a bill, not a canary.
        if value.total_seconds() < 0 or 0 < value.total_seconds() < 60:
            raise ValueError("must be 0 (off) or at least 1m: every run judges the whole labelled set")
        return value

    @field_validator("rules", "canary_file")
    @classmethod
    def _readable(cls, value: Path | None) -> Path | None:
        # Checked here so a wrong path names ALERTS_RULES (ALERTS_CANARY_FILE); the content is checked when it is read.
        if value is not None and not value.is_file():
            raise ValueError(f"no such file {value.absolute()}")
        return value

    @property
    def canary_on(self) -> bool:
        """Whether `alerts run` runs the canary."""
        return self.canary_interval.total_seconds() > 0

    @field_validator("webhook_url", "slack_webhook_url", "alertmanager_url", "generator_url")
    @classmethod
    def _urls(cls, value: str | None) -> str | None:
        return _http_url(value)


def _aliases(model: type[BaseSettings], name: str) -> list[str]:
    alias = model.model_fields[name].validation_alias
    return [str(a) for a in alias.choices] if isinstance(alias, AliasChoices) else []


def _field_of(model: type[BaseSettings], key: str) -> str | None:
    # An error's location is the field name, or the alias the value came in by (lower-cased by pydantic-settings).
    for name in model.model_fields:
        if key.lower() in {name, *(a.lower() for a in _aliases(model, name))}:
            return name
    return None


def env_var(model: type[BaseSettings], prefix: str, key: str) -> str:
    """The environment variable of a setting, given its field name or one of its aliases; of several variables
    (`MONITOR_ANTHROPIC_API_KEY`, `ANTHROPIC_API_KEY`), the one that is set."""
    name = _field_of(model, key)
    if name is None:
        return f"{prefix}{key.upper()}"
    names = [a for a in _aliases(model, name) if a.isupper()] or [f"{prefix}{name.upper()}"]
    return next((n for n in names if n in os.environ), names[0])


def _is_secret(model: type[BaseSettings], key: str) -> bool:
    name = _field_of(model, key)
    return name is None or "SecretStr" in str(model.model_fields[name].annotation)


def describe_error(err: ValidationError, prefix: str = "MONITOR_", model: type[BaseSettings] | None = None) -> str:
    """One line naming the first bad setting by its env var, e.g. `invalid setting MONITOR_SAMPLE_RATE: ...`."""
    model = model or (Settings if prefix == "MONITOR_" else AlertSettings)
    first = err.errors(include_url=False)[0]
    loc = [str(x) for x in first["loc"]]
    msg = first["msg"].removeprefix("Value error, ")
    if not loc:
        return f"invalid settings: {msg}"
    given = first.get("input")
    shown = (
        f" (got {given!r})"
        if given is not None and not isinstance(given, dict | list) and not _is_secret(model, loc[0])
        else ""
    )
    return f"invalid setting {env_var(model, prefix, loc[0])}: {msg}{shown}"


def _check_unknown_env(prefix: str, model: type[BaseSettings]) -> None:
    # A misspelt variable would otherwise be ignored silently and the default used.
    known = {f"{prefix}{name.upper()}" for name in model.model_fields}
    for var in sorted(os.environ):
        if var.startswith(prefix) and var not in known:
            close = difflib.get_close_matches(var, known, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"unknown setting {var}{hint}")


def _load(model: type[S], prefix: str, overrides: dict[str, Any]) -> S:
    _check_unknown_env(prefix, model)
    try:
        return model(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as e:
        raise ConfigError(describe_error(e, prefix, model)) from None
    except SettingsError as e:  # a value pydantic-settings could not decode; its message quotes the field
        field = str(e).partition('field "')[2].partition('"')[0]
        raise ConfigError(f"invalid setting {env_var(model, prefix, field)}: cannot be parsed") from None


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment with explicit overrides (CLI flags); raises `ConfigError`."""
    return _load(Settings, "MONITOR_", overrides)


def load_alert_settings(**overrides: Any) -> AlertSettings:
    """Alert settings from ALERTS_* with explicit overrides (CLI flags); raises `ConfigError` naming the variable."""
    return _load(AlertSettings, "ALERTS_", overrides)
