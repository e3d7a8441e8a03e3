"""An LLM span's event without the detour through the monitor's chat JSON: for the common span, the outcome that
`map_span` and `records.call_event` give, built directly, or None (declined: the full mapping decides, and words why).

It takes two shapes of span, and declines every other:
  - the current GenAI content on the span (`gen_ai.input.messages` / `.output.messages`, JSON strings or structured)
    with a question and an answer: the `DecodedEvent` that decoding the call's chat JSON gives;
  - no content anywhere a dialect looks on the span alone (logs are joined by the full mapping only): `NoContent`.
It must accept only what the full mapping accepts, with the same result (see the comments in `span_event`);
tests/consumers/otlp/test_fast_mapping.py compares the two on generated spans of every dialect."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import UNSET, UnsetType

from consumers.decode import DecodedEvent, resolve_event_time
from consumers.otlp.dialects import (
    MappingOptions,
    Message,
    NoContent,
    call_header,
    call_ids,
    later_dialect_content,
    semconv_messages,
    semconv_system,
)
from consumers.otlp.span_keys import SPAN_ID_KEY as SPAN_ID_KEY  # the judged span, in the row's metadata
from consumers.otlp.span_keys import TRACE_ID_KEY as TRACE_ID_KEY
from schemas.errors import DecodeError
from schemas.events import MAX_ID_CHARS, NO_HISTORY, history_of, judged_positions

if TYPE_CHECKING:
    from consumers.otlp.wire import Span

_decode_json = msgspec.json.decode
# A JSON string with more brackets than this is left to json.loads: nested that deep, the two parsers might differ
# in where they give up (each its own recursion limit), and json.loads decides.
_MAX_BRACKETS = 200
# Bytes the chat JSON may spend beyond six per character of its strings (a character takes at most six, `\u00XX`):
# its keys, quotes, commas, the timestamp, and each message's `{"role":"","content":""}`.
_JSON_OVERHEAD, _JSON_PER_MESSAGE = 512, 40
_SURROGATE = re.compile("[\ud800-\udfff]")


class SpanEvent(msgspec.Struct, frozen=True, gc=False):
    """A call's event, made without the chat JSON, and the dialect its content came from."""

    event: DecodedEvent
    dialect: str


class _Said(msgspec.Struct, frozen=True, gc=False):  # gc=False: short-lived, no cycles; a struct is cheap to build
    """A chat message as `judged_positions` and `history_of` read it."""

    role: str
    content: str

    def text(self) -> str:
        """The message's text."""
        return self.content


def span_event(
    span: Span,
    options: MappingOptions,
    *,
    record_timestamp_ms: int | None,
    max_bytes: int,
    max_future_skew_s: float | None,
    now: datetime | None,
) -> SpanEvent | NoContent | None:
    """The outcome of an LLM span (its kind is `llm`, no log records joined), or None: declined."""
    a = span.attributes
    inputs = _turns(a.get("gen_ai.input.messages"))
    outputs = _turns(a.get("gen_ai.output.messages"))
    if inputs is None or outputs is None:
        return None  # a JSON string msgspec refused, or nested deep: json.loads decides
    if not (any(m.role == "user" and m.text.strip() for m in inputs) and outputs):
        # The current dialect gives no call: the later dialects decide, unless the span holds nothing they read.
        return None if later_dialect_content(span) else call_header(span, options)
    system = semconv_system(a.get("gen_ai.system_instructions"))
    return _event(span, options, system, (*inputs, outputs[0]), record_timestamp_ms, max_bytes, max_future_skew_s, now)


class _Part(msgspec.Struct, frozen=True, gc=False):
    """A message part as `dialects.semconv_messages` reads it: text from `content`, else from `text`, if a string."""

    type: str | None = None
    content: str | UnsetType | None = UNSET
    text: str | UnsetType | None = UNSET


class _Turn(msgspec.Struct, frozen=True, gc=False):
    """A message of the current GenAI content in its common shape (msgspec refuses any other, which is then read as
    `dialects.semconv_messages` reads any JSON)."""

    role: str
    parts: list[_Part] | str | None = None

    def message(self) -> Message:
        """The `Message` that `semconv_messages` makes of this message."""
        parts = self.parts
        if not isinstance(parts, list):
            return Message(self.role, parts or "")
        texts = []
        for p in parts:
            text = p.content if p.content is not UNSET else None if p.text is UNSET else p.text
            if p.type == "text" and isinstance(text, str):
                texts.append(text)
        return Message(self.role, "\n".join(texts))


