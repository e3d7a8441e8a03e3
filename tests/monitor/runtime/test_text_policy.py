"""MONITOR_STORE_TEXT: what text each policy keeps in a row (redacted as judged, none, or full as received)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from consumers.sampling import DecisionKind, SampleDecision
from monitor.judges.base import JudgeFailure, JudgeInfo, Judgement
from monitor.privacy.events import redact_event
from monitor.privacy.redactor import build_redactor
from monitor.privacy.settings import RedactionSettings
from monitor.runtime.rows import TextPolicy, build_row
from schemas.scored import ScoredRow
from tests.monitor.privacy.events import event

INFO = JudgeInfo(method="statements", model="m", judge_id="statements-1")
DECISION = SampleDecision(True, 1.0, DecisionKind.BASE)
NOW = datetime(2026, 12, 1, tzinfo=UTC)
JUDGED = redact_event(
    event(
        question="Card 4539 1488 0343 6467 charged twice?",
        response="Refund to a@b.io sent.",
        metadata={"email": "a@b.io"},
    ),
    build_redactor(RedactionSettings()),
)
VERDICT = Judgement(
    score=0.5,
    raw_score=2.0,
    reasoning="about [CARD]",
    statements=("Refund to [EMAIL] sent.",),
    verdicts=("yes",),
    verdict_reasons=("answers it",),
)


def row(policy: TextPolicy, outcome: Judgement | JudgeFailure = VERDICT) -> ScoredRow:
    """The row of the judged event under `policy`."""
    return build_row(JUDGED, INFO, DECISION, outcome, latency_ms=3, scored_at=NOW, text_policy=policy)


def test_redacted_keeps_the_text_as_the_judge_saw_it() -> None:
    """`redacted` stores the placeholders' text, the judge's detail and the counts."""
    r = row("redacted")
    assert (r.question, r.response) == ("Card [CARD] charged twice?", "Refund to [EMAIL] sent.")
    assert (
        r.metadata == {"email": "[EMAIL]"}
        and r.statements == ["Refund to [EMAIL] sent."]
        and r.reasoning == "about [CARD]"
    )
    assert r.redactions == {"CARD": 1, "EMAIL": 2} and r.redactor


def test_none_keeps_scores_verdicts_and_ids_but_no_text() -> None:
    """`none` stores no question, response, reasoning, statement or reason text; verdicts, counts and ids stay."""
    r = row("none")
    assert (r.question, r.response, r.reasoning, r.statements, r.verdict_reasons) == ("", "", "", [], [])
    assert r.verdicts == ["yes"] and r.n_statements == 1 and r.score == 0.5 and r.event_id == "e1"
    assert r.redactions == {"CARD": 1, "EMAIL": 2}


def test_full_keeps_the_text_as_received() -> None:
    """`full` stores the original question, response and metadata (the judge still saw the redacted ones)."""
    r = row("full")
    assert r.question == "Card 4539 1488 0343 6467 charged twice?" and r.metadata == {"email": "a@b.io"}


@pytest.mark.parametrize("policy", ["redacted", "none", "full"])
def test_error_rows_follow_the_policy_too(policy: TextPolicy) -> None:
    """An error row keeps the counts and, under `none`, no text."""
    r = row(policy, JudgeFailure("invalid_reply", "no JSON"))
    assert r.status == "error" and r.redactions == {"CARD": 1, "EMAIL": 2}
    assert (r.question == "") == (policy == "none")


def test_a_refused_row_is_described_by_field_and_reason_never_by_its_values() -> None:
    """A judgement the row contract refuses is logged and stored as field and reason; pydantic's own message would
    quote the judged text."""
    from pydantic import ValidationError

    from monitor.runtime.scorer import row_problem as _row_problem

    good = row("redacted")
    try:
        ScoredRow.model_validate({**good.model_dump(), "statements": "my card 4539 1488 0343 6467"})
    except ValidationError as e:
        assert "4539" in str(e)  # what the old message would have carried
        assert "4539" not in _row_problem(e) and "statements" in _row_problem(e)
    else:
        raise AssertionError("the row should have been refused")
