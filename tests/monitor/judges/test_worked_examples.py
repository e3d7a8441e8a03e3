"""The worked examples in both judges' system prompts: coverage, valid expected replies, no overlap with the
calibration golden set, injection defences intact, and a new judge_id for the new prompt."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from monitor.judges.prompts import DATA_RULES
from monitor.judges.rubric import INSTRUCTIONS as RUBRIC_INSTRUCTIONS
from monitor.judges.rubric import RubricJudge, RubricReply
from monitor.judges.statements import INSTRUCTIONS as STATEMENTS_INSTRUCTIONS
from monitor.judges.statements import StatementsJudge, StatementsReply
from monitor.judges.structured_output import parse_reply
from monitor.judges.worked_examples import EXAMPLES
from tests.fake_messages_api import SECTIONS, FakeMessagesAPI
from tests.monitor.judges.conftest import PADDED, QUESTION, TIGHT, judge_settings

GOLDEN_SET = Path(__file__).resolve().parents[3] / "monitor" / "calibration" / "golden_set.jsonl"
JUDGES = [(RubricJudge, RUBRIC_INSTRUCTIONS, RubricReply), (StatementsJudge, STATEMENTS_INSTRUCTIONS, StatementsReply)]
IDS = ["rubric", "statements"]

REQUIRED_CATEGORIES = (
    "tight answer",
    "padding",
    "off-topic",
    "partial answer",
    "refusal",
    "wrong but on topic",
    "clarifying question",
    "i don't know",
    "empty answer",
    "code answer",
    "non-english",
    "steering the judge",
)


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def golden_pairs(path: Path = GOLDEN_SET) -> set[tuple[str, str]]:
    """The golden set's (question, answer) pairs, whitespace- and case-normalised; empty if the file is absent."""
    if not path.exists():
        return set()
    pairs = set()
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        answer = row.get("answer", row.get("response"))
        assert isinstance(row.get("question"), str) and isinstance(answer, str), (
            f"{path}:{n} has no question/answer pair"
        )
        pairs.add((_norm(row["question"]), _norm(answer)))
    return pairs


def examples_text(system_prompt: str, instructions: str) -> str:
    """The part of a system prompt after its instructions: the worked-examples section."""
    assert system_prompt.startswith(instructions + "\n\n")
    return system_prompt[len(instructions) :]


def test_the_examples_never_repeat_a_golden_set_pair() -> None:
    """No worked example's (question, response) is a pair of monitor/calibration/golden_set.jsonl, compared after
    normalising whitespace and case. If the file does not exist yet, the examples are checked against an empty set
    (the check runs, it does not skip) until it does."""
    golden = golden_pairs()
    ours = {(_norm(ex.question), _norm(ex.response)) for ex in EXAMPLES}
    assert ours.isdisjoint(golden), sorted(ours & golden)


def test_golden_pairs_reads_question_and_answer_or_response(tmp_path: Path) -> None:
    """The golden-set reader takes `answer` or `response`, normalises text, skips blank lines and fails on other
    rows."""
    path = tmp_path / "golden.jsonl"
    path.write_text(
        '{"question": "Q  one?", "answer": "A."}\n\n{"question": "Q2?", "response": "B", "label": 3}\n',
        encoding="utf-8",
    )
    assert golden_pairs(path) == {("q one?", "a."), ("q2?", "b")}
    path.write_text('{"prompt": "Q?", "answer": "A."}\n', encoding="utf-8")
    with pytest.raises(AssertionError, match="no question/answer pair"):
        golden_pairs(path)
    assert golden_pairs(tmp_path / "absent.jsonl") == set()


def test_the_examples_cover_every_category_and_the_whole_scale() -> None:
    """The examples cover the twelve calibration categories, every score 0–4 and every verdict, with no repeated
    pair."""
    categories = [ex.category.casefold().replace('"', "") for ex in EXAMPLES]
    assert [c for c in REQUIRED_CATEGORIES if not any(cat.startswith(c) for cat in categories)] == []
    assert {ex.score for ex in EXAMPLES} == {0, 1, 2, 3, 4}
    assert {s.verdict for ex in EXAMPLES for s in ex.statements} == {"yes", "no", "idk"}
    assert len({(ex.question, ex.response) for ex in EXAMPLES}) == len(EXAMPLES)


