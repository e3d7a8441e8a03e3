"""The redaction slice of the settings: MONITOR_REDACT and MONITOR_REDACT_*."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator
from pydantic_settings import BaseSettings, NoDecode

from schemas.errors import ConfigError
from schemas.settings import MONITOR_SLICE, CommaSeparated, parse_json, split_csv

# Regions whose national phone formats (no +country code) are recognised; numbers written with +country code are
# recognised for every region.
DEFAULT_PHONE_REGIONS: tuple[str, ...] = ("US", "GB", "DE", "FR")


class RedactionSettings(BaseSettings):
    """How text is redacted before the judge and the store: whether at all, the user's own patterns (kind name to
    regular expression), values never redacted, and the regions of national phone formats. Env: MONITOR_<setting>."""

    model_config = MONITOR_SLICE

    # Read once, by `monitor.config.Settings`: with redact false, the settings carry no redaction slice at all.
    redact: bool = Field(
        True, description="replace personal data with typed placeholders before the judge and the store see the text"
    )
    patterns: Annotated[dict[str, str], NoDecode, BeforeValidator(parse_json)] = Field(
        default_factory=dict,
        validation_alias="redact_patterns",
        description='extra kinds to redact, as JSON {"KIND": "regular expression"}; the placeholder is [KIND]',
    )
    allow: CommaSeparated = Field(
        (),
        validation_alias="redact_allow",
        description="values never redacted (exact, case-insensitive), comma-separated or a JSON list",
    )
    phone_regions: CommaSeparated = Field(
        DEFAULT_PHONE_REGIONS,
        validation_alias="redact_phone_regions",
        description="regions (ISO 3166 codes) whose national phone formats are recognised, comma-separated; +country "
        "numbers always are",
    )

    @field_validator("allow", mode="before")
    @classmethod
    def _allow_list(cls, value: Any) -> Any:
        if isinstance(value, str) and value.lstrip().startswith("["):
            return parse_json(value)
        return split_csv(value)

    @field_validator("phone_regions", mode="before")
    @classmethod
    def _regions_csv(cls, value: Any) -> Any:
        return [region.upper() for region in split_csv(value)] if isinstance(value, str) else value

    @field_validator("patterns")
    @classmethod
    def _patterns_compile(cls, value: dict[str, str]) -> dict[str, str]:
        from monitor.privacy.custom import check_patterns

        try:
            check_patterns(value)
        except ConfigError as e:  # a ValueError here gets the env var's name in front, like every other setting
            raise ValueError(str(e)) from None
        return value

    @field_validator("phone_regions")
    @classmethod
    def _regions_known(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        from monitor.privacy.recognizers import check_phone_regions

        try:
            check_phone_regions(value)
        except ConfigError as e:
            raise ValueError(str(e)) from None
        return value
