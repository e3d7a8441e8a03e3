"""The settings of `relevancy-monitor alerts`: ALERTS_* variables or the flags of the same names."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas.durations import parse_duration
from schemas.settings import check_unknown_env, http_url, load_model, variables

ALERTS_PREFIX = "ALERTS_"


class AlertSettings(BaseSettings):
    """Settings of `relevancy-monitor alerts`. Env: ALERTS_<NAME> (MONITOR_* stays the monitor's own); the
    ClickHouse connection comes from `monitor.config.Settings`. Read only by the commands that use them."""

    model_config = SettingsConfigDict(env_prefix="ALERTS_", extra="forbid", validate_default=True)

    rules: Path | None = Field(
        None, description="rules YAML file", json_schema_extra={"shown_default": "the shipped default rules"}
    )
    traffic_table: str = Field(
        "traffic_counts",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="table of consumed and sampled events per minute, in the database (coverage and upstream rules)",
    )
    interval: Annotated[timedelta, BeforeValidator(parse_duration)] = Field(
        timedelta(minutes=1), description="time between rounds (30s, 1m, 5m)"
    )
    webhook_url: str | None = Field(
        None,
        description="generic JSON webhook",
        json_schema_extra={"shown_type": "http(s)://…", "holds_credential": True},
    )
    slack_webhook_url: str | None = Field(
        None,
        description="Slack-compatible incoming webhook",
        json_schema_extra={"shown_type": "http(s)://…", "holds_credential": True},
    )
    alertmanager_url: str | None = Field(
        None,
        description="Alertmanager base URL; alerts go to /api/v2/alerts",
        json_schema_extra={"shown_type": "http(s)://…"},
    )
    generator_url: str = Field(
        "", description="link sent as generatorURL (a dashboard)", json_schema_extra={"shown_type": "http(s)://…"}
    )
    ui_url: str | None = Field(
        None,
        description="public base URL of `relevancy-monitor ui` (may end in a path prefix); when set, every "
        "notification links to its alert page, Alertmanager's generatorURL too unless ALERTS_GENERATOR_URL is set",
        json_schema_extra={"shown_type": "http(s)://…"},
    )
    notify_timeout_s: float = Field(
        5.0,
        gt=0,
        description="seconds per HTTP attempt of a notification (two retries on 429, 5xx and connection errors)",
    )
    replica_id: str = Field(
        "",
        description="name of this replica in the lease table",
        json_schema_extra={"shown_default": "`<host>:<pid>:<random>`"},
    )
    metrics_port: int = Field(
        0, ge=0, le=65535, description="Prometheus /metrics, /healthz and /readyz port of the evaluator (0 disables)"
    )
    canary_interval: timedelta = Field(
        timedelta(hours=1),
        description="how often `alerts run` re-scores the canary's labelled pairs with the live judge (the "
        "MONITOR_JUDGE* settings and "
        "API key, as `run`), to tell a judge that drifted from a product that got worse; each run judges every pair "
        "(an LLM judge: one "
        "call each, see docs/alerting.md for the cost); 0 or off: no canary",
        json_schema_extra={"shown_type": "duration (`30m`, `1h`), or `0` / `off`"},
    )
    canary_file: Path | None = Field(
        None,
        description="labelled pairs the canary re-scores: JSON lines with question, answer (or response), label 0–4 "
        "and optional id and "
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

    @field_validator("webhook_url", "slack_webhook_url", "alertmanager_url", "generator_url", "ui_url")
    @classmethod
    def _urls(cls, value: str | None) -> str | None:
        return http_url(value)


def load_alert_settings(**overrides: Any) -> AlertSettings:
    """Alert settings from ALERTS_* with explicit overrides (CLI flags); raises `ConfigError` naming the variable."""
    check_unknown_env(
        ALERTS_PREFIX, (v for n, f in AlertSettings.model_fields.items() for v in variables(ALERTS_PREFIX, n, f))
    )
    return load_model(AlertSettings, ALERTS_PREFIX, overrides)
