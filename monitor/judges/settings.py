"""The judge slice of the settings: the method, the provider and model, the API client, the prompt limits and the
prices. `JudgeSettings.check_provider` says in one line what a provider still needs, before any client starts."""

from __future__ import annotations

import importlib.util
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode

from monitor.judges.context_window import ContextWindow
from monitor.judges.pricing import DEFAULT_PRICES, ModelPrice, canonical_model
from schemas.errors import ConfigError
from schemas.settings import MONITOR_SLICE, HttpUrl, parse_json, with_also_env

JudgeMethod = Literal["lexical", "rubric", "statements"]
# Who serves the judge's model (one implementation per API family under `monitor.judges.providers`).
ProviderName = Literal["anthropic", "openai", "azure_openai", "bedrock", "vertex"]
# How the reply's structure is asked for, strongest first: the order `auto` tries them in.
StructuredMode = Literal["json_schema", "json_object", "tools", "prompt"]
StructuredOutput = Literal["auto", "json_schema", "json_object", "tools", "prompt"]
ScoreMode = Literal["level", "expected"]

# The package each cloud's client needs beyond the base install, and the extra that brings it.
_EXTRAS: dict[str, tuple[str, str]] = {"bedrock": ("botocore", "bedrock"), "vertex": ("google.auth", "vertex")}


