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
MULTI_TURN_FIELDS: dict[str, type] = {"context": list, "system": str, "tags": list}  # optional: multi-turn cases only
# The multi-turn kinds (issue 43) and how many cases each needs at least: follow-ups relevant only through an earlier
# turn, fluent answers about the wrong item of the conversation, and refusals the assistant's brief does or does not
# call for.
MULTI_TURN_KINDS = {
    "followup_relevant": 8,
    "followup_wrong_item": 8,
    "refusal_brief_appropriate": 3,
    "refusal_brief_inappropriate": 3,
}
MIN_BRIEF_REFUSALS = 6
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
    *MULTI_TURN_KINDS,
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
    """Each pair has the six fields and at most the multi-turn ones besides, each of its expected JSON type (label
    an integer, not a bool or float)."""
    for p in pairs:
        assert set(FIELDS) <= set(p) <= set(FIELDS) | set(MULTI_TURN_FIELDS), p.get("id")
        for name, kind in {**FIELDS, **MULTI_TURN_FIELDS}.items():
            assert name not in p or type(p[name]) is kind, (p["id"], name)
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


def test_multi_turn_cases_of_each_kind(pairs: list[dict[str, Any]]) -> None:
    """Each multi-turn kind has its minimum of cases, and brief-dependent refusals number at least six in all."""
    counts = Counter(p["category"] for p in pairs)
    assert {k: counts[k] for k, least in MULTI_TURN_KINDS.items() if counts[k] < least} == {}
    assert counts["refusal_brief_appropriate"] + counts["refusal_brief_inappropriate"] >= MIN_BRIEF_REFUSALS


def test_every_multi_turn_case_has_context_a_label_and_the_tag(pairs: list[dict[str, Any]]) -> None:
    """A multi-turn case carries earlier turns (role and non-empty text, no system message, the last one the
    assistant's, which the question follows), a rubric label and the `multi_turn` tag; a case with context is a
    multi-turn one; the refusal kinds carry the brief they depend on."""
    multi = [p for p in pairs if p["category"] in MULTI_TURN_KINDS]
    assert multi
    for p in multi:
        context = p.get("context")
        assert context, p["id"]
        for turn in context:
            assert set(turn) == {"role", "text"} and turn["role"] in {"user", "assistant"}, p["id"]
            assert turn["text"].strip(), p["id"]
        assert context[-1]["role"] == "assistant", p["id"]
        assert p["label"] in range(5) and p["tags"] == ["multi_turn"], p["id"]
        if p["category"].startswith("refusal_brief_"):
            assert p.get("system", "").strip(), p["id"]
    assert all(p["category"] in MULTI_TURN_KINDS for p in pairs if "context" in p or "tags" in p)


def test_multi_turn_labels_follow_their_kind(pairs: list[dict[str, Any]]) -> None:
    """Relevant follow-ups and brief-called refusals are labelled 3 or 4; wrong-item answers and refusals the brief
    does not call for 0 or 1."""
    relevant = {"followup_relevant", "refusal_brief_appropriate"}
    for p in pairs:
        if p["category"] in relevant:
            assert p["label"] >= 3, p["id"]
        elif p["category"] in MULTI_TURN_KINDS:
            assert p["label"] <= 1, p["id"]


def test_the_shipped_set_loads_with_context_system_and_turn() -> None:
    """Read by the calibration's reader, the multi-turn cases keep their turns, brief, tag and turn index."""
    from monitor.calibration.labels import golden_path, read_labels

    loaded = read_labels(golden_path())
    multi = [p for p in loaded if p.context]
    assert len(multi) >= sum(MULTI_TURN_KINDS.values())
    assert all(p.tags == ("multi_turn",) and p.turn >= 1 for p in multi)
    assert any(p.system for p in multi)
    first = next(p for p in multi if p.category == "followup_relevant")
    assert (first.context[0].role, first.context[0].text) == ("user", "Which kettles ship to Spain?")
    assert first.question == "How long does the second one take?" and first.label == 4
    assert all(not p.context and not p.system and p.tags == () and p.turn == 0 for p in loaded if p not in multi)
