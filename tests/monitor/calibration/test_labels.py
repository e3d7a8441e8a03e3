"""Reading labelled sets: the accepted shapes, one-line errors naming the line for each kind of bad input, and
where the shipped golden set is looked for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import monitor.calibration
from monitor.calibration.labels import (
    InvalidLabel,
    LabelledPair,
    ValidLabel,
    check_label,
    golden_path,
    parse_labels,
    read_labels,
)
from schemas.errors import EXIT_USAGE, LabelsError, UsageError
from schemas.events import Turn

GOOD: dict[str, Any] = {"question": "When did order A17 ship?", "answer": "Order A17 shipped on 3 March.", "label": 4}


def jsonl(*lines: object) -> bytes:
    """JSONL bytes: dicts as JSON, strings as they are."""
    return "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines).encode()


def error_of(data: bytes, scale: str = "rubric") -> str:
    """The one-line message parsing `data` fails with."""
    with pytest.raises(LabelsError) as caught:
        parse_labels(data, scale, "set.jsonl")  # type: ignore[arg-type]
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_pairs_keep_their_fields_labels_on_both_scales_and_their_line_numbers() -> None:
    """Both answer spellings, optional id/category, an ignored rationale; blank lines are skipped but counted."""
    data = jsonl(
        {**GOOD, "id": "a-1", "category": "orders", "rationale": "answers it"},
        "",
        "   ",
        {"question": "Q?", "response": "R.", "label": 0, "id": 7},
    )
    first, second = parse_labels(data, "rubric", "set.jsonl")
    assert first == LabelledPair(1, GOOD["question"], GOOD["answer"], 4.0, 1.0, "a-1", "orders")
    assert second == LabelledPair(4, "Q?", "R.", 0.0, 0.0, "7", None)
    assert second.key == "7" and LabelledPair(9, "q", "a", 1, 0.25).key == "line 9"


def test_unit_scale_takes_decimals_and_the_rubric_scale_whole_numbers_written_as_floats() -> None:
    """--label-scale unit keeps 0.8 as is; on the rubric scale 3.0 is 3 (0.75 on the unit scale)."""
    [unit] = parse_labels(jsonl({**GOOD, "label": 0.8}), "unit", "s")
    [rubric] = parse_labels(jsonl({**GOOD, "label": 3.0}), "rubric", "s")
    assert (unit.label, unit.label_unit) == (0.8, 0.8)
    assert (rubric.label, rubric.label_unit) == (3.0, 0.75)


def test_windows_line_ends_and_a_byte_order_mark_are_read() -> None:
    """CRLF line ends and a UTF-8 BOM (what some editors write) do not break the first or any line."""
    data = b"\xef\xbb\xbf" + json.dumps(GOOD).encode() + b"\r\n" + json.dumps(GOOD | {"label": 1}).encode() + b"\r\n"
    assert [p.label for p in parse_labels(data, "rubric", "s")] == [4.0, 1.0]


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (
            (GOOD, "{broken"),
            "set.jsonl line 2: not valid JSON (Expecting property name enclosed in double quotes at column 2)",
        ),
        ((GOOD, "[1, 2]"), "set.jsonl line 2: not a JSON object (a array)"),
        (({"answer": "A.", "label": 1},), "set.jsonl line 1: missing field 'question'"),
        (({"question": " ", "answer": "A.", "label": 1},), "set.jsonl line 1: question is empty"),
        (({"question": "Q?", "label": 1},), "set.jsonl line 1: missing field 'answer' (or 'response')"),
        (
            ({"question": "Q?", "answer": "A.", "response": "R.", "label": 1},),
            "set.jsonl line 1: has both 'answer' and 'response'; give one",
        ),
        (({"question": "Q?", "answer": 3, "label": 1},), "set.jsonl line 1: answer must be a string, not number"),
        (({"question": "Q?", "answer": "A."},), "set.jsonl line 1: missing field 'label'"),
        (
            (GOOD, "", {**GOOD, "label": 5}),
            "set.jsonl line 3: label 5 is out of range 0–4 (the rubric scale; --label-scale unit takes 0–1)",
        ),
        (
            ({**GOOD, "label": -1},),
            "set.jsonl line 1: label -1 is out of range 0–4 (the rubric scale; --label-scale unit takes 0–1)",
        ),
        (
            ({**GOOD, "label": 2.5},),
            "set.jsonl line 1: label 2.5 is not an integer; rubric labels are 0–4 (--label-scale unit takes 0–1 with "
            "decimals)",
        ),
        (({**GOOD, "label": "3"},), 'set.jsonl line 1: label must be a number, not "3"'),
        (({**GOOD, "label": True},), "set.jsonl line 1: label must be a number, not true"),
        (({**GOOD, "label": None},), "set.jsonl line 1: label must be a number, not null"),
        (({**GOOD, "lable": 3},), "set.jsonl line 1: unknown field 'lable': did you mean 'label'?"),
        (
            ({"question": "Q?", "anwser": "A.", "label": 1},),
            "set.jsonl line 1: unknown field 'anwser': did you mean 'answer'?",
        ),
        (({**GOOD, "id": ["x"]},), "set.jsonl line 1: id must be a string or an integer, not array"),
        (({**GOOD, "category": 3},), "set.jsonl line 1: category must be a string, not number"),
        (({**GOOD, "id": "x"}, {**GOOD, "id": "x"}), "set.jsonl line 2: id 'x' is also on line 1; ids must be unique"),
    ],
)
def test_a_bad_line_is_one_error_naming_the_line_and_the_problem(lines: tuple[object, ...], expected: str) -> None:
    """Each kind of bad line stops the read with one line: the file, the line number and what is wrong."""
    assert error_of(jsonl(*lines)) == expected


def test_fields_beyond_the_known_ones_are_ignored_and_listed() -> None:
    """A label export's notes, annotator ids and timestamps are read past and listed once, not refused."""
    from monitor.calibration.labels import ignored_fields, parse_labels

    extra = {"notes": "checked twice", "annotator": "a-7", "relevant_statements": [1], "labelled_at": "2026-11-30"}
    pairs = parse_labels(jsonl({**GOOD, **extra}, {**GOOD, "notes": "ok"}), "rubric", "set.jsonl")
    assert [p.label for p in pairs] == [GOOD["label"]] * 2
    assert ignored_fields(pairs) == ["annotator", "labelled_at", "notes", "relevant_statements"]


