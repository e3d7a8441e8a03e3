"""Input event shapes (flat and chat) and the normalised event the pipeline judges.

Text rules (ClickHouse's driver cannot encode a lone UTF-16 surrogate, which JSON's "\\ud800" escape can carry):
ids and labels (event_id, conversation_id, app, model, prompt_version, metadata keys) with a NUL or a lone
surrogate are refused, since replacing a character could merge two of them; free text (the messages, the
response, metadata values) keeps NULs (valid UTF-8, stored byte for byte) and gets U+FFFD for a lone surrogate."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Annotated, Any, Literal, NamedTuple, Protocol

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

MAX_ID_CHARS = 256
REPLACEMENT_CHAR = "\ufffd"

# json.loads joins a valid surrogate pair into one code point, so any surrogate left in a str is a lone one.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_NOT_IN_IDENTIFIER = re.compile("[\x00\ud800-\udfff]")


def replace_lone_surrogates(text: str) -> str:
    """`text` with each lone UTF-16 surrogate replaced by U+FFFD, so that it encodes as UTF-8."""
    if text.isascii():  # the common case needs no scan
        return text
    return _LONE_SURROGATE.sub(REPLACEMENT_CHAR, text)


def identifier_problem(text: str) -> str | None:
    """Why `text` cannot be an id or a label (it has a NUL or a lone surrogate), or None if it can."""
    found = _NOT_IN_IDENTIFIER.search(text)
    if found is None:
        return None
    char = found.group()
    what = "NUL" if char == "\x00" else "a lone surrogate"
    return (
        f"contains U+{ord(char):04X} ({what}) at index {found.start()}; ids and labels must be valid Unicode without "
        "NUL"
    )


# Free text: judged and stored, so a lone surrogate becomes a visible U+FFFD instead of failing the insert.
Text = Annotated[str, AfterValidator(replace_lone_surrogates)]


def _scalar_to_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    # Nested values are kept (as JSON) rather than failing the whole event over a label.
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _metadata_key(key: Any) -> str:
    text = str(key)
    if problem := identifier_problem(text):
        raise ValueError(f"key {json.dumps(text)} {problem}")  # json.dumps: the detail itself stays ASCII
    return text


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

    @field_validator("event_id", "conversation_id", "app", "model", "prompt_version", mode="before")
    @classmethod
    def _valid_identifier(cls, value: Any) -> Any:
        # Refused, not repaired: "a\ud800" and "a\ud801" would both become "a\ufffd" and collapse into one row.
        if isinstance(value, str) and (problem := identifier_problem(value)):
            raise ValueError(problem)
        return value

    @field_validator("app", "model", "prompt_version", mode="before")
    @classmethod
    def _null_is_default(cls, value: Any, info: Any) -> Any:
        if value is None:
            return "default" if info.field_name == "app" else ""
        return value

    @field_validator("metadata", mode="before")
    @classmethod
    def _metadata_as_strings(cls, value: Any) -> Any:
        # metadata is a label map: coerce scalar values instead of dead-lettering the event; drop nulls. Keys
        # are labels (refused like ids), values free text.
        if value is None:
            return {}
        if isinstance(value, dict):
            return {
                _metadata_key(k): replace_lone_surrogates(_scalar_to_str(v)) for k, v in value.items() if v is not None
            }
        return value

    @field_validator("timestamp")
    @classmethod
    def _aware_utc(cls, value: datetime | None) -> datetime | None:
        # A timestamp without an offset is read as UTC (documented in docs/input.md).
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class FlatEvent(EventEnvelope):
    """The flat shape: one user message and one response."""

    user_message: Text
    response: Text


class ContentPart(BaseModel):
    """One part of a chat message's content; only `text` parts are judged."""

    model_config = ConfigDict(extra="allow")

    type: str
    text: Text | None = None


