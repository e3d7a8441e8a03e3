"""Reading a labelled set: one JSON object per line with `question`, `answer` (or `response`) and a human `label`.

A multi-turn case also carries `context` (the conversation before the judged question, oldest first, each turn
`{"role": ..., "text": ...}`), and may carry `system` (the assistant's instructions) and `tags` (names to break the
report down by, e.g. `multi_turn`). All three are optional, so files written before them load unchanged.

Blank lines are skipped (line numbers still count them, so an error names the line an editor shows). Anything
else that is not a valid pair stops the whole read with one line naming the line: a calibration over a silently
shortened set would look more certain than it is."""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from schemas.errors import LabelsError
from schemas.events import Turn

Scale = Literal["rubric", "unit"]
SCALES: tuple[Scale, ...] = ("rubric", "unit")
RUBRIC_MAX = 4
GOLDEN_SET = "golden_set.jsonl"

_ANSWER_KEYS = ("answer", "response")
_KNOWN = frozenset({"question", *_ANSWER_KEYS, "label", "id", "category", "rationale", "context", "system", "tags"})
_TURN_KEYS = frozenset({"role", "text"})

_Bad = Callable[[str], "LabelsError"]  # makes the error for one line from what is wrong with it


@dataclass(frozen=True, slots=True)
class LabelledPair:
    """One labelled pair: where it was (`line`), its text, the label as written and on the 0..1 scale."""

    line: int
    question: str
    answer: str
    label: float  # as written in the file, on `scale`
    label_unit: float  # on the judges' 0..1 scale
    id: str | None = None
    category: str | None = None
    ignored: tuple[str, ...] = ()  # fields the line carries beyond the known ones (notes, annotator ids, ...)
    context: tuple[Turn, ...] = ()  # the conversation before the question, oldest first (empty: a first turn)
    system: str = ""  # the assistant's system instructions ('' when the case gives none)
    tags: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """How reports name the pair: its id, else its line."""
        return self.id if self.id is not None else f"line {self.line}"

    @property
    def turn(self) -> int:
        """The question's index among the conversation's user messages (0: the first), counted from the context."""
        return sum(1 for t in self.context if t.role == "user")


def to_unit(label: float, scale: Scale) -> float:
    """A label on the judges' 0..1 scale (rubric 0–4 divided by 4)."""
    return label / RUBRIC_MAX if scale == "rubric" else label


def golden_path() -> Path:
    """Where the shipped golden set is: `golden_set.jsonl` inside this package (it may not be installed)."""
    return Path(str(resources.files("monitor.calibration").joinpath(GOLDEN_SET)))


