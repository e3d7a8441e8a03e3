"""Anthropic's Messages API as a judge provider: the Anthropic API itself, Amazon Bedrock (`AsyncAnthropicBedrock`,
SigV4 through botocore and the AWS credential chain) and Google Vertex AI (`AsyncAnthropicVertex`, an access token or
application default credentials). The three share the Messages interface and the SDK's exception classes, so one
class speaks to all of them; only the client differs.

Modes: `json_schema` (`output_config`), `tools` (one forced tool whose input is the reply) and `prompt`. The
Messages API has no bare JSON mode. The SDK's own retries are off: `JudgeClient` owns the retry loop."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx2

from monitor.backoff import retry_after_seconds
from monitor.judges.providers.base import FailureKind, JudgeRequest, ProviderReply, Tokens
from monitor.judges.settings import JudgeSettings, ProviderName, StructuredMode
from monitor.judges.structured_output import correction_text, output_config, schema_instructions
from schemas.errors import ProviderCallFailed

# Transient statuses and their failure kinds; any other 4xx is an `api_error`, any other 5xx a `server_error`.
RETRYABLE_STATUS: dict[int, FailureKind] = {
    408: "request_timeout",
    409: "request_timeout",
    429: "rate_limited",
    529: "overloaded",
}

TOOL_DESCRIPTION = "Record the evaluation of the assistant's response."


class AnthropicMessages:
    """Judge requests through the Messages API of Anthropic, Bedrock or Vertex (by `settings.provider`)."""

    modes: tuple[StructuredMode, ...] = ("json_schema", "tools", "prompt")
    marks_cache = True

    def __init__(self, settings: JudgeSettings, http_client: httpx2.AsyncClient | None = None) -> None:
        self._name: ProviderName = settings.provider
        self._model = settings.model
        self._max_tokens = settings.max_tokens
        self._client = _client(settings, http_client)
        # The Anthropic API enforces output_config's schema for every current model; on Bedrock and Vertex which
        # parameters pass depends on the platform's version, so `auto` probes there.
        self.known_mode: StructuredMode | None = "json_schema" if settings.provider == "anthropic" else None

    @property
    def name(self) -> ProviderName:
        """anthropic, bedrock or vertex."""
        return self._name

    @property
    def model(self) -> str:
        """The model id as the platform names it (Bedrock: `us.anthropic.claude-…`)."""
        return self._model

    @property
    def batches(self) -> anthropic.resources.messages.AsyncBatches:
        """The Message Batches resource (the Anthropic API only: Bedrock and Vertex have other batch services)."""
        if not isinstance(self._client, anthropic.AsyncAnthropic):
            raise ValueError(f"the {self._name} provider has no Message Batches API")
        return self._client.messages.batches

    def body(self, request: JudgeRequest, mode: StructuredMode) -> dict[str, Any]:
        """The Messages request: the system prompt as one cached block first, then the user turn (and correction)."""
        system = (
            request.system if mode != "prompt" else f"{request.system}\n\n{schema_instructions(request.reply_model)}"
        )
        messages: list[dict[str, Any]] = [{"role": "user", "content": request.user}]
        if request.correction is not None:
            messages.append({"role": "assistant", "content": request.correction.reply or "(empty)"})
            messages.append({"role": "user", "content": correction_text(request.correction.error)})
        body: dict[str, Any] = {
            "model": self._model,
            "max_tokens": self._max_tokens,
            "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
            "messages": messages,
        }
        if mode == "json_schema":
            body["output_config"] = output_config(request.reply_model)
        elif mode == "tools":
            schema = anthropic.transform_schema(request.reply_model)
            body["tools"] = [{"name": request.schema_name, "description": TOOL_DESCRIPTION, "input_schema": schema}]
            body["tool_choice"] = {"type": "tool", "name": request.schema_name}
        elif mode != "prompt":
            raise ValueError(f"the Messages API has no {mode} mode")
        return body

    async def send(self, request: JudgeRequest, mode: StructuredMode) -> ProviderReply:
        """One request; raises `ProviderCallFailed`."""
        try:
            message = await self._client.messages.create(**self.body(request, mode))
        except anthropic.APIError as e:
            raise classify(e) from e
        return reply_of(message)

    async def aclose(self) -> None:
        """Close the HTTP connections (an injected `http_client` too: the SDK closes the client it was given)."""
        await self._client.close()


def reply_of(message: anthropic.types.Message) -> ProviderReply:
    """The reply text (a tool call's input as JSON) and tokens of one Message."""
    usage = message.usage
    tokens = Tokens(
        usage.input_tokens or 0,
        usage.output_tokens or 0,
        usage.cache_read_input_tokens or 0,
        usage.cache_creation_input_tokens or 0,
    )
    tools = [json.dumps(block.input) for block in message.content if block.type == "tool_use"]
    text = tools[0] if tools else "".join(block.text for block in message.content if block.type == "text")
    return ProviderReply(
        text=text, tokens=tokens, cut_off=message.stop_reason == "max_tokens", refused=message.stop_reason == "refusal"
    )


def classify(err: anthropic.APIError) -> ProviderCallFailed:
    """The failure an SDK exception stands for."""
    if isinstance(err, anthropic.APITimeoutError):
        return ProviderCallFailed("timeout", "request timed out")
    if isinstance(err, anthropic.APIConnectionError):
        return ProviderCallFailed("connection", f"connection error: {err.message}")
    if isinstance(err, anthropic.APIStatusError):
        status = err.status_code
        detail = (
            f"HTTP {status}"
            + (f" {err.type}" if err.type else "")
            + (f": {err.api_message}" if err.api_message else "")
        )
        kind: FailureKind = RETRYABLE_STATUS.get(status) or ("server_error" if status >= 500 else "api_error")
        return ProviderCallFailed(kind, detail[:300], retry_after_seconds(err.response.headers), status)
    # e.g. a 200 whose body is not a Message: the server misbehaved, which is transient from our side.
    return ProviderCallFailed("bad_response", f"{type(err).__name__}: {err.message}"[:300])


def _client(settings: JudgeSettings, http_client: httpx2.AsyncClient | None) -> anthropic.AsyncAnthropic | Any:
    common: dict[str, Any] = {
        "base_url": settings.effective_base_url,
        "timeout": settings.request_timeout_s,
        "max_retries": 0,
        "http_client": http_client,
    }
    key = settings.effective_api_key
    if settings.provider == "bedrock":
        return anthropic.AsyncAnthropicBedrock(aws_region=settings.region, **common)
    if settings.provider == "vertex":
        return anthropic.AsyncAnthropicVertex(
            region=settings.region or anthropic.NOT_GIVEN,
            project_id=settings.project or anthropic.NOT_GIVEN,
            access_token=key.get_secret_value() if key else None,
            **common,
        )
    return anthropic.AsyncAnthropic(api_key=key.get_secret_value() if key else None, **common)