class JudgeSettings(BaseSettings):
    """What the judges need: the method, the provider and model, the API client and the prompt limits. Env:
    MONITOR_<setting> (the API keys and the Anthropic base URL also as the SDKs read them: ANTHROPIC_API_KEY,
    OPENAI_API_KEY, AZURE_OPENAI_API_KEY, ANTHROPIC_BASE_URL)."""

    model_config = MONITOR_SLICE

    method: JudgeMethod = Field(
        "lexical",
        validation_alias="judge",
        description="judge method: rubric and statements are LLM judges (they need an API key), lexical an offline "
        "heuristic",
    )
    provider: ProviderName = Field(
        "anthropic",
        validation_alias="judge_provider",
        description="who serves the LLM judges' model: anthropic (the Anthropic API), openai (OpenAI and any "
        "OpenAI-compatible server: vLLM, Ollama, LiteLLM, …), azure_openai, bedrock (Claude on Amazon Bedrock) or "
        "vertex (Claude on Google Vertex AI)",
    )
    model: str = Field(
        "claude-haiku-5-5",
        min_length=1,
        validation_alias="judge_model",
        description="model for the rubric and statements judges, as the provider names it (Bedrock: "
        "us.anthropic.claude-…; Azure: the deployment); required for every provider but anthropic",
    )
    judge_base_url: HttpUrl = Field(
        None,
        validation_alias="judge_base_url",
        description="the judge's endpoint, handed to the provider's SDK as its base URL unchanged (e.g. "
        "http://vllm:8000/v1, https://NAME.openai.azure.com/openai/v1, a Bedrock runtime or Vertex endpoint, a "
        "proxy); wins over every SDK default and environment variable",
        json_schema_extra={"shown_type": "http(s)://…", "shown_default": "the provider SDK's"},
    )
    judge_api_key: SecretStr | None = Field(
        None,
        validation_alias="judge_api_key",
        description="API key of the LLM judges for any provider (environment only); unset: the provider's own "
        "variable (ANTHROPIC_API_KEY, OPENAI_API_KEY, AZURE_OPENAI_API_KEY); for vertex an OAuth access token",
    )
    api_key: SecretStr | None = Field(
        None,
        validation_alias="anthropic_api_key",
        description="API key of the anthropic provider (environment only, never a flag); MONITOR_JUDGE_API_KEY wins",
        json_schema_extra={"also_env": "ANTHROPIC_API_KEY"},
    )
    openai_api_key: SecretStr | None = Field(
        None,
        validation_alias="openai_api_key",
        description="API key of the openai provider (environment only); MONITOR_JUDGE_API_KEY wins; a local server "
        "without auth needs none",
        json_schema_extra={"also_env": "OPENAI_API_KEY"},
    )
    azure_openai_api_key: SecretStr | None = Field(
        None,
        validation_alias="azure_openai_api_key",
        description="API key of the azure_openai provider (environment only); MONITOR_JUDGE_API_KEY wins",
        json_schema_extra={"also_env": "AZURE_OPENAI_API_KEY"},
    )
    base_url: HttpUrl = Field(
        None,
        validation_alias="anthropic_base_url",
        description="Messages API base URL of the anthropic provider; MONITOR_JUDGE_BASE_URL wins",
        json_schema_extra={
            "shown_type": "http(s)://…",
            "shown_default": "the SDK's",
            "also_env": "ANTHROPIC_BASE_URL",
        },
    )
    region: str | None = Field(
        None,
        min_length=1,
        validation_alias="judge_region",
        description="the cloud region of the bedrock (e.g. us-east-1) or vertex (e.g. us-east5) provider",
        json_schema_extra={"shown_default": "the SDK's (AWS_REGION; CLOUD_ML_REGION)"},
    )
    project: str | None = Field(
        None,
        min_length=1,
        validation_alias="judge_project",
        description="the Google Cloud project of the vertex provider",
        json_schema_extra={"shown_default": "ANTHROPIC_VERTEX_PROJECT_ID"},
    )
    structured_output: StructuredOutput = Field(
        "auto",
        validation_alias="judge_structured_output",
        description="how the reply's JSON structure is asked for: auto tries json_schema, json_object, tools, then "
        "prompt on the first request and keeps the first that gives a valid reply; every reply is validated whatever "
        "the mode",
    )
    score: ScoreMode = Field(
        "level",
        validation_alias="judge_score",
        description="the rubric judge's score: level (the integer level / 4) or expected (the probability-weighted "
        "level from the provider's log-probabilities, with a confidence; openai providers only)",
    )
    server_usd_per_hour: float | None = Field(
        None,
        ge=0,
        validation_alias="judge_server_usd_per_hour",
        description="a self-hosted judge's server cost per hour, spread over MONITOR_JUDGE_SERVER_CALLS_PER_HOUR calls "
        "(replaces token prices)",
        json_schema_extra={"shown_default": "priced by tokens"},
    )
    server_calls_per_hour: float = Field(
        3600.0,
        gt=0,
        validation_alias="judge_server_calls_per_hour",
        description="the calls an hour the self-hosted server's cost is spread over",
    )
    request_timeout_s: float = Field(
        20.0, gt=0, validation_alias="judge_request_timeout_s", description="timeout of one judge API request"
    )
    max_retries: int = Field(
        3,
        ge=0,
        le=10,
        validation_alias="judge_max_retries",
        description="retries of a judge call on transient errors (429, 5xx, timeouts); an invalid reply is sent back "
        "once, whatever this says",
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
    context_turns: int = Field(
        6,
        ge=0,
        le=100,
        validation_alias="judge_context_turns",
        description="earlier messages of the conversation the LLM judges read as context, newest kept (0: none, the "
        "judged question and answer alone)",
    )
    context_max_chars: int = Field(
        8_000,
        ge=200,
        validation_alias="judge_context_max_chars",
        description="the context's text at most: the oldest turns are dropped first, then the oldest kept one is "
        "cut with a marker",
    )
    context_system: bool = Field(
        True,
        validation_alias="judge_context_system",
        description="give the judge the assistant's system instructions (a chat event's system message, OTel's "
        "gen_ai.system_instructions) when the event has them, capped at MONITOR_JUDGE_CONTEXT_MAX_CHARS",
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
        """The configured model's price (by its name, else its canonical name: a Bedrock or Vertex id of a Claude
        model is priced as the model), a self-hosted server's per-call price, or None when unknown (its rows then
        carry no cost)."""
        if self.server_usd_per_hour is not None:
            return ModelPrice.per_call(self.server_usd_per_hour / self.server_calls_per_hour)
        return self.prices.get(self.model) or self.prices.get(canonical_model(self.model))

    @property
    def effective_base_url(self) -> str | None:
        """The endpoint the provider's SDK is given: MONITOR_JUDGE_BASE_URL, else (anthropic only) the Anthropic one."""
        if self.judge_base_url is not None:
            return self.judge_base_url
        return self.base_url if self.provider == "anthropic" else None

    @property
    def effective_api_key(self) -> SecretStr | None:
        """MONITOR_JUDGE_API_KEY, else the provider's own variable (None for bedrock: the AWS credential chain)."""
        if self.judge_api_key is not None:
            return self.judge_api_key
        own = {"anthropic": self.api_key, "openai": self.openai_api_key, "azure_openai": self.azure_openai_api_key}
        return own.get(self.provider)

    def context_window(self) -> ContextWindow:
        """The slice that bounds what of a conversation the judge reads."""
        return ContextWindow(self.context_turns, self.context_max_chars, self.context_system)

    def identity(self) -> dict[str, Any]:
        """What beyond the prompt and limits makes this judge another judge: its provider (not for anthropic, so
        the judge ids of deployments from before providers existed stay the same) and an expected-level score."""
        out: dict[str, Any] = {}
        if self.provider != "anthropic":
            out["provider"] = self.provider
        if self.score == "expected":
            out["score"] = "expected"
        return out

    def check_provider(self, *, estimate_only: bool = False) -> None:
        """Raises `ConfigError` (one line naming the setting) when the provider cannot be reached as configured: no
        model, no endpoint or key, a missing extra. `estimate_only`: a dry run that sends nothing needs no key."""
        p = self.provider
        if p != "anthropic" and "model" not in self.model_fields_set:
            raise ConfigError(
                f"MONITOR_JUDGE_PROVIDER={p} needs MONITOR_JUDGE_MODEL (the default {self.model} is an Anthropic API "
                "model id)"
            )
        if p == "azure_openai" and self.judge_base_url is None:
            raise ConfigError(
                "MONITOR_JUDGE_PROVIDER=azure_openai needs MONITOR_JUDGE_BASE_URL, e.g. "
                "https://NAME.openai.azure.com/openai/v1"
            )
        # Vertex needs google-auth only for application default credentials: an access token is sent as it is.
        needs_extra = p == "bedrock" or (p == "vertex" and self.judge_api_key is None)
        if needs_extra and not _installed(_EXTRAS[p][0]):
            module, extra = _EXTRAS[p]
            raise ConfigError(
                f"MONITOR_JUDGE_PROVIDER={p} needs {module}: pip install 'relevancy-monitor[{extra}]' (the image has "
                "it)" + (", or MONITOR_JUDGE_API_KEY set to an access token" if p == "vertex" else "")
            )
        if self.score == "expected" and p not in ("openai", "azure_openai"):
            raise ConfigError(
                f"invalid setting MONITOR_JUDGE_SCORE: expected needs log-probabilities, which the {p} provider does "
                "not return (openai and azure_openai do)"
            )
        if estimate_only or self.effective_api_key is not None or p in ("bedrock", "vertex"):
            return
        if p == "anthropic":
            raise ConfigError(
                "the anthropic judge needs a key: set MONITOR_JUDGE_API_KEY (or MONITOR_ANTHROPIC_API_KEY, "
                "ANTHROPIC_API_KEY)"
            )
        if p == "openai" and self.judge_base_url is None:
            raise ConfigError(
                "MONITOR_JUDGE_PROVIDER=openai needs MONITOR_JUDGE_API_KEY (or OPENAI_API_KEY) for OpenAI, or "
                "MONITOR_JUDGE_BASE_URL for a local server"
            )
        if p == "azure_openai":
            raise ConfigError("the azure_openai judge needs a key: set MONITOR_JUDGE_API_KEY (or AZURE_OPENAI_API_KEY)")


def _installed(module: str) -> bool:
    """Whether `module` (dotted) can be imported, without importing it; a missing parent package is "no"."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False
