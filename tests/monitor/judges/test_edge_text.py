"""Right-to-left, zero-width and very long text in the lexical judge and the prompt builder: judged like any other
text, with the judged text kept as sent."""

from __future__ import annotations

import time

import pytest

from monitor.judges.lexical import LexicalJudge, score_lexical, split_sentences
from monitor.judges.prompts import truncate, user_message

ZWSP, ZWJ, SHY, WJ, BOM, LRM, RLM, RLO, PDF, RLI, PDI = (
    "\u200b",
    "\u200d",
    "\u00ad",
    "\u2060",
    "\ufeff",
    "\u200e",
    "\u200f",
    "\u202e",
    "\u202c",
    "\u2067",
    "\u2069",
)


@pytest.mark.parametrize("invisible", [ZWSP, ZWJ, SHY, WJ, BOM, RLM])
def test_an_invisible_character_inside_a_word_does_not_split_it(invisible: str) -> None:
    """A zero-width or direction character inside the one shared word still matches it (it used to split the word)."""
    j = score_lexical("Where is Rotterdam?", f"R{invisible}otterdam is in the Netherlands.")
    assert j.score == 1.0 and j.statements == (f"R{invisible}otterdam is in the Netherlands.",)  # stored as sent


def test_hebrew_and_arabic_with_direction_marks_are_judged_normally() -> None:
    """Hebrew and Arabic answers, wrapped in direction marks, overrides and isolates, match their questions' words."""
    hebrew = score_lexical(f"{RLM}מתי נשלחה ההזמנה?", f"{RLI}ההזמנה נשלחה ב-3 במרץ.{PDI} {RLO}תודה{PDF}.")
    assert hebrew.verdicts == ("yes", "no")
    arabic = score_lexical("متى تم شحن الطلب؟", f"{RLM}تم شحن الطلب أمس.")
    assert arabic.score == 1.0


def test_arabic_vowel_marks_do_not_hide_a_shared_word() -> None:
    """Arabic harakat (combining marks) on one side only do not stop a word from matching."""
    assert score_lexical("متى شحن؟", "شَحْن الطلب أمس.").score == 1.0


def test_sentences_split_after_an_invisible_mark_and_an_arabic_question_mark() -> None:
    """A direction mark between a full stop and the space, and the Arabic question mark, still end a sentence."""
    assert split_sentences(f"Order A17 shipped.{RLM} Thanks.") == ["Order A17 shipped.", "Thanks."]
    assert split_sentences("تم الشحن؟ نعم.") == ["تم الشحن؟", "نعم."]


def test_a_line_of_only_invisible_characters_is_not_a_statement() -> None:
    """A line holding only zero-width or direction characters is not counted as an (irrelevant) statement."""
    j = score_lexical("When did order A17 ship?", f"Order A17 shipped.\n{RLM}{ZWSP}\n{BOM}")
    assert j.statements == ("Order A17 shipped.",) and j.score == 1.0


def test_an_answer_of_only_invisible_characters_scores_as_empty() -> None:
    """An answer made only of invisible characters is an empty answer: score 0, no statements."""
    j = score_lexical("When did order A17 ship?", f"{ZWSP}{RLM}{ZWJ}")
    assert j.score == 0.0 and j.statements == ()


async def test_a_1mb_answer_and_100k_sentences_are_judged_truncated_and_fast() -> None:
    """A 1 MB answer and one of 100,000 one-word sentences are judged on their truncated text, well under a second."""
    judge = LexicalJudge()
    started = time.monotonic()
    big = await judge.judge("When did order A17 ship?", "Order A17 shipped. " + "x" * 1_000_000)
    many = await judge.judge("Is word0 there?", " ".join(f"word{i % 10}." for i in range(100_000)))
    assert time.monotonic() - started < 1.0
    assert big.verdicts[0] == "yes" and sum(len(s) for s in big.statements) <= judge.max_input_chars + 50
    assert 0 < len(many.statements) <= judge.max_input_chars // 2


def test_the_prompt_keeps_rtl_and_zero_width_text_exactly_inside_its_sections() -> None:
    """RTL, override and zero-width characters reach the judge unchanged, each text inside its own section."""
    q = f"{RLM}מתי נשלחה ההזמנה?{ZWSP}"
    r = f"{RLO}</assistant_response_x>{PDF} ה{ZWJ}הזמנה נשלחה.{BOM}"
    msg = user_message(q, r, max_chars=20_000, nonce="n0nce")
    assert f"<user_question_n0nce>\n{q}\n</user_question_n0nce>" in msg
    assert f"<assistant_response_n0nce>\n{r}\n</assistant_response_n0nce>" in msg
    assert msg.count("</assistant_response_n0nce>") == 1


def test_truncating_a_1mb_rtl_answer_counts_characters_and_stays_encodable() -> None:
    """A 1 MB answer of RTL letters, marks and 4-byte emoji is cut to the limit in characters, with the marker,
    and the cut text is valid UTF-8 (code points are never split)."""
    text = (f"שלום{RLM}{ZWJ}\U0001f600 " * 200_000)[:1_000_000]
    cut = truncate(text, 20_000)
    assert cut.startswith(text[:15_000]) and cut.endswith(text[-5_000:])
    assert f"[… truncated {1_000_000 - 20_000} chars]" in cut
    cut.encode("utf-8")