class ChatMessage(BaseModel):
    """One chat turn; content is a string or a list of typed parts."""

    model_config = ConfigDict(extra="ignore")

    role: str
    content: Text | list[ContentPart] | None = None

    def text(self) -> str:
        """The message's text: the string content, or its text parts joined by newlines."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content if p.type == "text" and p.text is not None)


class Turn(NamedTuple):
    """One earlier message of a conversation, as the judge may read it: its role (user, assistant, tool, ...) and
    its text."""

    role: str
    text: str


# The roles whose messages are the assistant's instructions rather than conversation (OpenAI's `developer` is the
# newer name of `system`).
SYSTEM_ROLES = frozenset({"system", "developer"})


class History(NamedTuple):
    """What a chat event says besides its judged pair: the messages before the judged question (oldest first, the
    system messages and the messages without text left out), the system instructions, and the question's index
    among the user messages."""

    context: tuple[Turn, ...]
    system: str
    turn: int


NO_HISTORY = History((), "", 0)
# `Turn(role, text)` without the generated `__new__`'s keyword handling, which costs as much as the tuple: decoding
# builds one per earlier message.
_new_turn = partial(tuple.__new__, Turn)


class SaysText(Protocol):
    """A chat message as both decoding paths hold it: a role and a `text()`."""

    @property
    def role(self) -> str:
        """Who wrote the message (user, assistant, system, tool, ...)."""
        ...

    def text(self) -> str:
        """The message's text parts, joined."""
        ...


def judged_positions(messages: Sequence[SaysText]) -> tuple[int, int] | None:
    """(question index, answer index): the last assistant message and the last user message before it, if any."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "assistant":
            for j in range(i - 1, -1, -1):
                if messages[j].role == "user":
                    return j, i
            return None
    return None


def history_of(messages: Sequence[SaysText], question_at: int, answer_at: int) -> History:
    """The `History` of the pair at (question_at, answer_at), in one pass over the messages before the answer.

    Context: every message before the question but the system ones, with its text; a message without text is left
    out (an assistant turn that only calls a tool, an image, a tool result with no text part): it would give the
    judge a role and nothing to read. System: the text of the system messages the assistant had read when it
    answered (before the answer, so one between the question and the answer counts), joined by a blank line.
    Turn: the user messages before the question, with or without text (the question's index among them)."""
    context: list[Turn] = []
    system: list[str] = []
    turn = 0
    for k, message in enumerate(messages[:answer_at]):
        role = message.role
        if role in SYSTEM_ROLES:
            text = message.text()
            if text and not text.isspace():  # as `text.strip()`, without copying the text
                system.append(text)
        elif k < question_at:
            if role == "user":
                turn += 1
            text = message.text()
            if text and not text.isspace():
                context.append(_new_turn((role, text)))
    if not context and not system and not turn:
        return NO_HISTORY
    return History(tuple(context), "\n\n".join(system), turn)


class ChatEvent(EventEnvelope):
    """The chat shape: a list of messages; the judged pair is the final assistant turn and the user turn before it."""

    messages: list[ChatMessage] = Field(min_length=1)

    def judged_pair(self) -> tuple[str, str] | None:
        """(question, response) from the last assistant message and the last user message before it, if any."""
        found = judged_positions(self.messages)
        if found is None:
            return None
        question_at, answer_at = found
        return self.messages[question_at].text(), self.messages[answer_at].text()

    def history(self) -> History:
        """The context, system instructions and turn index of the judged pair (`NO_HISTORY` without a pair); see
        `history_of` for what counts."""
        found = judged_positions(self.messages)
        return NO_HISTORY if found is None else history_of(self.messages, *found)


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
    # The conversation before the judged question, oldest first (empty for flat events and first turns), and the
    # assistant's system instructions ('' when the event carries none): what the judge may read as context.
    context: tuple[Turn, ...] = ()
    system: str = ""
    turn: int = 0  # the judged question's index among the conversation's user messages (0: the first)
