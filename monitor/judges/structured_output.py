"""Structured output: how each mode asks for the reply's structure, and the validation we always redo on our side.

Whatever the mode, and whatever the server claims to enforce, every reply is validated against the judge's reply
model here (`parse_reply`). Some servers drop parts of a schema (the Anthropic SDK strips `minimum`/`maximum`), some
ignore it with HTTP 200 (vLLM given keys it no longer knows, Ollama's hosted service), some cut the reply at
max_tokens: none of that can turn into a score. In `prompt` and `json_object` modes the schema is described in the
system prompt (after the static instructions, so the cacheable prefix stays one block) and the reply is read
tolerantly: the first JSON object in the text, inside a code fence or not."""

from __future__ import annotations

import functools
import hashlib
import json
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from monitor.judges.reply_formats import PINNED
from monitor.judges.settings import ProviderName
from schemas.errors import JudgeReplyInvalid

if TYPE_CHECKING:
    from anthropic.types import OutputConfigParam

M = TypeVar("M", bound=BaseModel)

CORRECTION_TEMPLATE = (
    "Your reply was not valid: {error}. Reply again with the JSON object only, exactly in the required format."
)


# Providers whose judges speak Chat Completions through the `openai` SDK (`providers.factory`): they never load the
# Anthropic SDK, not even to name their reply format in the judge id.
CHAT_COMPLETIONS_PROVIDERS: frozenset[ProviderName] = frozenset({"openai", "azure_openai"})


def output_config(model: type[BaseModel]) -> OutputConfigParam:
    """The Messages API's `output_config` asking for replies matching `model`, as `messages.parse` builds it."""
    import anthropic  # the Messages API providers' SDK (~45 MB resident): loaded by them, never at import

    return {"format": {"type": "json_schema", "schema": anthropic.transform_schema(model)}}


def id_output_config(model: type[BaseModel], provider: ProviderName) -> dict[str, Any]:
    """`output_config(model)` as a judge id names the reply format: the SDK's own for the Messages API providers
    (which load it anyway), the pinned copy in `reply_formats` for Chat Completions providers while one matches
    `model` (else the SDK's: the same id, at the SDK's cost)."""
    if provider in CHAT_COMPLETIONS_PROVIDERS:
        key = hashlib.sha256(json.dumps(model.model_json_schema(), sort_keys=True).encode()).hexdigest()
        pinned = PINNED.get(key)
        if pinned is not None:
            return {"format": {"type": "json_schema", "schema": pinned}}
    return dict(output_config(model))


def reply_schema(model: type[BaseModel]) -> dict[str, Any]:
    """`model`'s JSON schema with no `$defs` indirection left unresolved by a strict server: pydantic's own."""
    return model.model_json_schema()


@functools.cache
def schema_instructions(model: type[BaseModel]) -> str:
    """The system prompt's closing section for modes that do not enforce a schema: the reply's JSON schema."""
    schema = json.dumps(reply_schema(model), sort_keys=True, ensure_ascii=False)
    return (
        "# Reply format\nReply with a single JSON object that validates against this JSON schema, and nothing else "
        f"(no prose, no code fence):\n{schema}"
    )


def correction_text(error: str) -> str:
    """The user turn of the one corrective retry: what was wrong with the reply."""
    return CORRECTION_TEMPLATE.format(error=error[:500])


def parse_reply(model: type[M], text: str) -> M:
    """`text` validated as `model` (strict JSON, no extra keys); raises `JudgeReplyInvalid`."""
    if not text.strip():
        raise JudgeReplyInvalid("empty reply")
    try:
        return model.model_validate_json(text)
    except ValidationError as e:
        raise JudgeReplyInvalid(_describe(e)) from None


def first_json_object(text: str) -> str | None:
    """The first balanced `{…}` in `text` that parses as a JSON object, or None."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return text[start:end]
        start = text.find("{", end)
    return None


def _describe(err: ValidationError) -> str:
    parts = []
    for item in err.errors(include_url=False, include_input=False)[:3]:
        loc = ".".join(str(x) for x in item["loc"]) or "reply"
        parts.append(f"{loc}: {item['msg']}")
    more = err.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")
