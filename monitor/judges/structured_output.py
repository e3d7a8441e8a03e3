"""Structured output: how each mode asks for the reply's structure, and the validation we always redo on our side.

Whatever the mode, and whatever the server claims to enforce, every reply is validated against the judge's reply
model here (`parse_reply`). Some servers drop parts of a schema (the Anthropic SDK strips `minimum`/`maximum`), some
ignore it with HTTP 200 (vLLM given keys it no longer knows, Ollama's hosted service), some cut the reply at
max_tokens: none of that can turn into a score. In `prompt` and `json_object` modes the schema is described in the
system prompt (after the static instructions, so the cacheable prefix stays one block) and the reply is read
tolerantly: the first JSON object in the text, inside a code fence or not."""

from __future__ import annotations

import functools
import json
from typing import Any, TypeVar

import anthropic
from anthropic.types import OutputConfigParam
from pydantic import BaseModel, ValidationError

from schemas.errors import JudgeReplyInvalid

M = TypeVar("M", bound=BaseModel)

CORRECTION_TEMPLATE = (
    "Your reply was not valid: {error}. Reply again with the JSON object only, exactly in the required format."
)


def output_config(model: type[BaseModel]) -> OutputConfigParam:
    """The Messages API's `output_config` asking for replies matching `model`, as `messages.parse` builds it."""
    return {"format": {"type": "json_schema", "schema": anthropic.transform_schema(model)}}


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
