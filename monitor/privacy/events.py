"""Redacting an event: its question, response, earlier turns, system instructions and metadata values, before the
judge and the store see them (pure)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from monitor.privacy.spans import Redactor
from schemas.events import ConversationEvent, Turn


@dataclass(frozen=True, slots=True)
class JudgedEvent:
    """An event as the judge sees it (`judged`: redacted, or the original when redaction is off), the event as
    received (`original`), the items replaced per kind and the redactor's name ("" when off)."""

    judged: ConversationEvent
    original: ConversationEvent
    redactions: Mapping[str, int] = field(default_factory=dict)
    redactor: str = ""

    @classmethod
    def unredacted(cls, event: ConversationEvent) -> JudgedEvent:
        """The event judged as received (MONITOR_REDACT=false)."""
        return cls(event, event)


def redact_event(event: ConversationEvent, redactor: Redactor) -> JudgedEvent:
    """`event` with personal data replaced in its question, response, context turns, system instructions and
    metadata values (ids, labels and roles are kept: replacing them could merge rows), and the counts per kind. The
    context is redacted as the judge will read it: window it first (`monitor.judges.context_window.windowed`)."""
    question = redactor.redact(event.question)
    response = redactor.redact(event.response)
    context = [redactor.redact(turn.text) for turn in event.context]
    system = redactor.redact(event.system)
    metadata = {key: redactor.redact(value) for key, value in event.metadata.items()}
    parts = [question, response, *context, system, *metadata.values()]
    if not any(part.counts for part in parts):  # the common case: the event goes on as it came
        return JudgedEvent(event, event, {}, redactor.name)
    counts: Counter[str] = Counter()
    for part in parts:
        counts.update(part.counts)
    update = {
        "question": question.text,
        "response": response.text,
        "context": tuple(Turn(turn.role, r.text) for turn, r in zip(event.context, context, strict=True)),
        "system": system.text,
        "metadata": {key: m.text for key, m in metadata.items()},
    }
    return JudgedEvent(event.model_copy(update=update), event, dict(counts), redactor.name)
