"""The judging guards' settings slices: flow control (`FlowSettings`: concurrency, rate limits, the circuit, batching
and commits), the spend budget and freshness governor (`BudgetSettings`) and the shadow judge (`ShadowSettings`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings

from monitor.judges.settings import ProviderName
from schemas.settings import MONITOR_SLICE, HttpUrl


class FlowSettings(BaseSettings):
    """The flow slice of the settings: how judging is bounded and how finished work is delivered. Env:
    MONITOR_<field>."""

    model_config = MONITOR_SLICE

    judge_concurrency: int = Field(
        8, ge=1, le=1024, description="most judge calls in flight at once (halved under 429s, grown back one at a time)"
    )
    judge_timeout_s: float = Field(
        150.0, gt=0, description="deadline for one judge call of an event, its API retries included"
    )
    judge_concurrency_floor: int = Field(1, ge=1, description="adaptive concurrency never goes below this under 429s")
    judge_requests_per_minute: float | None = Field(
        None,
        gt=0,
        description="client-side cap on judge requests per minute for the whole consumer group (each replica takes "
        "the share of its partitions)",
    )
    judge_tokens_per_minute: float | None = Field(
        None,
        gt=0,
        description="client-side cap on estimated judge input tokens per minute for the whole consumer group (each "
        "replica takes the share of its partitions)",
    )
    judge_event_attempts: int = Field(
        2, ge=1, le=10, description="judge calls per event on transient failure before an error row"
    )
    breaker_threshold: int = Field(5, ge=1, description="consecutive transient judge failures that open the circuit")
    breaker_cooldown_s: float = Field(
        2.0, gt=0, description="first wait before probing an open circuit (doubles, capped)"
    )
    breaker_max_cooldown_s: float = Field(60.0, gt=0, description="longest wait between probes")
    lag_check_s: float = Field(5.0, gt=0, description="how often consumer lag is measured (metrics and freshness)")
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

    @field_validator("judge_concurrency_floor")
    @classmethod
    def _floor_within_concurrency(cls, value: int, info: ValidationInfo) -> int:
        ceiling = info.data.get("judge_concurrency")
        if ceiling is not None and value > ceiling:
            raise ValueError(f"must not exceed MONITOR_JUDGE_CONCURRENCY ({ceiling})")
        return value

    @field_validator("resume_in_flight")
    @classmethod
    def _resume_below_cap(cls, value: int | None, info: ValidationInfo) -> int | None:
        cap = info.data.get("max_in_flight")
        if value is not None and cap is not None and value >= cap:
            raise ValueError(f"must be below MONITOR_MAX_IN_FLIGHT ({cap})")
        return value

    @property
    def resume_at(self) -> int:
        """Consumption resumes at or below this many events in flight (default: half the cap)."""
        return self.max_in_flight // 2 if self.resume_in_flight is None else self.resume_in_flight


class BudgetSettings(BaseSettings):
    """The cost slice of the settings: spend caps, the freshness governor, spend sync, verdict cache, traffic.
    Env: MONITOR_<setting>."""

    model_config = MONITOR_SLICE

    usd_per_hour: float | None = Field(
        None,
        gt=0,
        validation_alias="budget_usd_per_hour",
        description="cap on estimated judge spend per clock hour (USD), all replicas together",
    )
    usd_per_day: float | None = Field(
        None,
        gt=0,
        validation_alias="budget_usd_per_day",
        description="cap on estimated judge spend per UTC day (USD), all replicas together",
    )
    requests_per_hour: float | None = Field(
        None,
        gt=0,
        validation_alias="budget_requests_per_hour",
        description="cap on judge calls per clock hour, all replicas together",
    )
    requests_per_day: float | None = Field(
        None,
        gt=0,
        validation_alias="budget_requests_per_day",
        description="cap on judge calls per UTC day, all replicas together",
    )
    tokens_per_hour: float | None = Field(
        None,
        gt=0,
        validation_alias="budget_tokens_per_hour",
        description="cap on judge tokens per clock hour, all replicas together",
    )
    tokens_per_day: float | None = Field(
        None,
        gt=0,
        validation_alias="budget_tokens_per_day",
        description="cap on judge tokens per UTC day, all replicas together",
    )
    soft_limit: float = Field(
        0.8,
        gt=0,
        le=1,
        validation_alias="budget_soft_limit",
        description="share of a cap where the sampling rate starts to fall",
    )
    sync_s: float = Field(
        30.0,
        gt=0,
        validation_alias="budget_sync_s",
        description="how often spend is re-read from the store (all replicas)",
    )
    freshness_max_lag: int | None = Field(
        100_000,
        ge=1,
        description="consumer lag (records) above which the sampling rate halves every MONITOR_LAG_CHECK_S",
    )
    freshness_min_factor: float = Field(
        0.01, gt=0, le=1, description="lowest share of the sampling rate kept under pressure"
    )
    cache_max_entries: int = Field(10_000, ge=0, description="verdict cache size (0 disables)")
    cache_ttl_s: float = Field(3600.0, gt=0, description="how long a cached verdict is reused")
    traffic_flush_s: float = Field(10.0, gt=0, description="how often per-segment traffic counts are written")


class ShadowSettings(BaseSettings):
    """The shadow slice of the settings: the method (None: off), its provider, endpoint, key and model (None: the
    primary's) and the share of the primary's judged events it judges too. Env: MONITOR_<setting>."""

    model_config = MONITOR_SLICE

    provider: ProviderName | None = Field(
        None,
        validation_alias="shadow_judge_provider",
        description="provider of an LLM shadow judge (see MONITOR_JUDGE_PROVIDER), so a cheap local model can shadow "
        "the primary or the other way round; another provider needs MONITOR_SHADOW_JUDGE_MODEL",
        json_schema_extra={"shown_default": "the primary's"},
    )
    base_url: HttpUrl = Field(
        None,
        validation_alias="shadow_judge_base_url",
        description="endpoint of the shadow judge's provider (see MONITOR_JUDGE_BASE_URL)",
        json_schema_extra={"shown_type": "http(s)://…", "shown_default": "the primary's, for the same provider"},
    )
    api_key: SecretStr | None = Field(
        None,
        validation_alias="shadow_judge_api_key",
        description="API key of the shadow judge's provider (environment only)",
        json_schema_extra={"shown_default": "the primary's, for the same provider"},
    )

    model: str | None = Field(
        None,
        min_length=1,
        validation_alias="shadow_judge_model",
        description="model of an LLM shadow judge",
        json_schema_extra={"shown_default": "the primary's, `MONITOR_JUDGE_MODEL`"},
    )
    method: Literal["lexical", "rubric", "statements"] | None = Field(
        None,
        validation_alias="shadow_judge",
        description="a second judge for a sub-sample of the judged events, to compare with `relevancy-monitor compare` "
        "(unset: none); its rows "
        "sit beside the primary's under its own judge_id with sample_rule `shadow:…`, within the same budget, rate "
        "limits, concurrency and circuit",
    )
    sample_rate: float = Field(
        0.05,
        ge=0.0,
        le=1.0,
        validation_alias="shadow_sample_rate",
        description="share of the events the primary judges that the shadow judge judges too (a salted hash of "
        "MONITOR_SAMPLE_KEY: the same "
        "events on every replica and replay)",
    )

    @field_validator("method")
    @classmethod
    def _model_of_a_shadow(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None and info.data.get("model") is not None:
            raise ValueError("unset, but MONITOR_SHADOW_JUDGE_MODEL is set: name the shadow judge it is the model of")
        return value
