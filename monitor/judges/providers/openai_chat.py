"""Chat Completions as a judge provider: OpenAI, Azure OpenAI (its v1 API, `https://NAME.openai.azure.com/openai/v1`,
with an `api-key` header) and every OpenAI-compatible server (vLLM, Ollama, LiteLLM, …) through the `openai` SDK.

Modes: `json_schema` (`response_format` with a strict schema), `json_object`, `tools` (one forced function) and
`prompt`. vLLM's `guided_*` keys are never sent: vLLM removed them in v0.12 and ignores unknown keys with HTTP 200,
so a client sending them would get unconstrained text back. Where log-probabilities are asked for
(`MONITOR_JUDGE_SCORE=expected`), the probabilities of the rubric's levels are read at the score's token."""

from __future__ import annotations

import functools
import math
import re
from typing import Any

import httpx2
import openai
from openai.types.chat import ChatCompletionFunctionToolParam
from pydantic import BaseModel

from monitor.backoff import retry_after_seconds
from monitor.judges.providers.base import FailureKind, JudgeRequest, ProviderReply, Tokens
from monitor.judges.settings import JudgeSettings, ProviderName, StructuredMode
from monitor.judges.structured_output import correction_text, schema_instructions
from schemas.errors import ProviderCallFailed

RETRYABLE_STATUS: dict[int, FailureKind] = {408: "request_timeout", 409: "request_timeout", 429: "rate_limited"}
TOP_LOGPROBS = 5  # the rubric has five levels
LEVELS = "01234"
NO_KEY = "no-key"  # a local server without auth still gets a bearer header from the SDK: a harmless placeholder
_SCORE_KEY = re.compile(r'"score"\s*:\s*')
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


class OpenAIChat:
    """Judge requests through Chat Completions (`settings.provider` openai or azure_openai)."""

    modes: tuple[StructuredMode, ...] = ("json_schema", "json_object", "tools", "prompt")
    marks_cache = False  # OpenAI and vLLM cache prefixes by themselves; nothing is marked
    known_mode: StructuredMode | None = None  # servers differ (vLLM, Ollama, DeepSeek, older models): `auto` probes

    def __init__(self, settings: JudgeSettings, http_client: httpx2.AsyncClient | None = None) -> None:
        self._name: ProviderName = settings.provider
        self._model = settings.model
        self._max_tokens = settings.max_tokens
        self._logprobs = settings.score == "expected"
        hosted = settings.provider == "azure_openai" or settings.effective_base_url is None
        # The hosted services take max_completion_tokens (reasoning models refuse max_tokens); other servers max_tokens.
        self._max_tokens_key = "max_completion_tokens" if hosted else "max_tokens"
        self._cache_key = settings.effective_base_url is None  # OpenAI's own service: a stable prompt_cache_key
        key = settings.effective_api_key
        secret = key.get_secret_value() if key is not None else NO_KEY
        headers = {"api-key": secret} if settings.provider == "azure_openai" else None
        self._client = openai.AsyncOpenAI(
            api_key=secret,
            base_url=settings.effective_base_url,
            timeout=settings.request_timeout_s,
            max_retries=0,
            default_headers=headers,
            http_client=http_client,
        )

    @property
    def name(self) -> ProviderName:
        """openai or azure_openai."""
        return self._name

    @property
    def model(self) -> str:
        """The model (Azure: the deployment name)."""
        return self._model

    def body(self, request: JudgeRequest, mode: StructuredMode) -> dict[str, Any]:
        """The Chat Completions request: the system prompt first (the automatic prefix cache keys on it), then the
        user turn (and the correction)."""
        described = mode in ("json_object", "prompt")
        system = f"{request.system}\n\n{schema_instructions(request.reply_model)}" if described else request.system
        tool = strict_tool(request.reply_model, request.schema_name)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": request.user},
        ]
        if request.correction is not None:
            messages.append({"role": "assistant", "content": request.correction.reply or "(empty)"})
            messages.append({"role": "user", "content": correction_text(request.correction.error)})
        body: dict[str, Any] = {"model": self._model, "messages": messages, self._max_tokens_key: self._max_tokens}
        if mode == "json_schema":
            schema = {"name": request.schema_name, "schema": tool["function"]["parameters"], "strict": True}
            body["response_format"] = {"type": "json_schema", "json_schema": schema}
        elif mode == "json_object":
            body["response_format"] = {"type": "json_object"}
        elif mode == "tools":
            body["tools"] = [tool]
            body["tool_choice"] = {"type": "function", "function": {"name": request.schema_name}}
        if self._logprobs and mode != "tools":  # a tool call's arguments carry no log-probabilities
            body["logprobs"] = True
            body["top_logprobs"] = TOP_LOGPROBS
        if self._cache_key:
            body["prompt_cache_key"] = f"relevancy-monitor-{request.schema_name}"
        return body

    async def send(self, request: JudgeRequest, mode: StructuredMode) -> ProviderReply:
        """One request; raises `ProviderCallFailed`."""
        try:
            completion = await self._client.chat.completions.create(**self.body(request, mode))
        except openai.APIError as e:
            raise classify(e) from e
        return reply_of(completion)

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._client.close()


