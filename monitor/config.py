"""Settings: every one from an env var prefixed MONITOR_ or the matching CLI flag (flags win)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

DEFAULT_CLICKHOUSE_URL = f"chdb://{Path('.relevancy-monitor/chdb').absolute()}"


class ConfigError(Exception):
    """A setting is missing or invalid; the message is one line naming the setting."""


def _split_csv(value: Any) -> Any:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class Settings(BaseSettings):
    """All settings of the monitor. Env: MONITOR_<NAME>; CLI: --<name-with-dashes>."""

    model_config = SettingsConfigDict(env_prefix="MONITOR_", extra="forbid", validate_default=True)

    # Kafka
    kafka_bootstrap_servers: str = Field("127.0.0.1:9092", description="Kafka bootstrap servers, host:port[,host:port]")
    kafka_topics: Annotated[list[str], NoDecode] = Field(["conversations"], min_length=1, description="topics to consume, comma-separated")
    kafka_group_id: str = Field("relevancy-monitor", min_length=1, description="consumer group id")
    kafka_auto_offset_reset: Literal["earliest", "latest"] = Field("earliest", description="where a new group starts")
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    kafka_sasl_username: str | None = None
    kafka_sasl_password: SecretStr | None = None
    kafka_session_timeout_ms: int = Field(10_000, ge=1000, description="group session timeout")
    kafka_max_poll_records: int = Field(500, ge=1, description="records per fetch call")
    dlq_topic: str = Field("relevancy-monitor.dlq", min_length=1, description="dead-letter topic for events that cannot be judged")
    max_event_bytes: int = Field(1_000_000, ge=1024, description="larger record values are dead-lettered")

    # ClickHouse
    clickhouse_url: str = Field(DEFAULT_CLICKHOUSE_URL, description="chdb:///dir (embedded) or http(s)://user:pass@host:8123")
    clickhouse_database: str = Field("relevancy", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    clickhouse_table: str = Field("relevancy_scores", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    store_text: bool = Field(True, description="store the question and response text in each row")

    # Judge
    judge: Literal["lexical", "rubric", "statements"] = Field("lexical", description="judge method")
    judge_concurrency: int = Field(8, ge=1, le=1024, description="judge calls in flight at once")
    judge_timeout_s: float = Field(60.0, gt=0, description="deadline for one judged event, retries included")

    # Sampling
    sample_rate: float = Field(1.0, ge=0.0, le=1.0, description="share of conversations judged")
    sample_key: Literal["conversation_id", "event_id"] = Field("conversation_id", description="what the sampling hash is over")

    # Flow and delivery
    max_in_flight: int = Field(2000, ge=2, description="events fetched and not yet finished; consumption pauses at this cap")
    resume_in_flight: int | None = Field(None, ge=0, description="consumption resumes at or below this (default: half the cap)")
    batch_max_rows: int = Field(1000, ge=1, description="rows per ClickHouse insert")
    batch_max_seconds: float = Field(1.0, gt=0, description="longest a row waits before its batch is written")
    commit_interval_s: float = Field(1.0, gt=0, description="how often finished offsets are committed")
    shutdown_grace_s: float = Field(20.0, ge=0, description="drain budget on SIGTERM before exiting")

    # Operations
    metrics_port: int = Field(9108, ge=0, le=65535, description="Prometheus /metrics port (0 disables)")
    log_format: Literal["auto", "json", "console"] = Field("auto", description="auto: console on a TTY, JSON lines otherwise")
    log_level: Literal["debug", "info", "warning", "error"] = "info"

    @field_validator("kafka_topics", mode="before")
    @classmethod
    def _topics_csv(cls, value: Any) -> Any:
        return _split_csv(value)

    @model_validator(mode="after")
    def _checks(self) -> Settings:
        if self.resume_in_flight is None:
            self.resume_in_flight = self.max_in_flight // 2
        if self.resume_in_flight >= self.max_in_flight:
            raise ValueError(f"resume_in_flight ({self.resume_in_flight}) must be below max_in_flight ({self.max_in_flight})")
        if not self.clickhouse_url.startswith(("chdb:", "http://", "https://")):
            raise ValueError("clickhouse_url must start with chdb:, http:// or https://")
        if self.dlq_topic in self.kafka_topics:
            raise ValueError("dlq_topic must not be one of kafka_topics")
        return self

    def redacted(self) -> dict[str, Any]:
        """Settings for a start-up log line, with secrets and URL passwords hidden."""
        out = self.model_dump(mode="json")
        out["kafka_sasl_password"] = "***" if self.kafka_sasl_password else None
        out["clickhouse_url"] = _redact_url(self.clickhouse_url)
        return out


def _redact_url(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if sep and "@" in rest:
        creds, _, host = rest.rpartition("@")
        user = creds.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}"
    return url


def describe_error(err: ValidationError) -> str:
    """One line naming the first bad setting by its env var, e.g. `MONITOR_SAMPLE_RATE: ...`."""
    first = err.errors(include_url=False)[0]
    loc = [str(x) for x in first["loc"]]
    name = f"MONITOR_{loc[0].upper()}" if loc else "settings"
    msg = first["msg"].removeprefix("Value error, ")
    given = first.get("input")
    shown = f" (got {given!r})" if loc and given is not None and not isinstance(given, dict) and "password" not in loc[0] else ""
    return f"invalid setting {name}: {msg}{shown}"


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment with explicit overrides (CLI flags); raises `ConfigError`."""
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as e:
        raise ConfigError(describe_error(e)) from None
