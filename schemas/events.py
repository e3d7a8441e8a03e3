"""Input event shapes (flat and chat) and the normalised event the pipeline judges."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_ID_CHARS = 256


def _scalar_to_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    # Nested values are kept (as JSON) rather than failing the whole event over a label.
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class EventEnvelope(BaseModel):
    """Fields shared by both input shapes. Unknown fields are ignored."""

    model_config = ConfigDict(extra="ignore")

    event_id: str | None = Field(default=None, min_length=1, max_length=MAX_ID_CHARS)
    conversation_id: str | None = Field(default=None, min_length=1, max_length=MAX_ID_CHARS)
    timestamp: datetime | None = None
    app: str = Field(default="default", min_length=1, max_length=MAX_ID_CHARS)
    model: str = Field(default="", max_length=MAX_ID_CHARS)
    prompt_version: str = Field(default="", max_length=MAX_ID_CHARS)
    metadata: dict[str, str] = Field(default_factory=dict)

    @field_validator("app", "model", "prompt_version", mode="before")
    @classmethod
    def _null_is_default(cls, value: Any, info: Any) -> Any:
        if value is None:
            return "default" if info.field_name == "app" else ""
        return value

    @field_validator("metadata", mode="before")
    @classmethod
    def _metadata_as_strings(cls, value: Any) -> Any:
        # metadata is a label map: coerce scalar values instead of dead-lettering the event; drop nulls.
        if value is None:
            return {}
        if isinstance(value, dict):
            return {str(k): _scalar_to_str(v) for k, v in value.items() if v is not None}
        return value

    @field_validator("timestamp")
    @classmethod
    def _aware_utc(cls, value: datetime | None) -> datetime | None:
        # A timestamp without an offset is read as UTC (documented in the README).
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class FlatEvent(EventEnvelope):
    """The flat shape: one user message and one response."""

    user_message: str
    response: str


class ContentPart(BaseModel):
    """One part of a chat message's content; only `text` parts are judged."""

    model_config = ConfigDict(extra="allow")

    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    """One chat turn; content is a string or a list of typed parts."""

    model_config = ConfigDict(extra="ignore")

    role: str
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        """The message's text: the string content, or its text parts joined by newlines."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content if p.type == "text" and p.text is not None)


class ChatEvent(EventEnvelope):
    """The chat shape: a list of messages; the judged pair is the final assistant turn and the user turn before it."""

    messages: list[ChatMessage] = Field(min_length=1)

    def judged_pair(self) -> tuple[str, str] | None:
        """(question, response) from the last assistant message and the last user message before it, if any."""
        for i in range(len(self.messages) - 1, -1, -1):
            if self.messages[i].role == "assistant":
                for j in range(i - 1, -1, -1):
                    if self.messages[j].role == "user":
                        return self.messages[j].text(), self.messages[i].text()
                return None
        return None


class KafkaPosition(BaseModel):
    """Where an event came from."""

    model_config = ConfigDict(frozen=True)

    topic: str
    partition: int
    offset: int


class ConversationEvent(BaseModel):
    """A decoded, validated event with its judged pair: what the judge and the sink see."""

    model_config = ConfigDict(frozen=True)

    event_id: str
    conversation_id: str
    event_time: datetime
    app: str
    model: str
    prompt_version: str
    metadata: dict[str, str]
    question: str
    response: str
    shape: Literal["flat", "chat"]
    source: KafkaPosition
