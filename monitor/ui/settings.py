"""The settings of `relevancy-monitor ui`: MONITOR_UI_* variables or the flags of the same names."""

from __future__ import annotations

from typing import Any

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas.settings import check_unknown_env, load_model, variables

UI_PREFIX = "MONITOR_UI_"


class UiSettings(BaseSettings):
    """Settings of `relevancy-monitor ui`. Env: MONITOR_UI_<NAME>; the ClickHouse connection comes from
    `monitor.config.Settings`. Read only by the `ui` command."""

    model_config = SettingsConfigDict(env_prefix=UI_PREFIX, extra="forbid", validate_default=True)

    host: str = Field(
        "127.0.0.1",
        min_length=1,
        description="address the web UI listens on; the default serves this machine only (put a team's UI behind an "
        "authenticating proxy)",
    )
    port: int = Field(8787, ge=0, le=65535, description="port of the web UI (0: any free port, printed at start)")
    user_header: str | None = Field(
        None,
        min_length=1,
        pattern=r"^[A-Za-z0-9-]+$",
        description="request header holding the reviewer's identity, set by a trusted authenticating proxy (e.g. "
        "X-Forwarded-Email); unset: labelling needs `ui --reviewer NAME`",
    )
    secret: SecretStr | None = Field(
        None,
        description="key that signs the CSRF tokens (set it when several replicas serve one UI); environment only",
        json_schema_extra={"shown_default": "a random key per process", "holds_credential": True},
    )
    page_size: int = Field(50, ge=1, le=1000, description="rows per page of the explore page")


def load_ui_settings(**overrides: Any) -> UiSettings:
    """UI settings from MONITOR_UI_* with explicit overrides (CLI flags); raises `ConfigError` naming the variable."""
    check_unknown_env(UI_PREFIX, (v for n, f in UiSettings.model_fields.items() for v in variables(UI_PREFIX, n, f)))
    return load_model(UiSettings, UI_PREFIX, overrides)