def test_the_two_expected_replies_of_each_example_agree() -> None:
    """An example scored 0 has no statement judged relevant, and one scored 4 has none judged off-question."""
    assert [ex.question for ex in EXAMPLES if ex.score == 0 and any(s.verdict == "yes" for s in ex.statements)] == []
    assert [ex.question for ex in EXAMPLES if ex.score == 4 and any(s.verdict == "no" for s in ex.statements)] == []


@pytest.mark.parametrize(("cls", "instructions", "reply_model"), JUDGES, ids=IDS)
def test_each_expected_reply_in_the_prompt_is_a_valid_reply_matching_its_example(
    cls: type[RubricJudge] | type[StatementsJudge], instructions: str, reply_model: type[BaseModel]
) -> None:
    """Every "Reply:" line of the prompt validates as the judge's reply model and carries its example's score or
    verdicts."""
    section = examples_text(cls.system_prompt, instructions)
    replies = [
        parse_reply(reply_model, line.removeprefix("Reply: "))
        for line in section.splitlines()
        if line.startswith("Reply: ")
    ]
    assert len(replies) == len(EXAMPLES)
    for reply, ex in zip(replies, EXAMPLES, strict=True):
        if isinstance(reply, RubricReply):
            assert (reply.score, reply.reasoning) == (ex.score, ex.reasoning)
        else:
            assert isinstance(reply, StatementsReply)
            assert [(s, v.verdict, v.reason) for s, v in zip(reply.statements, reply.verdicts, strict=True)] == [
                (s.text, s.verdict, s.reason) for s in ex.statements
            ]


@pytest.mark.parametrize(("cls", "instructions", "reply_model"), JUDGES, ids=IDS)
def test_the_examples_cannot_pass_for_the_real_sections(
    cls: type[RubricJudge] | type[StatementsJudge], instructions: str, reply_model: type[BaseModel]
) -> None:
    """The instructions (with the data rules) come first unchanged; the examples never use the section tag names or
    anything like a section code, and every question and response line is quoted with ">"."""
    assert DATA_RULES in instructions
    section = examples_text(cls.system_prompt, instructions)
    for name in SECTIONS:
        assert name not in section
    assert "_CODE" not in section and re.search(r"\b[0-9a-f]{16}\b", section) is None
    # Between "Question:"/"Response:" and the next label, every line is a quoted line.
    quoted = re.findall(r"^(?:Question|Response):\n((?:.*\n)*?)(?=Response:|Reply: )", section, re.MULTILINE)
    assert len(quoted) == 2 * len(EXAMPLES)
    assert [line for block in quoted for line in block.splitlines() if not line.startswith(">")] == []
    # Nothing from the judged texts of the other tests leaks into the system prompt.
    assert QUESTION not in section and TIGHT not in section and PADDED not in section


@pytest.mark.parametrize(("cls", "instructions", "reply_model"), JUDGES, ids=IDS)
def test_the_worked_examples_give_the_judge_a_new_id(
    fake_messages_api: FakeMessagesAPI,
    cls: type[RubricJudge] | type[StatementsJudge],
    instructions: str,
    reply_model: type[BaseModel],
) -> None:
    """The judge_id is derived from the prompt: with the examples it differs from the instructions-only prompt's id,
    and it is stable for the same prompt."""

    class InstructionsOnly(cls):  # type: ignore[valid-type,misc]
        system_prompt = instructions

    settings = judge_settings(fake_messages_api, cls.method).judge
    new, again, old = cls(settings).info.judge_id, cls(settings).info.judge_id, InstructionsOnly(settings).info.judge_id
    assert new == again and new != old
    assert new.startswith(f"{cls.method}-") and old.startswith(f"{cls.method}-")
