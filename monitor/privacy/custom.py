"""The user's own patterns (MONITOR_REDACT_PATTERNS): checked once at start, then recognised like the built-ins."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from monitor.privacy.kinds import BUILTIN_KINDS, KIND_NAME, placeholder
from monitor.privacy.spans import Span
from schemas.errors import ConfigError


@dataclass(frozen=True, slots=True)
class CustomPattern:
    """Every match of `pattern` (or of its group named `item`) is an item of `kind`."""

    kind: str
    pattern: re.Pattern[str]

    def find(self, text: str) -> Iterator[Span]:
        """The matches in `text`."""
        group = "item" if "item" in self.pattern.groupindex else 0
        for m in self.pattern.finditer(text):
            start, end = m.span(group)
            if start < end:
                yield Span(start, end, self.kind)


def compile_patterns(patterns: Mapping[str, str]) -> list[CustomPattern]:
    """The user's patterns compiled; raises `ConfigError` (one line) for a bad name or expression, one that matches
    empty text, or one that matches a placeholder (redacting its own output again would not be idempotent)."""
    out: list[CustomPattern] = []
    placeholders = [placeholder(k) for k in (*BUILTIN_KINDS, *patterns)]
    for kind, expression in patterns.items():
        if not KIND_NAME.match(kind):
            raise ConfigError(
                f"redaction pattern name {kind!r} must be upper case letters, digits and _ (it becomes the placeholder "
                f"[{kind}])"
            )
        try:
            compiled = re.compile(expression)
        except re.error as e:
            raise ConfigError(f"redaction pattern {kind}: not a valid regular expression ({e})") from None
        if compiled.fullmatch(""):
            raise ConfigError(f"redaction pattern {kind} matches empty text")
        if any(compiled.search(p) for p in placeholders):
            raise ConfigError(
                f"redaction pattern {kind} matches a placeholder such as [{kind}]: narrow it so that redacted text is "
                "left alone"
            )
        out.append(CustomPattern(kind, compiled))
    return out


def check_patterns(patterns: Mapping[str, str]) -> None:
    """Raise `ConfigError` if any of the user's patterns is unusable (see `compile_patterns`)."""
    compile_patterns(patterns)
