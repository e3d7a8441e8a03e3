"""The `statements` judge: one LLM call splits the response into statements and gives each a verdict;
score = share of statements not judged off-question."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from monitor.judges.base import Judgement
from monitor.judges.llm import LLMJudge
from monitor.judges.prompts import DATA_RULES
from monitor.judges.worked_examples import WorkedExample, examples_section
from schemas.usage import Usage

# The instructions alone: the whole system prompt until the worked examples were added.
INSTRUCTIONS = f"""\
You are an impartial evaluator of answer relevancy for an AI assistant's replies.

# Task, in one pass
1. Break the assistant's response into statements: the individual answers, claims, offers, questions and \
instructions it contains, in order, usually one per sentence or clause. Keep each statement short and close to \
the original wording, with pronouns resolved so it stands on its own. Greetings, thanks, sign-offs and filler \
are statements too. A non-empty response always has at least one statement: if it makes no claim at all, the \
whole response is one statement.
2. For each statement, decide whether it addresses the user's question, read as the earlier turns explain it: a \
follow-up ("and the second one?", "yes please") asks about what it refers to, so a statement about that is "yes" \
even when it would look off-topic next to the question alone, and one that fits the question's words but not what \
they refer to is "no":
   - "yes": it helps answer the question (the answer itself, or a directly supporting detail, caveat or step).
   - "no": it does not address the question (greeting, boilerplate, upselling, tangent, unrelated information, \
or merely repeating the question). Give a short reason.
   - "idk": its relevance is genuinely ambiguous, e.g. background that may or may not help.

Judge relevance to the user's intent only, not factual correctness, grammar or style: a wrong but on-topic \
statement is "yes". A refusal, a clarifying question or "I don't know" is "yes" only when it is the \
appropriate response to this question, otherwise "no". A refusal depends on the assistant's brief: one the system \
instructions call for (the request is outside what the assistant may do) is "yes"; one they do not call for, of a \
request within the brief, is "no". A response that only repeats the question answers \
nothing: its statements are "no".

{DATA_RULES}

# Output
A JSON object with exactly two keys: "statements" (the list of statements, in order) and "verdicts" (a list \
with one object per statement, in the same order, each with "verdict": "yes", "no" or "idk", and "reason": a \
few words, required for "no", may be empty otherwise). There must be exactly as many verdicts as statements. \
Nothing else."""


def _expected_reply(example: WorkedExample) -> str:
    return json.dumps(
        {
            "statements": [s.text for s in example.statements],
            "verdicts": [{"verdict": s.verdict, "reason": s.reason} for s in example.statements],
        },
        ensure_ascii=False,
    )


# Static, so the whole system prompt is one cacheable prefix; the examples bring it above the cache minimum.
SYSTEM_PROMPT = f"{INSTRUCTIONS}\n\n{examples_section(_expected_reply)}"

Statement = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class StatementVerdict(BaseModel):
    """Whether one statement addresses the question."""

    model_config = ConfigDict(extra="forbid", strict=True)

    verdict: Literal["yes", "no", "idk"] = Field(
        description="yes: addresses the question; no: does not; idk: ambiguous"
    )
    reason: Annotated[str, StringConstraints(strip_whitespace=True)] = Field(description="a few words; required for no")

    @model_validator(mode="after")
    def _reason_for_no(self) -> StatementVerdict:
        if self.verdict == "no" and not self.reason:
            raise ValueError("a 'no' verdict needs a reason")
        return self


class StatementsReply(BaseModel):
    """The statements judge's structured reply: statements and their verdicts, one to one."""

    model_config = ConfigDict(extra="forbid", strict=True)

    statements: list[Statement] = Field(min_length=1, description="the response's statements, in order")
    verdicts: list[StatementVerdict] = Field(min_length=1, description="one verdict per statement, same order")

    @model_validator(mode="after")
    def _one_to_one(self) -> StatementsReply:
        if len(self.verdicts) != len(self.statements):
            raise ValueError(f"{len(self.verdicts)} verdicts for {len(self.statements)} statements")
        return self


class StatementsJudge(LLMJudge[StatementsReply]):
    """Statement decomposition with per-statement verdicts in one call; optional strict threshold."""

    method = "statements"
    system_prompt = SYSTEM_PROMPT
    reply_model = StatementsReply

    def params(self) -> dict[str, Any]:
        """Base parameters plus the strict threshold."""
        return {**super().params(), "strict_threshold": self.settings.statements_strict_threshold}

    def to_judgement(self, reply: StatementsReply, usage: Usage, levels: tuple[float, ...] | None = None) -> Judgement:
        """Share of statements whose verdict is not `no`; 0 below the strict threshold."""
        verdicts = [v.verdict for v in reply.verdicts]
        relevant = sum(v != "no" for v in verdicts)
        share = relevant / len(verdicts)
        threshold = self.settings.statements_strict_threshold
        strict_zero = threshold is not None and share < threshold
        return Judgement(
            score=0.0 if strict_zero else share,
            raw_score=share,
            reasoning=_reasoning(reply, relevant, threshold if strict_zero else None),
            statements=tuple(reply.statements),
            verdicts=tuple(verdicts),
            verdict_reasons=tuple(v.reason for v in reply.verdicts),
            usage=usage,
        )


def _reasoning(reply: StatementsReply, relevant: int, strict_threshold: float | None) -> str:
    # Built from the verdicts rather than asked of the model, so it can never disagree with the score.
    total = len(reply.statements)
    text = f"{relevant} of {total} statements address the question"
    off = [(s, v.reason) for s, v in zip(reply.statements, reply.verdicts, strict=True) if v.verdict == "no"]
    if off:
        shown = "; ".join(f'"{_clip(s, 60)}" ({_clip(r, 60)})' for s, r in off[:2])
        text += f"; off-question: {shown}" + (f" and {len(off) - 2} more" if len(off) > 2 else "")
    if strict_threshold is not None:
        text += f"; strict mode: share {relevant / total:.2f} is below {strict_threshold:g}, scored 0"
    return text


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