@functools.cache
def strict_tool(model: type[BaseModel], name: str) -> ChatCompletionFunctionToolParam:
    """The strict function tool (and so the strict schema) of a reply model, built once: pydantic rebuilds the schema
    on every call, which cost about 1.5 ms a request (bench/judge_overhead_openai.py). Read-only: the SDK copies it."""
    return openai.pydantic_function_tool(model, name=name)


def reply_of(completion: Any) -> ProviderReply:
    """The reply text (a tool call's arguments), tokens and level probabilities of one chat completion."""
    if not getattr(completion, "choices", None):
        raise ProviderCallFailed("bad_response", "the reply has no choices")
    choice = completion.choices[0]
    message = choice.message
    calls = message.tool_calls or []
    text = calls[0].function.arguments if calls else (message.content or "")
    usage = completion.usage
    cached = 0
    if usage is not None and usage.prompt_tokens_details is not None:
        cached = usage.prompt_tokens_details.cached_tokens or 0
    tokens = Tokens(
        input=max(0, (usage.prompt_tokens if usage else 0) - cached),
        output=usage.completion_tokens if usage else 0,
        cache_read=cached,
    )
    content = choice.logprobs.content if choice.logprobs is not None else None
    return ProviderReply(
        text=text,
        tokens=tokens,
        cut_off=choice.finish_reason == "length",
        refused=choice.finish_reason == "content_filter" or bool(getattr(message, "refusal", None)),
        level_probabilities=level_probabilities(content) if content else None,
    )


def level_probabilities(content: list[Any]) -> tuple[float, ...] | None:
    """P(level 0..4) at the token carrying the `"score":` value, from its top log-probabilities; None when the reply
    has no such token or the alternatives name no level (the expected score then cannot be formed)."""
    text = "".join(t.token for t in content)
    found = _SCORE_KEY.search(text)
    if found is None or found.end() >= len(text) or text[found.end()] not in LEVELS:
        return None
    at, start = found.end(), 0
    for entry in content:
        end = start + len(entry.token)
        if start <= at < end:
            offset = at - start
            prefix = entry.token[:offset]
            mass = [0.0] * len(LEVELS)
            for alt in entry.top_logprobs or []:
                tok = alt.token
                if (
                    tok.startswith(prefix)
                    and len(tok) > offset
                    and tok[offset] in LEVELS
                    and not tok[offset + 1 :][:1].isdigit()
                ):
                    mass[LEVELS.index(tok[offset])] += math.exp(alt.logprob)
            total = sum(mass)
            return tuple(m / total for m in mass) if total > 0 else None
        start = end
    return None


def classify(err: openai.APIError) -> ProviderCallFailed:
    """The failure an SDK exception stands for."""
    if isinstance(err, openai.APITimeoutError):
        return ProviderCallFailed("timeout", "request timed out")
    if isinstance(err, openai.APIConnectionError):
        return ProviderCallFailed("connection", f"connection error: {err.message}")
    if isinstance(err, openai.APIStatusError):
        status = err.status_code
        detail = f"HTTP {status}: {err.message}"
        kind: FailureKind = RETRYABLE_STATUS.get(status) or ("server_error" if status >= 500 else "api_error")
        headers = err.response.headers
        wait = retry_after_seconds(headers)
        if wait is None and status == 429:
            wait = reset_seconds(headers.get("x-ratelimit-reset-requests") or headers.get("x-ratelimit-reset-tokens"))
        return ProviderCallFailed(kind, detail[:300], wait, status)
    return ProviderCallFailed("bad_response", f"{type(err).__name__}: {err.message}"[:300])


def reset_seconds(value: str | None) -> float | None:
    """Seconds in OpenAI's `x-ratelimit-reset-*` durations (`1s`, `6m0s`, `20ms`), or None."""
    if not value:
        return None
    parts = _DURATION.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value.strip():
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)
