"""Found items as spans, and replacing them with placeholders (pure)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from monitor.privacy.kinds import placeholder


@dataclass(frozen=True, slots=True, order=True)
class Span:
    """One found item: `text[start:end]` is personal data of `kind`."""

    start: int
    end: int
    kind: str


@dataclass(frozen=True, slots=True)
class Redacted:
    """Text with its items replaced, and how many items of each kind were replaced."""

    text: str
    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Items replaced, all kinds together."""
        return sum(self.counts.values())


def replace_spans(text: str, spans: Iterable[Span]) -> Redacted:
    """`text` with each span replaced by its kind's placeholder. Where spans overlap, the one given first wins: the
    caller orders them by priority (`redactor.RecognizerRedactor` puts the longest of each recognizer first)."""
    chosen: list[Span] = []
    for span in spans:
        if span.end <= span.start or span.start < 0 or span.end > len(text):
            continue
        if all(span.end <= c.start or span.start >= c.end for c in chosen):
            chosen.append(span)
    if not chosen:
        return Redacted(text)
    chosen.sort()
    parts: list[str] = []
    at = 0
    for span in chosen:
        parts.append(text[at : span.start])
        parts.append(placeholder(span.kind))
        at = span.end
    parts.append(text[at:])
    return Redacted("".join(parts), dict(Counter(s.kind for s in chosen)))


class Recognizer(Protocol):
    """Finds the items of one or more kinds of personal data in a text. Pure: no I/O, never raises on any str."""

    def find(self, text: str) -> Iterable[Span]:
        """The spans of the items found in `text`, in priority order: where two overlap, the earlier one wins."""
        ...


class Redactor(Protocol):
    """Replaces personal data with typed placeholders. Pure and idempotent: redacting its own output changes
    nothing. The built-in one is `monitor.privacy.redactor.RecognizerRedactor`; any engine (a model-based one,
    Presidio) fits behind this."""

    @property
    def name(self) -> str:
        """What redacted, with a version (stored on every row, so a change of recognizers is visible)."""
        ...

    def redact(self, text: str) -> Redacted:
        """`text` with every item found replaced by its placeholder, and the counts by kind."""
        ...