def read_labels(path: Path, scale: Scale = "rubric") -> list[LabelledPair]:
    """The pairs of the JSONL file at `path`; raises `LabelsError` (one line) for an unreadable or invalid file."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise LabelsError(f"cannot read labels file {path}: {e.strerror or e}") from None
    return parse_labels(data, scale, str(path))


def parse_labels(data: bytes, scale: Scale, source: str) -> list[LabelledPair]:
    """The pairs in `data` (JSONL bytes read from `source`); raises `LabelsError` naming the first bad line."""
    pairs: list[LabelledPair] = []
    lines_of_ids: dict[str, int] = {}
    for number, raw in enumerate(data.split(b"\n"), start=1):
        text = _decode(raw, number, source)
        if not text.strip():
            continue
        pair = parse_line(text, number, scale, source)
        if pair.id is not None:
            if pair.id in lines_of_ids:
                raise LabelsError(
                    f"{source} line {number}: id {pair.id!r} is also on line {lines_of_ids[pair.id]}; ids must be "
                    "unique"
                )
            lines_of_ids[pair.id] = number
        pairs.append(pair)
    if not pairs:
        raise LabelsError(f"{source} has no labelled pairs (it is empty or only blank lines)")
    return pairs


def _decode(raw: bytes, number: int, source: str) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LabelsError(f"{source} line {number}: not UTF-8 (byte {e.start + 1} of the line)") from None
    # A byte-order mark on the first line, and Windows line ends, are what editors on other systems write.
    return text.removeprefix("\ufeff").removesuffix("\r") if number == 1 else text.removesuffix("\r")


def parse_line(text: str, number: int, scale: Scale, source: str) -> LabelledPair:
    """One non-blank line as a labelled pair; raises `LabelsError` saying what is wrong with it."""

    def bad(problem: str) -> LabelsError:
        return LabelsError(f"{source} line {number}: {problem}")

    try:
        obj = json.loads(text)
    except ValueError as e:
        raise bad(
            f"not valid JSON ({e.msg} at column {e.colno})" if isinstance(e, json.JSONDecodeError) else "not valid JSON"
        ) from None
    if not isinstance(obj, dict):
        raise bad(f"not a JSON object (a {_json_type(obj)})")
    unknown = sorted(set(obj) - _KNOWN)
    for name in unknown:
        # Label exports carry notes, annotator ids and times, which are ignored; a misspelt "categroy" would vanish
        # from the per-category table instead, so a near miss of a known field is refused.
        near = difflib.get_close_matches(name, sorted(_KNOWN), n=1, cutoff=0.8)
        if near:
            raise bad(f"unknown field {name!r}: did you mean {near[0]!r}?")
    question = _text(obj, "question", bad)
    if not question.strip():
        raise bad("question is empty")
    answer_keys = [k for k in _ANSWER_KEYS if k in obj]
    if not answer_keys:
        raise bad("missing field 'answer' (or 'response')")
    if len(answer_keys) > 1:
        raise bad("has both 'answer' and 'response'; give one")
    answer = _text(obj, answer_keys[0], bad)
    if "label" not in obj:
        raise bad("missing field 'label'")
    checked = check_label(obj["label"], scale)
    if isinstance(checked, InvalidLabel):
        raise bad(checked.problem)
    label = checked.value
    return LabelledPair(
        line=number,
        question=question,
        answer=answer,
        label=label,
        label_unit=to_unit(label, scale),
        id=_id(obj.get("id"), bad),
        category=_category(obj.get("category"), bad),
        ignored=tuple(unknown),
        context=parse_context(obj.get("context"), bad),
        system=parse_system(obj.get("system"), bad),
        tags=_tags(obj.get("tags"), bad),
    )


def ignored_fields(pairs: list[LabelledPair]) -> list[str]:
    """Every field some line carries that the labels do not use, sorted (to list once)."""
    return sorted({name for pair in pairs for name in pair.ignored})


@dataclass(frozen=True, slots=True)
class ValidLabel:
    """A label that is valid on its scale, as a number on that scale."""

    value: float


@dataclass(frozen=True, slots=True)
class InvalidLabel:
    """A label that is not valid on its scale: what is wrong with it, one line."""

    problem: str


def check_label(value: Any, scale: Scale) -> ValidLabel | InvalidLabel:
    """The label as a number if it is valid on `scale`, else what is wrong with it (pure)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return InvalidLabel(f"label must be a number, not {json.dumps(value)[:40]}")
    if not math.isfinite(value):
        return InvalidLabel(f"label {value} is not a finite number")
    if scale == "rubric":
        if not float(value).is_integer():
            return InvalidLabel(
                f"label {value} is not an integer; rubric labels are 0–4 (--label-scale unit takes 0–1 with decimals)"
            )
        if not 0 <= value <= RUBRIC_MAX:
            return InvalidLabel(f"label {value:g} is out of range 0–4 (the rubric scale; --label-scale unit takes 0–1)")
        return ValidLabel(float(value))
    if not 0 <= value <= 1:
        return InvalidLabel(f"label {value:g} is out of range 0–1 (the unit scale)")
    return ValidLabel(float(value))


def _text(obj: dict[str, Any], key: str, bad: _Bad) -> str:
    if key not in obj:
        raise bad(f"missing field {key!r}")
    value = obj[key]
    if not isinstance(value, str):
        raise bad(f"{key} must be a string, not {_json_type(value)}")
    return value


def _id(value: Any, bad: _Bad) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise bad(f"id must be a string or an integer, not {_json_type(value)}")
    text = str(value)
    if not text.strip():
        raise bad("id is empty")
    return text


def _category(value: Any, bad: _Bad) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise bad(f"category must be a string, not {_json_type(value)}")
    return value if value.strip() else None


def parse_context(value: Any, bad: _Bad) -> tuple[Turn, ...]:
    """A line's `context` (absent or null: none) as turns, oldest first; raises the error `bad` makes of the problem
    when it is not an array of `{"role", "text"}` objects or holds a system message. `relevancy-monitor judge` reads
    its pairs' context with it too."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise bad(f"context must be an array of turns, not {_json_type(value)}")
    turns = []
    for index, item in enumerate(value, start=1):
        if not isinstance(item, dict):
            raise bad(f"context turn {index} must be an object with 'role' and 'text', not {_json_type(item)}")
        if set(item) != _TURN_KEYS:
            raise bad(f"context turn {index} must have exactly 'role' and 'text', has {', '.join(sorted(item))}")
        role, text = item["role"], item["text"]
        if not isinstance(role, str) or not role.strip():
            raise bad(f"context turn {index}: role must be a non-empty string")
        if role == "system":
            # The event keeps the system instructions apart from the turns; so does a labelled case.
            raise bad(f"context turn {index} is a system message; give the instructions as 'system'")
        if not isinstance(text, str):
            raise bad(f"context turn {index}: text must be a string, not {_json_type(text)}")
        turns.append(Turn(role, text))
    return tuple(turns)


def parse_system(value: Any, bad: _Bad) -> str:
    """A line's `system` instructions (absent or null: ''); raises the error `bad` makes when it is not a string."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise bad(f"system must be a string, not {_json_type(value)}")
    return value


def _tags(value: Any, bad: _Bad) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(t, str) and t.strip() for t in value):
        raise bad("tags must be an array of non-empty strings")
    return tuple(dict.fromkeys(value))  # each tag once, in the order written


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"
