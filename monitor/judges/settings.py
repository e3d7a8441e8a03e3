"""The judge slice of the settings: the method, the model, the API client, the prompt limits and the prices."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode

from monitor.judges.pricing import DEFAULT_PRICES, ModelPrice
from schemas.settings import MONITOR_SLICE, HttpUrl, parse_json, with_also_env

JudgeMethod = Literal["lexical", "rubric", "statements"]


class JudgeSettings(BaseSettings):
    """What the judges need: the method, the model, the API client and the prompt limits. Env: MONITOR_<setting>
    (the API key and base URL also as the SDK reads them, ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL)."""

    model_config = MONITOR_SLICE

    method: JudgeMethod = Field(
        "lexical",
        validation_alias="judge",
        description="judge method: rubric and statements are LLM judges (they need an API key), lexical an offline "
        "heuristic",
    )
    model: str = Field(
        "claude-haiku-5-5",
        min_length=1,
        validation_alias="judge_model",
        description="model for the rubric and statements judges",
    )
    api_key: SecretStr | None = Field(
        None,
        validation_alias="anthropic_api_key",
        description="API key of the LLM judges (environment only, never a flag)",
        json_schema_extra={"also_env": "ANTHROPIC_API_KEY"},
    )
    base_url: HttpUrl = Field(
        None,
        validation_alias="anthropic_base_url",
        description="Messages API base URL",
        json_schema_extra={
            "shown_type": "http(s)://…",
            "shown_default": "the SDK's",
            "also_env": "ANTHROPIC_BASE_URL",
        },
    )
    request_timeout_s: float = Field(
        20.0, gt=0, validation_alias="judge_request_timeout_s", description="timeout of one judge API request"
    )
    max_retries: int = Field(
        3,
        ge=0,
        le=10,
        validation_alias="judge_max_retries",
        description="retries of a judge call on transient errors or invalid replies",
    )
    max_tokens: int = Field(
        1024, ge=64, validation_alias="judge_max_tokens", description="max output tokens of one judge reply"
    )
    max_input_chars: int = Field(
        20_000,
        ge=200,
        validation_alias="judge_max_input_chars",
        description="question/response text beyond this is truncated with a marker",
    )
    statements_strict_threshold: float | None = Field(
        None, ge=0.0, le=1.0, description="strict mode of the statements judge: a score below this becomes 0"
    )
    prices: Annotated[dict[str, ModelPrice], NoDecode, BeforeValidator(parse_json)] = Field(
        default_factory=lambda: dict(DEFAULT_PRICES),
        validation_alias="judge_prices",
        description='USD per million tokens per model, as JSON {"model": {"input": …, "output": …, "cache_read": …, '
        '"cache_write": …}}, '
        "merged over the defaults",
        json_schema_extra={"shown_default": "list prices of the Claude Haiku, Sonnet and Opus 4.5 and 5.5 models"},
    )

    @model_validator(mode="before")
    @classmethod
    def _sdk_variables(cls, data: Any) -> Any:
        return with_also_env(cls.model_fields, data)

    @field_validator("prices", mode="after")
    @classmethod
    def _merge_prices(cls, value: dict[str, ModelPrice]) -> dict[str, ModelPrice]:
        return {**DEFAULT_PRICES, **value}

    @property
    def price(self) -> ModelPrice | None:
        """The configured model's price, or None when unknown (its rows then carry no cost)."""
        return self.prices.get(self.model)
