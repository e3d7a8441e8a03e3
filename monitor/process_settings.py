"""The process slice of the settings: what the processes themselves read (their /metrics port and labels, logging,
store readiness, the cost a `replay` may spend unasked), carried by no component."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings

from schemas.settings import MONITOR_SLICE, CommaSeparated


class ProcessSettings(BaseSettings):
    """The settings of the process itself. Env: MONITOR_<field>."""

    model_config = MONITOR_SLICE

    replay_confirm_usd: float = Field(
        5.0,
        ge=0,
        description="`replay` asks for --yes before judging when its cost estimate is above this (USD; 0: always ask)",
    )
    metrics_port: int = Field(9108, ge=0, le=65535, description="port of /metrics, /healthz and /readyz (0 disables)")
    store_unready_after_s: float = Field(
        60.0, gt=0, description="inserts failing this long turn /readyz to 503 with the reason, until one succeeds"
    )
    metrics_max_apps: int = Field(
        100, ge=1, description="distinct `app` label values exported; later ones are reported as `other`"
    )
    metrics_apps: CommaSeparated = Field(
        (),
        description="allow-list of `app` label values, comma-separated (others are `other`); overrides the cap",
    )
    log_format: Literal["auto", "json", "console"] = Field(
        "auto", description="auto: console on a TTY, JSON lines otherwise"
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "info", description="lowest level logged (never conversation text, at any level)"
    )
