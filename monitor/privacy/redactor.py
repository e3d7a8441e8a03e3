"""The built-in redactor: recognizers, an allow-list, and placeholders in place of what they find (pure)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import overload

from monitor.privacy.custom import compile_patterns
from monitor.privacy.recognizers import builtin_recognizers
from monitor.privacy.settings import DEFAULT_PHONE_REGIONS, RedactionSettings
from monitor.privacy.spans import Recognizer, Redacted, Span, replace_spans

# Bumped whenever a built-in recognizer changes what it finds: the rows say which recognizers redacted them.
RECOGNIZERS_VERSION = "validated-3"  # 2: fails closed (issue 27); 3: other locales (issue 40): IDNA, ids, matcher


class RecognizerRedactor:
    """Runs every recognizer over a text and replaces what they find, except the allowed values."""

    def __init__(
        self, recognizers: Sequence[Recognizer], allow: Sequence[str] = (), name: str = RECOGNIZERS_VERSION
    ) -> None:
        self._recognizers = tuple(recognizers)
        self._allow = frozenset(value.casefold() for value in allow)
        self._name = name

    @property
    def name(self) -> str:
        """The recognizers' version, with a digest of the user's patterns and allow-list when there are any."""
        return self._name

    def _spans(self, text: str) -> list[Span]:
        # Recognizer order is priority order, and each yields its own spans in priority order (see `Recognizer`).
        spans = [span for r in self._recognizers for span in r.find(text)]
        if self._allow:
            spans = [s for s in spans if text[s.start : s.end].casefold() not in self._allow]
        return spans

    def redact(self, text: str) -> Redacted:
        """`text` with every item replaced by its placeholder, and the counts by kind."""
        spans = self._spans(text)
        if not spans:  # the common case: nothing to count
            return Redacted(text)
        # One pass: no recognizer matches a placeholder or across one (the property test redacts its own output
        # again), and custom patterns that match a placeholder are refused at start.
        return replace_spans(text, spans)


@overload
def build_redactor(settings: RedactionSettings) -> RecognizerRedactor: ...
@overload
def build_redactor(settings: None) -> None: ...
@overload
def build_redactor(settings: RedactionSettings | None) -> RecognizerRedactor | None: ...


def build_redactor(settings: RedactionSettings | None) -> RecognizerRedactor | None:
    """The built-in recognizers, then the user's patterns, with the allow-list (None: redaction is off); raises
    `ConfigError` for a bad pattern."""
    if settings is None:
        return None
    recognizers: list[Recognizer] = [*builtin_recognizers(settings.phone_regions), *compile_patterns(settings.patterns)]
    name = RECOGNIZERS_VERSION
    if settings.patterns or settings.allow or tuple(settings.phone_regions) != DEFAULT_PHONE_REGIONS:
        config = json.dumps(
            [dict(settings.patterns), sorted(settings.allow), list(settings.phone_regions)], sort_keys=True
        )
        name = f"{name}+{hashlib.sha256(config.encode()).hexdigest()[:8]}"
    return RecognizerRedactor(recognizers, settings.allow, name)
