"""The shipped golden set (monitor/calibration/golden_set.jsonl): shape, coverage and label spread, read with json
only."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

GOLDEN = Path(__file__).resolve().parents[3] / "monitor" / "calibration" / "golden_set.jsonl"

FIELDS: dict[str, type] = {"id": str, "category": str, "question": str, "answer": str, "label": int, "rationale": str}
CATEGORIES = (
    "tight",
    "padding",
    "off_topic",
    "partial_multi_part",
    "refusal_appropriate",
    "refusal_inappropriate",
    "wrong_on_topic",
    "clarifying_question",
    "dont_know",
    "empty",
    "very_long",
    "non_english",
    "code",
    "judge_steering",
)
MIN_PAIRS = 80
MIN_PER_CATEGORY = 3
MIN_PER_LABEL = 8


@pytest.fixture(scope="module")
def raw() -> bytes:
    """The golden set's bytes, as shipped."""
    return GOLDEN.read_bytes()


@pytest.fixture(scope="module")
def pairs(raw: bytes) -> list[dict[str, Any]]:
    """The golden set's pairs, one dict per line."""
    return [json.loads(line) for line in raw.decode("utf-8").split("\n") if line]


def test_file_is_utf8_json_lines_without_blank_lines(raw: bytes) -> None:
    """Every line is UTF-8 text holding one JSON object, the file ends with a newline and has no blank lines."""
    text = raw.decode("utf-8")  # raises on invalid UTF-8
    assert not text.startswith("\ufeff"), "byte-order mark"
    assert "\r" not in text, "Windows line ends"
    assert text.endswith("\n") and not text.endswith("\n\n")
    lines = text.split("\n")[:-1]
    # No U+2028 or other characters that str.splitlines() (used by `relevancy-monitor judge --file`) treats as breaks.
    assert text.splitlines() == lines
    for number, line in enumerate(lines, start=1):
        assert line.strip(), f"line {number} is blank"
        assert isinstance(json.loads(line), dict), f"line {number} is not a JSON object"


def test_has_enough_pairs(pairs: list[dict[str, Any]]) -> None:
    """The set holds at least 80 labelled pairs."""
    assert len(pairs) >= MIN_PAIRS


def test_ids_are_unique(pairs: list[dict[str, Any]]) -> None:
    """No two pairs share an id."""
    counts = Counter(p["id"] for p in pairs)
    assert [i for i, n in counts.items() if n > 1] == []


def test_every_field_present_and_typed(pairs: list[dict[str, Any]]) -> None:
    """Each pair has exactly the six fields, each of its expected JSON type (label an integer, not a bool or float)."""
    for p in pairs:
        assert set(p) == set(FIELDS), p.get("id")
        for name, kind in FIELDS.items():
            assert type(p[name]) is kind, (p["id"], name)
        assert p["id"].strip() and p["question"].strip(), p["id"]


def test_labels_are_on_the_rubric_scale(pairs: list[dict[str, Any]]) -> None:
    """Every label is an integer from 0 to 4."""
    assert {p["label"] for p in pairs} <= set(range(5))


def test_every_category_is_covered(pairs: list[dict[str, Any]]) -> None:
    """Every listed category has at least three pairs, and no pair uses an unlisted category."""
    counts = Counter(p["category"] for p in pairs)
    assert set(counts) == set(CATEGORIES)
    assert {c: n for c, n in counts.items() if n < MIN_PER_CATEGORY} == {}


def test_every_label_is_well_used(pairs: list[dict[str, Any]]) -> None:
    """Each label 0..4 is used at least eight times overall."""
    counts = Counter(p["label"] for p in pairs)
    assert {label: counts[label] for label in range(5) if counts[label] < MIN_PER_LABEL} == {}


def test_empty_and_whitespace_answers_are_labelled_zero(pairs: list[dict[str, Any]]) -> None:
    """An empty or whitespace-only answer is labelled 0, and the empty category holds only such answers."""
    for p in pairs:
        if not p["answer"].strip():
            assert p["label"] == 0, p["id"]
        if p["category"] == "empty":
            assert not p["answer"].strip(), p["id"]
    assert any(p["answer"] == "" for p in pairs)
    assert any(p["answer"] and not p["answer"].strip() for p in pairs)


def test_rationales_are_one_nonempty_line(pairs: list[dict[str, Any]]) -> None:
    """Every rationale is non-empty and a single line."""
    for p in pairs:
        assert p["rationale"].strip(), p["id"]
        assert len(p["rationale"].splitlines()) == 1, p["id"]


def test_no_duplicate_question_answer_pairs(pairs: list[dict[str, Any]]) -> None:
    """No (question, answer) pair occurs twice."""
    counts = Counter((p["question"], p["answer"]) for p in pairs)
    assert [pair for pair, n in counts.items() if n > 1] == []
