"""Settings: every one from an env var prefixed MONITOR_ or the matching CLI flag (flags win).

Each component's settings are a pydantic-settings class in its own module, its slice (`consumers.settings.
KafkaSettings`, `monitor.store.settings.StoreSettings`, ...), which declares each of its settings once: the setting's
name is the field's alias or else its name (`schemas.settings.setting_name`), its variable MONITOR_<NAME>, its flag
--<name>. `Settings` composes the slices and checks what spans two of them; `load_settings` routes the flags to the
slices by setting name. Whether the judge needs an API key is checked where the judge is built
(`monitor.judges.factory`), so read-only commands never need one."""

from __future__ import annotations

import os
import typing
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from consumers.settings import KafkaSettings, SamplingSettings
from monitor.feedback.settings import FeedbackSettings
from monitor.judges.settings import JudgeSettings
from monitor.judging.settings import BudgetSettings, FlowSettings, ShadowSettings
from monitor.privacy.settings import RedactionSettings
from monitor.process_settings import ProcessSettings
from monitor.publish.settings import PublishSettings
from monitor.review.settings import ReviewSettings
from monitor.store.settings import StoreSettings
from monitor.store.urls import redact_url
from schemas.errors import ConfigError
from schemas.settings import (
    MONITOR_PREFIX,
    check_unknown_env,
    describe_error,
    load_model,
    setting_conflict,
    setting_name,
    variables,
)


class Settings(BaseModel):
    """All settings of the monitor, a slice per component (in the order of the configuration reference)."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    # None: MONITOR_REDACT=false, nothing is redacted (the one place MONITOR_REDACT is read).
    redaction: RedactionSettings | None = Field(default_factory=RedactionSettings)
    judge: JudgeSettings = Field(default_factory=JudgeSettings)
    shadow: ShadowSettings = Field(default_factory=ShadowSettings)
    sampling: SamplingSettings = Field(default_factory=SamplingSettings)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    flow: FlowSettings = Field(default_factory=FlowSettings)
    publish: PublishSettings = Field(default_factory=PublishSettings)
    process: ProcessSettings = Field(default_factory=ProcessSettings)
    review: ReviewSettings = Field(default_factory=ReviewSettings)
    feedback: FeedbackSettings = Field(default_factory=FeedbackSettings)

    @field_validator("redaction")
    @classmethod
    def _redact_or_not(cls, value: RedactionSettings | None) -> RedactionSettings | None:
        return value if value is not None and value.redact else None

    @field_validator("shadow")
    @classmethod
    def _shadow_is_another_judge(cls, shadow: ShadowSettings, info: ValidationInfo) -> ShadowSettings:
        primary: JudgeSettings | None = info.data.get("judge")
        if primary is None or shadow.method is None:
            return shadow
        provider = shadow.provider or primary.provider
        if provider != primary.provider and shadow.model is None and shadow.method != "lexical":
            raise setting_conflict(
                "shadow_judge_provider",
                provider,
                f"differs from the primary's ({primary.provider}): set MONITOR_SHADOW_JUDGE_MODEL to a model it serves",
            )
        if shadow.method != primary.method or provider != primary.provider:
            return shadow
        # Same method, provider and model is the same judge_id (the other parameters are shared): its rows would
        # replace the primary's in the table instead of sitting beside them. The lexical judge has no model to tell
        # them apart.
        if shadow.method == "lexical" or (shadow.model or primary.model) == primary.model:
            shown = "" if shadow.method == "lexical" else f" with model {primary.model}"
            raise setting_conflict(
                "shadow_judge",
                shadow.method,
                f"is the primary judge itself (MONITOR_JUDGE={primary.method}{shown}): choose another method or "
                "MONITOR_SHADOW_JUDGE_MODEL",
            )
        return shadow

    @property
    def shadow_judge(self) -> JudgeSettings | None:
        """What the shadow judge needs (the primary's judge settings with its own method, provider, endpoint, key and
        model), or None: off. Another provider takes nothing of the primary's endpoint or key."""
        if self.shadow.method is None:
            return None
        update: dict[str, Any] = {"method": self.shadow.method, "model": self.shadow.model or self.judge.model}
        if self.shadow.provider is not None and self.shadow.provider != self.judge.provider:
            update.update(provider=self.shadow.provider, judge_base_url=None, judge_api_key=None)
        if self.shadow.base_url is not None:
            update["judge_base_url"] = self.shadow.base_url
        if self.shadow.api_key is not None:
            update["judge_api_key"] = self.shadow.api_key
        return self.judge.model_copy(update=update)

    def redacted(self, changed_only: bool = False) -> dict[str, Any]:
        """Settings by setting name, with secrets and URL passwords hidden; `changed_only`: those that differ from
        their defaults (the start-up log line: the defaults are in the configuration reference)."""
        parts = {name: part for name in SLICES if (part := getattr(self, name)) is not None}
        dumps = {name: part.model_dump(mode="json") for name, part in parts.items()}
        defaults = {name: type(part).model_construct().model_dump(mode="json") for name, part in parts.items()}
        out: dict[str, Any] = {"redact": False}  # overwritten by the redaction slice, when there is one
        for name, s in SETTINGS.items():
            if s.slice not in dumps or (changed_only and dumps[s.slice][s.attr] == defaults[s.slice][s.attr]):
                continue
            value = dumps[s.slice][s.attr]
            out[name] = ("***" if value else None) if s.secret else value
        out.pop("judge_prices", None)
        if "clickhouse_url" in out:
            out["clickhouse_url"] = redact_url(self.store.url)
        if changed_only and self.redaction is not None:
            out.pop("redact")
        return out


