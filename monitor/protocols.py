"""The Protocols between the parts of the monitor, in one place."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from monitor.judges.base import JudgeInfo, Judgement
from monitor.privacy.spans import Redacted, Span


class Judge(Protocol):
    """A relevancy judge: one async call per event. Raises `JudgeError` when it cannot score."""

    @property
    def info(self) -> JudgeInfo:
        """The identity stored on every row."""
        ...

    @property
    def stats(self) -> Mapping[str, int]:
        """API counters (`attempts`, `error.<kind>`, `retry.<kind>`, `tokens.<type>`, ...); empty for a judge
        that calls no API."""
        ...

    @property
    def rate_limited(self) -> int:
        """How many 429 responses this judge has met so far, retried ones included (adaptive concurrency and
        the freshness factor read the change); always 0 for a judge that calls no API."""
        ...

    async def judge(self, question: str, response: str) -> Judgement:
        """Score one pair."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


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
