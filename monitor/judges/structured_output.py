"""Structured output: the JSON schema we ask the API for, and the validation we always redo on our side.

The SDK drops `minimum`/`maximum`, `maxLength` and `minItems` > 1 from the schema it sends, so the API does not
enforce them; pydantic does, here, on every reply."""

from __future__ import annotations

from typing import TypeVar

import anthropic
from anthropic.types import OutputConfigParam
from pydantic import BaseModel, ValidationError

from schemas.errors import JudgeReplyInvalid

M = TypeVar("M", bound=BaseModel)


def output_config(model: type[BaseModel]) -> OutputConfigParam:
    """The `output_config` parameter asking for replies matching `model`, as `messages.parse` builds it."""
    return {"format": {"type": "json_schema", "schema": anthropic.transform_schema(model)}}


def parse_reply(model: type[M], text: str) -> M:
    """`text` validated as `model` (strict JSON, no extra keys); raises `JudgeReplyInvalid`."""
    if not text.strip():
        raise JudgeReplyInvalid("empty reply")
    try:
        return model.model_validate_json(text)
    except ValidationError as e:
        raise JudgeReplyInvalid(_describe(e)) from None


def _describe(err: ValidationError) -> str:
    parts = []
    for item in err.errors(include_url=False, include_input=False)[:3]:
        loc = ".".join(str(x) for x in item["loc"]) or "reply"
        parts.append(f"{loc}: {item['msg']}")
    more = err.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")
