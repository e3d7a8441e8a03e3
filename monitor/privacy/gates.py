"""Which recognizers a text can need, found in one pass: a set of cheap necessary conditions (a key prefix, an @, a
run of six digits, ...) run together by RE2 (google-re2), whose set matching is linear in the text whatever the
number of patterns. Python's `re` would scan the text once per condition; most text meets none of them, and then no
recognizer runs at all."""

from __future__ import annotations

from collections.abc import Sequence

import re2


class Gates:
    """Named conditions, matched case-insensitively anywhere in a text; several conditions may share a name."""

    def __init__(self, conditions: Sequence[tuple[str, str]]) -> None:
        options = re2.Options()
        options.case_sensitive = False
        self._set = re2.Set.SearchSet(options)
        self._names: list[str] = []
        for name, pattern in conditions:
            self._set.Add(pattern)
            self._names.append(name)
        self._set.Compile()

    def open(self, text: str) -> frozenset[str]:
        """The names of the conditions `text` meets (empty for most prose)."""
        found = self._set.Match(text)
        return frozenset(self._names[i] for i in found) if found else frozenset()
