"""The store slice of the settings: MONITOR_CLICKHOUSE_*, the text policy, retention and migration."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings

from monitor.store.urls import migrates_itself, normalize_url
from schemas.settings import MONITOR_SLICE, ReadableFile

DEFAULT_CLICKHOUSE_URL = f"chdb://{Path('.relevancy-monitor/chdb').absolute()}"

_IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
_BOOLEAN_WORDS = frozenset({"true", "false", "1", "0", "yes", "no", "on", "off"})


class StoreSettings(BaseSettings):
    """Where rows go, how to connect and authenticate (servers), whether rows carry the conversation text, the
    cluster of the DDL and whether `run` migrates the schema itself. Env: MONITOR_<setting>."""

    model_config = MONITOR_SLICE

    url: str = Field(
        DEFAULT_CLICKHOUSE_URL,
        validation_alias="clickhouse_url",
        description="the store: chdb:///abs/dir or chdb:rel/dir (embedded, relative to the working directory) or http(s)://user:pass@host:8123",
        json_schema_extra={
            "shown_type": "chdb:… or http(s)://…",
            "shown_default": "`chdb://<cwd>/.relevancy-monitor/chdb`",
        },
    )
    database: str = Field(
        "relevancy",
        pattern=_IDENTIFIER,
        validation_alias="clickhouse_database",
        description="database of every table; unqualified names in `sql` resolve in it",
    )
    table: str = Field(
        "relevancy_scores",
        pattern=_IDENTIFIER,
        validation_alias="clickhouse_table",
        description="the scores table (`{table}` in `sql` queries)",
    )
    user: str | None = Field(
        None, min_length=1, validation_alias="clickhouse_user", description="ClickHouse user (over one in the URL)"
    )
    password: SecretStr | None = Field(
        None,
        validation_alias="clickhouse_password",
        description="ClickHouse password (over one in the URL; environment only, never a flag)",
    )
    ca_file: ReadableFile = Field(
        None,
        validation_alias="clickhouse_ca_file",
        description="PEM file of the CA that signed the ClickHouse server's certificate (https)",
    )
    verify: bool = Field(
        True, validation_alias="clickhouse_verify", description="verify the ClickHouse server's certificate (https)"
    )
    cluster: str | None = Field(
        None,
        pattern=_IDENTIFIER,
        validation_alias="clickhouse_cluster",
        description="create the schema ON CLUSTER this cluster, with Replicated engines",
    )
    auto_migrate: bool | None = Field(
        None,
        description="`run` applies pending schema migrations itself; otherwise it stops on a schema that is behind, "
        "asking for `migrate`",
        json_schema_extra={"shown_default": "`true` for chdb:, `false` for servers"},
    )
    store_text: Literal["redacted", "none", "full"] = Field(
        "redacted",
        description="text kept in each row: redacted (as the judge saw it), none (scores, verdicts, ids) or full (as "
        "received)",
    )
    retention_days: int | None = Field(
        None,
        ge=0,
        le=36500,
        description="days rows are kept in the scores, traffic, rollup and canary tables, by event or run time (0: "
        "forever; unset: TTLs kept)",
    )
    text_retention_days: int = Field(
        0,
        ge=0,
        le=36500,
        description="days the text columns of a row are kept before they are emptied (0: as long as the row)",
    )

    @field_validator("url")
    @classmethod
    def _clickhouse_url(cls, value: str) -> str:
        if not value.startswith(("chdb:", "http://", "https://")):
            raise ValueError("must start with chdb:, http:// or https://")
        return normalize_url(value)  # relative chdb paths made absolute, as errors and the start-up log show them

    @field_validator("store_text", mode="before")
    @classmethod
    def _text_policy(cls, value: Any) -> Any:
        # The old boolean meant "verbatim or nothing"; guessing which policy it maps to could store personal data.
        if isinstance(value, bool) or (isinstance(value, str) and value.strip().lower() in _BOOLEAN_WORDS):
            raise ValueError(
                "is now redacted, none or full (true/false are no longer accepted: full was the old true, none the old "
                "false)"
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

    @property
    def auto_migrates(self) -> bool:
        """Whether `run` applies pending migrations itself: `auto_migrate`, by default only for the embedded store."""
        return migrates_itself(self.url, self.auto_migrate)
