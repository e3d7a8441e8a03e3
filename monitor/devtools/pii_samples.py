"""Synthetic personal data for `produce --pii-share`: valid-looking values of every kind and the ways of writing
each into a sentence, read from the package's `pii_values.jsonl`. The file is written by the labelled corpus's
generator (`tests/pii_corpus.py`, test data that stays out of the package), and a test keeps the two equal."""

from __future__ import annotations

import functools
import importlib.resources
import json
import random
from dataclasses import dataclass

PACKAGED_VALUES = "pii_values.jsonl"


@dataclass(frozen=True, slots=True)
class Planted:
    """One item of personal data planted in a text: `value` occurs verbatim in it."""

    kind: str
    value: str
    fmt: str


@dataclass(frozen=True, slots=True)
class _Value:
    fmt: str
    value: str
    snippets: tuple[str, ...]


@functools.cache
def _values() -> dict[str, tuple[_Value, ...]]:
    """The packaged values by kind, in file order (read once)."""
    text = importlib.resources.files(__package__).joinpath(PACKAGED_VALUES).read_text(encoding="utf-8")
    by_kind: dict[str, list[_Value]] = {}
    for line in text.splitlines():
        record = json.loads(line)
        by_kind.setdefault(record["kind"], []).append(_Value(record["fmt"], record["value"], tuple(record["snippets"])))
    return {kind: tuple(values) for kind, values in by_kind.items()}


@functools.cache
def _snippets() -> dict[str, tuple[str, ...]]:
    return {v.value: v.snippets for values in _values().values() for v in values}


def planted_value(rng: random.Random, kind: str) -> tuple[str, str]:
    """One valid value of `kind`, chosen at random: `(value, fmt)`."""
    chosen = rng.choice(_values()[kind])
    return chosen.value, chosen.fmt


def planted_snippet(rng: random.Random, value: str, fmt: str) -> str:
    """The text to weave into a sentence for a value of `planted_value`: the value plus the context its format needs
    (the id's name before a digit-only id, the URL around user:password, the header before a bearer token...)."""
    del fmt  # the value names its snippets; the format is kept in the signature for callers that pass it
    return rng.choice(_snippets().get(value, (value,)))
