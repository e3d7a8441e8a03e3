"""The `lexical` judge: an offline, deterministic HEURISTIC, not an LLM. For tests, demos and air-gapped dry
runs; it measures word overlap, which only loosely tracks relevancy."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence

from monitor.judges.base import JudgeInfo, Judgement, make_judge_id
from monitor.judges.prompts import truncate
from schemas.events import Turn

# Invisible format characters that turn up in real text: zero-width space/joiners, direction marks, embeddings
# and isolates, word joiner, BOM. Between a sentence's full stop and the next space they must not stop the
# split, and a "sentence" of nothing else is not a statement.
_INVISIBLE = "\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
_SENTENCE_SPLIT = re.compile(rf"(?<=[.!?\u061f\u06d4])[{_INVISIBLE}]*\s+|\n+")  # also the Arabic ؟ and ۔
_BLANK = re.compile(rf"[\s{_INVISIBLE}]*")
_WORD = re.compile(r"\w+", re.UNICODE)
_MIN_PREFIX = 4  # "ship" matches "shipped"; a crude stand-in for stemming

STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having he
    her here hers him his how i if in into is it its itself just let me more most my no nor not now of off on once
    only or other our ours out over own please same she should so some such than thanks that the their theirs them
    then there these they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours hi hello dear sure ok okay yes get got getting tell know want need like
    thank thing things""".split()
)

PROMPT = (
    "lexical-v3: sentence relevant iff it shares a content word (prefix>=4) with the question, echoes excluded,"
    " a redaction placeholder matching only itself"
)
# What redaction leaves in place of personal data ([CARD], [EMAIL], a user's [ORDER_REF]) stands for the removed
# item: "[IP]" in the question and in the answer is the same address, but "[CARD]" is not the word "cards".
_PLACEHOLDER = re.compile(r"\[([A-Z][A-Z0-9_]{0,31})\]")


def _placeholder_token(m: re.Match[str]) -> str:
    return f" ph_{m.group(1).lower()}_ph "


def split_sentences(text: str) -> list[str]:
    """Split a response into sentences on terminal punctuation and line breaks, dropping blank ones."""
    return [s.strip() for s in _SENTENCE_SPLIT.split(text) if s and not _BLANK.fullmatch(s)]


def _fold(text: str) -> str:
    """`text` for word matching: NFC, without format characters (Cf) or combining marks (M). A zero-width
    space or soft hyphen inside a word, or Arabic and Hebrew vowel marks, would otherwise split it in two for
    `\\w+`; both sides are folded, so a word still matches itself."""
    if text.isascii():  # the common case: nothing to fold
        return text
    return "".join(ch for ch in unicodedata.normalize("NFC", text) if not _invisible_or_mark(unicodedata.category(ch)))


def _invisible_or_mark(category: str) -> bool:
    return category == "Cf" or category.startswith("M")


def content_words(text: str) -> set[str]:
    """Lower-cased words that are not stopwords (format characters and combining marks ignored; a placeholder is a
    word of its own)."""
    return {
        w
        for w in (m.group(0).lower() for m in _WORD.finditer(_fold(_PLACEHOLDER.sub(_placeholder_token, text))))
        if w not in STOPWORDS
    }


def _match(a: str, b: str) -> bool:
    if a == b:
        return True
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    return len(short) >= _MIN_PREFIX and long_.startswith(short)


def _normalised(text: str) -> str:
    return " ".join(m.group(0).lower() for m in _WORD.finditer(_fold(text)))


class LexicalJudge:
    """Word-overlap heuristic: score = share of response sentences sharing a content word with the question."""

    def __init__(self, max_input_chars: int = 20_000) -> None:
        self.max_input_chars = max_input_chars
        params = {"max_input_chars": max_input_chars}
        self.info = JudgeInfo(
            method="lexical",
            model="heuristic",
            judge_id=make_judge_id("lexical", "heuristic", PROMPT, params),
            heuristic=True,
        )

    @property
    def stats(self) -> Mapping[str, int]:
        """No API, no counters."""
        return {}

    @property
    def rate_limited(self) -> int:
        """Never rate limited: it calls nothing."""
        return 0

    async def judge(self, question: str, response: str, *, context: Sequence[Turn] = (), system: str = "") -> Judgement:
        """Score one pair (texts truncated like the LLM judges'); never fails and never calls out. Word overlap has
        no use for the context: it is ignored, so the heuristic's scores and id stay what they were."""
        return score_lexical(truncate(question, self.max_input_chars), truncate(response, self.max_input_chars))

    async def aclose(self) -> None:
        """Nothing to release."""


def score_lexical(question: str, response: str) -> Judgement:
    """The pure scoring function behind `LexicalJudge`."""
    sentences = split_sentences(response)
    if not sentences:
        return Judgement(score=0.0, raw_score=0.0, reasoning="heuristic: empty response")
    q_words = content_words(question)
    q_norm = _normalised(question)
    verdicts: list[str] = []
    reasons: list[str] = []
    for sentence in sentences:
        if _normalised(sentence) == q_norm:
            verdicts.append("no")
            reasons.append("repeats the question")
            continue
        shared = sorted(w for w in content_words(sentence) if any(_match(w, q) for q in q_words))
        verdicts.append("yes" if shared else "no")
        reasons.append(f"shares: {', '.join(shared[:5])}" if shared else "no content word in common with the question")
    relevant = verdicts.count("yes")
    share = relevant / len(sentences)
    return Judgement(
        score=share,
        raw_score=share,
        reasoning=f"heuristic: {relevant} of {len(sentences)} sentences share a content word with the question",
        statements=tuple(sentences),
        verdicts=tuple(verdicts),
        verdict_reasons=tuple(reasons),
    )