def _slice_class(field: FieldInfo) -> type[BaseSettings]:
    return next(
        t
        for t in (field.annotation, *typing.get_args(field.annotation))
        if isinstance(t, type) and issubclass(t, BaseSettings)
    )


@dataclass(frozen=True, slots=True)
class Setting:
    """One MONITOR_* setting: the slice of `Settings` carrying it, the slice's attribute and field."""

    slice: str
    attr: str
    field: FieldInfo

    @property
    def secret(self) -> bool:
        """Whether it holds a secret (never a flag, never logged)."""
        return "SecretStr" in str(self.field.annotation)


# MONITOR_* variables of a room's own slice, checked by the one command that reads them: `ui` (monitor/ui/settings.py).
ROOM_PREFIXES = ("MONITOR_UI_",)

# Every MONITOR_* setting by name, in the order of the slices and of their fields.
SLICES: dict[str, type[BaseSettings]] = {name: _slice_class(f) for name, f in Settings.model_fields.items()}
SETTINGS: dict[str, Setting] = {
    setting_name(attr, field): Setting(slice_name, attr, field)
    for slice_name, model in SLICES.items()
    for attr, field in model.model_fields.items()
}
FIELDS: dict[str, FieldInfo] = {name: s.field for name, s in SETTINGS.items()}


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment with explicit overrides by setting name (CLI flags: `kafka_topics=...`), each
    routed to its slice; raises `ConfigError` naming the variable."""
    check_unknown_env(
        MONITOR_PREFIX,
        [
            *(v for name, field in FIELDS.items() for v in variables(MONITOR_PREFIX, name, field)),
            *(v for v in os.environ if v.startswith(ROOM_PREFIXES)),
        ],
    )
    given: dict[str, dict[str, Any]] = defaultdict(dict)
    for name, value in overrides.items():
        if name not in SETTINGS:
            raise TypeError(f"load_settings() got {name!r}, which is no setting")
        given[SETTINGS[name].slice][name] = value
    slices = {name: load_model(model, MONITOR_PREFIX, given[name]) for name, model in SLICES.items()}
    try:
        return Settings.model_validate(slices)
    except ValidationError as e:
        raise ConfigError(describe_error(e, MONITOR_PREFIX, FIELDS)) from None
