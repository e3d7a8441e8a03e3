"""The conversation around the judged pair, in the redacted event and its row: every context turn and the system
instructions are redacted like the question, the window is what the row counts, and MONITOR_STORE_TEXT decides
whether the context text is kept or only its digest."""

from __future__ import annotations

import hashlib
import json
import random
from datetime import UTC, datetime

import pytest

from consumers.sampling import DecisionKind, SampleDecision
from monitor.judges.base import JudgeInfo, Judgement
from monitor.judges.context_window import ContextWindow, windowed
from monitor.privacy.events import JudgedEvent, redact_event
from monitor.privacy.redactor import build_redactor
from monitor.privacy.settings import RedactionSettings
from monitor.privacy.spans import Redacted
from monitor.runtime.rows import TextPolicy, build_row, context_digest
from schemas.events import Turn
from schemas.scored import ScoredRow
from tests.monitor.privacy.events import event
from tests.pii_corpus import planted_snippet, planted_value

INFO = JudgeInfo(method="rubric", model="m", judge_id="rubric-1")
DECISION = SampleDecision(True, 1.0, DecisionKind.BASE)
NOW = datetime(2026, 12, 1, tzinfo=UTC)
VERDICT = Judgement(score=0.75, raw_score=3.0, reasoning="follows up on the kettles")
REDACTOR = build_redactor(RedactionSettings())


def _pii(kind: str, seed: int) -> str:
    """A valid value of `kind` from the PII corpus, with the words its format needs around it."""
    rng = random.Random(seed)
    value, fmt = planted_value(rng, kind)
    return planted_snippet(rng, value, fmt)


EMAIL, CARD, IBAN, PHONE = _pii("EMAIL", 1), _pii("CARD", 2), _pii("IBAN", 3), _pii("PHONE", 4)
OLDEST = "the oldest turn, marked zebra-4411"


def conversation() -> JudgedEvent:
    """A follow-up with five earlier messages and system instructions, personal data in a kept turn and in the
    system text, cut to 2 turns and redacted as the pipeline does (window first)."""
    e = event(question="How long does the second one take?", response="About four days.").model_copy(
        update={
            "context": (
                Turn("user", OLDEST),
                Turn("assistant", "Hello!"),
                Turn("user", f"Which kettles ship to Spain? Mail me at {EMAIL}, card {CARD}"),
                Turn("assistant", f"The blue and the steel kettle; I can call {PHONE}."),
            ),
            "system": f"You sell kettles. Refunds go to IBAN {IBAN}.",
            "turn": 2,
        }
    )
    assert REDACTOR is not None
    return redact_event(windowed(e, ContextWindow(turns=2, max_chars=8_000)), REDACTOR)


def _row(policy: TextPolicy) -> tuple[JudgedEvent, ScoredRow]:
    judged = conversation()
    return judged, build_row(judged, INFO, DECISION, VERDICT, latency_ms=3, scored_at=NOW, text_policy=policy)


def test_every_context_turn_and_the_system_text_are_redacted_roles_kept() -> None:
    """No corpus value survives in the judged context or system text; each is a placeholder, the roles stay, the
    counts include them, and the turn dropped by the window is gone before redaction ran."""
    judged = conversation().judged
    text = json.dumps([list(t) for t in judged.context]) + judged.system
    for value in (EMAIL, CARD, IBAN, PHONE):
        assert value not in text
    assert [t.role for t in judged.context] == ["user", "assistant"] and OLDEST not in text
    assert "[EMAIL]" in judged.context[0].text and "[CARD]" in judged.context[0].text
    assert "[PHONE]" in judged.context[1].text and "[IBAN]" in judged.system
    counts = conversation().redactions
    assert all(counts.get(kind, 0) >= 1 for kind in ("EMAIL", "CARD", "PHONE", "IBAN")), counts


def test_a_redactor_that_raises_on_a_context_turn_raises_out_of_redact_event() -> None:
    """A recognizer raising on a context turn's or the system text's fails the event (the scorer dead-letters it
    with redaction_failed), as it does on the question: nothing of it is judged half-redacted."""

    class Raising:
        name = "raising"

        def redact(self, text: str) -> Redacted:
            if "zebra" in text:
                raise ValueError("recognizer bug")
            return Redacted(text)

    for update in ({"context": (Turn("user", "zebra in a turn"),)}, {"system": "zebra in the brief"}):
        with pytest.raises(ValueError, match="recognizer bug"):
            redact_event(event().model_copy(update=update), Raising())


def test_redacted_stores_the_windowed_redacted_context_and_its_count() -> None:
    """`redacted`: the row's context is the JSON of the turns the judge read, with placeholders; context_turns is
    their number; the turn index and the system text are kept."""
    judged, r = _row("redacted")
    assert r.context_turns == 2 and r.turn == 2
    stored = json.loads(r.context)
    assert stored == [{"role": t.role, "text": t.text} for t in judged.judged.context]
    assert r.system_instructions == judged.judged.system and "[IBAN]" in r.system_instructions
    assert r.context_digest == context_digest(judged.judged)


def test_none_stores_only_the_digest_of_the_context() -> None:
    """`none`: no context or system text, but the number of turns, the turn and the SHA-256 of the canonical JSON
    of the redacted context the judge read (recomputable from the text, different for another context)."""
    judged, r = _row("none")
    assert (r.context, r.system_instructions, r.question) == ("", "", "")
    assert r.context_turns == 2 and r.turn == 2
    canonical = json.dumps(
        {"context": [{"role": t.role, "text": t.text} for t in judged.judged.context], "system": judged.judged.system},
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
    )
    assert r.context_digest == hashlib.sha256(canonical.encode()).hexdigest()
    other = judged.judged.model_copy(update={"system": judged.judged.system + "!"})
    assert context_digest(other) != r.context_digest


def test_full_stores_the_windowed_context_as_received() -> None:
    """`full`: the kept turns and system text as received (the judge still read them redacted), never the turn
    the window dropped."""
    _, r = _row("full")
    stored = json.loads(r.context)
    assert EMAIL in stored[0]["text"] and IBAN in r.system_instructions
    assert len(stored) == 2 and OLDEST not in r.context


def test_an_event_without_context_reads_as_old_rows_do() -> None:
    """A flat event: turn 0, no context turns, '' context and digest."""
    assert REDACTOR is not None
    r = build_row(
        redact_event(event(), REDACTOR), INFO, DECISION, VERDICT, latency_ms=1, scored_at=NOW, text_policy="redacted"
    )
    assert (r.turn, r.context_turns, r.context, r.system_instructions, r.context_digest) == (0, 0, "", "", "")


def test_a_refused_row_becomes_an_error_row_without_the_context_text() -> None:
    """A row the store refused is rewritten as an error row: no context or system text, the turn, the number of
    context turns and the digest kept."""
    _, r = _row("redacted")
    e = r.as_error("refused")
    assert (e.context, e.system_instructions, e.question) == ("", "", "")
    assert (e.turn, e.context_turns, e.context_digest) == (2, 2, r.context_digest) and e.context_digest