def test_labels_outside_the_unit_scale_and_non_finite_labels_are_refused() -> None:
    """On the unit scale 1.5 is out of range; NaN (which Python's JSON reader accepts) is never a label."""
    assert (
        error_of(jsonl({**GOOD, "label": 1.5}), "unit")
        == "set.jsonl line 1: label 1.5 is out of range 0–1 (the unit scale)"
    )
    assert (
        error_of(b'{"question": "Q?", "answer": "A.", "label": NaN}', "unit")
        == "set.jsonl line 1: label nan is not a finite number"
    )


def test_bytes_that_are_not_utf8_name_their_line() -> None:
    """A Latin-1 byte in line 2 is reported on line 2, not as a failure of the whole file."""
    data = json.dumps(GOOD).encode() + b"\n" + b'{"question": "caf\xe9?", "answer": "A.", "label": 1}'
    assert error_of(data) == "set.jsonl line 2: not UTF-8 (byte 18 of the line)"


@pytest.mark.parametrize("data", [b"", b"\n\n  \n"])
def test_an_empty_file_is_one_line_saying_so(data: bytes) -> None:
    """No pairs at all (empty, or blank lines only) is an error, not a report over nothing."""
    assert error_of(data) == "set.jsonl has no labelled pairs (it is empty or only blank lines)"


def test_a_missing_file_is_a_usage_error_exiting_2(tmp_path: Path) -> None:
    """An unreadable file is a one-line `LabelsError`, a `UsageError` with exit code 2."""
    with pytest.raises(
        LabelsError, match=r"^cannot read labels file .*nope\.jsonl: No such file or directory$"
    ) as caught:
        read_labels(tmp_path / "nope.jsonl")
    assert isinstance(caught.value, UsageError) and caught.value.exit_code == EXIT_USAGE