_decode_turns = msgspec.json.Decoder(list[_Turn]).decode


def _turns(value: Any) -> list[Message] | None:
    """`semconv_messages` of an attribute value, a JSON string parsed by msgspec rather than json.loads (the same
    objects for what both accept: msgspec refuses NaN, lone surrogates and numbers past a double, and keeps the last
    of a repeated key as json.loads does); None where msgspec refuses it. The common shape is decoded straight into
    structs (`_Turn`), anything else as plain JSON first."""
    if isinstance(value, str) and value[:1] in ("[", "{"):
        if value.count("[") + value.count("{") > _MAX_BRACKETS:
            return None
        try:
            return [turn.message() for turn in _decode_turns(value)]
        except (msgspec.DecodeError, RecursionError, UnicodeEncodeError):  # ValidationError too: another shape
            pass
        try:
            value = _decode_json(value)
        except (msgspec.DecodeError, RecursionError, UnicodeEncodeError):  # the last: a lone surrogate in the string
            return None
    return semconv_messages(value)


def _plain(text: str) -> bool:
    """Whether `text` has no NUL and no lone surrogate (checked without a scan for ASCII text, the common case)."""
    return "\x00" not in text and (text.isascii() or _SURROGATE.search(text) is None)


def _event(
    span: Span,
    options: MappingOptions,
    system: str,
    messages: tuple[Message, ...],
    record_timestamp_ms: int | None,
    max_bytes: int,
    max_future_skew_s: float | None,
    now: datetime | None,
) -> SpanEvent | None:
    """The event `call_event` makes of the call, or None where its checks might refuse it (they then word why)."""
    header = call_header(span, options)
    event_id, conversation_id = call_ids(span)
    app, model, prompt_version = header.app, header.model, header.prompt_version
    # The chat JSON's checks, as the event schema makes them: ids of 1 to MAX_ID_CHARS characters (the event id is
    # never empty), the app at most that (empty: `default`), model and prompt version at most that, and none of them
    # with a NUL or a lone surrogate (an OTLP/JSON string may hold one).
    labels = (event_id, conversation_id, app, model, prompt_version)
    if not conversation_id or max(map(len, labels)) > MAX_ID_CHARS:
        return None
    said = [_Said("system", system)] if system else []  # as the chat JSON puts the instructions first
    said += [_Said(m.role, m.text) for m in messages]
    # Free text: a NUL is kept and a lone surrogate replaced by decoding, but the chat JSON is not made for either.
    # All the strings at once (a NUL or a lone surrogate in one is one in their join): one scan, not one a string.
    strings = (*labels, *(m.content for m in said), *(m.role for m in said))
    if not _plain("".join(strings)):
        return None
    # The chat JSON within max_bytes: at most six bytes a character, plus the keys and punctuation.
    chars = sum(map(len, strings)) + len(span.trace_id) + len(span.span_id)
    if 6 * chars + _JSON_PER_MESSAGE * len(said) + _JSON_OVERHEAD > max_bytes:
        return None
    found = judged_positions(said)
    if found is None:
        return None
    question_at, answer_at = found
    question = said[question_at].text()
    if not question.strip():
        return None
    nanos = header.time_unix_nano
    if not 0 <= nanos < 2**63:
        return None  # a time the chat JSON cannot write (OTLP/JSON allows any integer)
    # The chat JSON's timestamp is this datetime in ISO form, which reads back as the same datetime.
    timestamp = datetime.fromtimestamp(nanos / 1e9, UTC) if nanos else None
    try:
        event_time, epoch_s = resolve_event_time(timestamp, record_timestamp_ms, now, max_future_skew_s)
    except DecodeError:
        return None
    history = history_of(said, question_at, answer_at) if answer_at > 1 else NO_HISTORY
    event = DecodedEvent(
        event_id,
        conversation_id,
        event_time,
        app or "default",
        model,
        prompt_version,
        {TRACE_ID_KEY: span.trace_id, SPAN_ID_KEY: span.span_id},
        question,
        said[answer_at].text(),
        "chat",
        epoch_s,
        history.context,
        history.system,
        history.turn,
    )
    return SpanEvent(event, "gen_ai")