def test_check_label_is_pure_and_says_what_is_wrong() -> None:
    """check_label returns a typed outcome, without raising: the number, or the reason it is not valid."""
    assert check_label(4, "rubric") == ValidLabel(4.0) and check_label(0.25, "unit") == ValidLabel(0.25)
    assert check_label(1.5, "unit") == InvalidLabel("label 1.5 is out of range 0–1 (the unit scale)")
    assert check_label("4", "rubric") == InvalidLabel('label must be a number, not "4"')
    assert check_label(True, "unit") == InvalidLabel("label must be a number, not true")


def test_golden_resolves_to_the_file_shipped_in_the_calibration_package() -> None:
    """--golden means golden_set.jsonl beside monitor/calibration/__init__.py (found through importlib.resources)."""
    package_dir = Path(monitor.calibration.__file__).resolve().parent
    assert golden_path().resolve() == package_dir / "golden_set.jsonl"


FOLLOW_UP: dict[str, Any] = {
    "question": "How long does the second one take?",
    "answer": "About four days.",
    "label": 4,
    "system": "You help customers of a kettle shop.",
    "context": [
        {"role": "user", "text": "Which kettles ship to Spain?"},
        {"role": "assistant", "text": "The blue and the steel kettle."},
        {"role": "user", "text": "Nice."},
        {"role": "assistant", "text": "Anything else?"},
    ],
    "tags": ["multi_turn", "shop", "multi_turn"],
}


def test_a_multi_turn_case_keeps_its_context_system_tags_and_turn_index() -> None:
    """`context` becomes turns (role, text) oldest first, `system` the brief, `tags` each tag once; the turn index
    counts the user messages before the question; none of them is an ignored field."""
    [pair] = parse_labels(jsonl(FOLLOW_UP), "rubric", "set.jsonl")
    assert pair.context == (
        Turn("user", "Which kettles ship to Spain?"),
        Turn("assistant", "The blue and the steel kettle."),
        Turn("user", "Nice."),
        Turn("assistant", "Anything else?"),
    )
    assert (pair.system, pair.tags, pair.turn, pair.ignored) == (FOLLOW_UP["system"], ("multi_turn", "shop"), 2, ())


def test_a_line_without_the_multi_turn_fields_loads_as_before() -> None:
    """An old-format line (no context, system or tags) is a first turn: no context, no brief, no tags, turn 0."""
    [pair] = parse_labels(jsonl({**GOOD, "id": "a-1", "category": "orders", "rationale": "r"}), "rubric", "s")
    assert pair == LabelledPair(1, GOOD["question"], GOOD["answer"], 4.0, 1.0, "a-1", "orders")
    assert (pair.context, pair.system, pair.tags, pair.turn) == ((), "", (), 0)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"context": "earlier"}, "set.jsonl line 1: context must be an array of turns, not string"),
        (
            {"context": ["hi"]},
            "set.jsonl line 1: context turn 1 must be an object with 'role' and 'text', not string",
        ),
        (
            {"context": [{"role": "user", "content": "hi"}]},
            "set.jsonl line 1: context turn 1 must have exactly 'role' and 'text', has content, role",
        ),
        (
            {"context": [{"role": "", "text": "hi"}]},
            "set.jsonl line 1: context turn 1: role must be a non-empty string",
        ),
        (
            {"context": [{"role": "user", "text": "a"}, {"role": "user", "text": 3}]},
            "set.jsonl line 1: context turn 2: text must be a string, not number",
        ),
        (
            {"context": [{"role": "system", "text": "Be brief."}]},
            "set.jsonl line 1: context turn 1 is a system message; give the instructions as 'system'",
        ),
        ({"system": ["Be brief."]}, "set.jsonl line 1: system must be a string, not array"),
        ({"tags": "multi_turn"}, "set.jsonl line 1: tags must be an array of non-empty strings"),
        ({"tags": [""]}, "set.jsonl line 1: tags must be an array of non-empty strings"),
        ({"contxt": []}, "set.jsonl line 1: unknown field 'contxt': did you mean 'context'?"),
    ],
)
def test_a_bad_multi_turn_field_is_one_error_naming_the_line(extra: dict[str, Any], expected: str) -> None:
    """Malformed context, system or tags stop the read with one line saying what is wrong, as other bad fields do."""
    assert error_of(jsonl({**GOOD, **extra})) == expected
