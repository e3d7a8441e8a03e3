"""What a replay will cost, before it judges anything (pure).

events to score x tokens per event (the judge's prompt, the texts' lengths, the context's (the earlier turns and the
system instructions the judge reads, with their tags), the expected reply) x the model's price.
The system prompt is one cached prefix when it is long enough for the model's cache minimum: the first call writes
it, every later one reads it (a replay's calls are minutes apart at most, within the cache's lifetime). The Message
Batches API halves every price. Reply lengths are typical figures for each method, so this is an estimate: the
replay reports what it really spent as it goes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from monitor.judges.base import Judge, JudgeInfo
from monitor.judges.cache_minimums import CHARS_PER_TOKEN, check_prefix
from monitor.judges.llm import LLMJudge
from monitor.judges.pricing import BATCH_DISCOUNT, ModelPrice
from monitor.judges.prompts import USER_TEMPLATE
from monitor.judges.prompts import context_chars as prompt_context_chars
from monitor.judges.settings import JudgeSettings
from schemas.events import ConversationEvent, Turn

# Tokens of a typical reply: the rubric's is a score and a sentence or two; the statements judge restates the
# response (about its own length) and adds a verdict object per statement (one per `_STATEMENT_CHARS`).
_RUBRIC_OUTPUT_TOKENS = 80
_STATEMENTS_OUTPUT_BASE = 30
_VERDICT_TOKENS = 12
_STATEMENT_CHARS = 90
_USER_TEMPLATE_TOKENS = math.ceil(len(USER_TEMPLATE) / CHARS_PER_TOKEN) + 20  # the section codes, twice each


@dataclass(frozen=True, slots=True)
class CostModel:
    """How one judge spends: its system prompt's tokens, whether the prefix is cached, its price (None: unknown,
    or no API at all for a heuristic judge), its method and input cap, and whether the Batches API is used."""

    method: str
    model: str
    price: ModelPrice | None
    calls_api: bool
    prompt_tokens: int = 0
    prefix_cached: bool = False
    max_input_chars: int = 20_000
    batch: bool = False
    context_turns: int = 0  # earlier turns the judge reads (0: none)
    context_system: bool = False  # whether it reads the system instructions

    @classmethod
    def for_judge(
        cls,
        info: JudgeInfo,
        price: ModelPrice | None,
        system_prompt: str | None,
        max_input_chars: int,
        *,
        batch: bool = False,
        context_turns: int = 0,
        context_system: bool = False,
    ) -> CostModel:
        """The cost model of a judge; `system_prompt` None for a judge that calls no API (lexical); `context_turns`
        and `context_system`: what of an event's context it reads."""
        if system_prompt is None:
            return cls(info.method, info.model, None, calls_api=False)
        return cls(
            info.method,
            info.model,
            price,
            calls_api=True,
            prompt_tokens=math.ceil(len(system_prompt) / CHARS_PER_TOKEN),
            prefix_cached=check_prefix(system_prompt, info.model).cacheable,
            max_input_chars=max_input_chars,
            batch=batch,
            context_turns=context_turns,
            context_system=context_system,
        )

    @classmethod
    def of(cls, judge: Judge, settings: JudgeSettings, *, batch: bool = False) -> CostModel:
        """The cost model of a built judge with its settings (price, input cap): a replay's, a calibration's."""
        prompt = judge.system_prompt if isinstance(judge, LLMJudge) else None
        return cls.for_judge(
            judge.info,
            settings.price,
            prompt,
            settings.max_input_chars,
            batch=batch,
            context_turns=settings.context_turns,
            context_system=settings.context_system,
        )

    def context_chars(self, context: Sequence[Turn], system: str) -> int:
        """What an event's earlier turns and system instructions add to its request, as the judge reads them (the
        newest `context_turns` turns, the instructions if `context_system`), with their tags."""
        if not self.calls_api:
            return 0
        turns = tuple(context[-self.context_turns :]) if self.context_turns else ()
        return prompt_context_chars(turns, system if self.context_system else "")

    def event_tokens(self, question_chars: int, response_chars: int, context_chars: int = 0) -> tuple[int, int]:
        """Uncached input and output tokens of one event's call (the prompt prefix apart); `context_chars`: what the
        earlier turns and the system instructions add with their tags (`monitor.judges.prompts.context_chars`)."""
        shown = min(question_chars, self.max_input_chars) + min(response_chars, self.max_input_chars) + context_chars
        text = math.ceil(shown / CHARS_PER_TOKEN)
        if self.method == "statements":
            restated = math.ceil(min(response_chars, self.max_input_chars) / CHARS_PER_TOKEN)
            statements = max(1, math.ceil(response_chars / _STATEMENT_CHARS))
            output = _STATEMENTS_OUTPUT_BASE + restated + _VERDICT_TOKENS * statements
        else:
            output = _RUBRIC_OUTPUT_TOKENS
        return _USER_TEMPLATE_TOKENS + text, output

    def judged_usd(self, judged: ConversationEvent) -> float | None:
        """The estimated USD of judging `judged` (its pair and the context the judge reads), as `event_usd`."""
        context = self.context_chars(judged.context, judged.system)
        return self.event_usd(len(judged.question), len(judged.response), context)

    def event_usd(self, question_chars: int, response_chars: int, context_chars: int = 0) -> float | None:
        """The estimated USD of one event's call with the prefix already cached; None when the price is unknown."""
        if not self.calls_api:
            return 0.0
        if self.price is None:
            return None
        input_tokens, output = self.event_tokens(question_chars, response_chars, context_chars)
        p = self.price
        prefix = self.prompt_tokens * (p.cache_read if self.prefix_cached else p.input)
        usd = (prefix + input_tokens * p.input + output * p.output) / 1_000_000 + p.call  # call: a self-hosted share
        return usd * (BATCH_DISCOUNT if self.batch else 1.0)


@dataclass(frozen=True, slots=True)
class CostEstimate:
    """The estimate printed before judging: events, calls, tokens and USD (None: the model has no price)."""

    events: int
    calls: int
    input_tokens: int
    output_tokens: int
    usd: float | None
    batch: bool

    @property
    def per_event_usd(self) -> float | None:
        """The estimated USD per event scored."""
        return None if self.usd is None or not self.events else self.usd / self.events


def estimate(
    model: CostModel,
    events: int,
    question_chars: int,
    response_chars: int,
    calls: int | None = None,
    context_chars: int = 0,
) -> CostEstimate:
    """The estimate for `events` events with these total text lengths (`context_chars`: the earlier turns' and
    system instructions', with their tags), of which `calls` need a call (default: all; an empty response is scored
    without one)."""
    calls = events if calls is None else calls
    if not model.calls_api or calls == 0:
        return CostEstimate(events, 0, 0, 0, None if model.calls_api and model.price is None else 0.0, model.batch)
    # Per-event figures from the mean lengths: tokens are linear in the lengths except for the input cap, which the
    # mean would apply to the sum wrongly; a replay's events are far below the cap (20,000 characters) in practice.
    q, r, c = question_chars / calls, response_chars / calls, context_chars / calls
    per_input, per_output = model.event_tokens(round(q), round(r), round(c))
    input_tokens = per_input * calls + model.prompt_tokens * (1 if model.prefix_cached else calls)
    per_usd = model.event_usd(round(q), round(r), round(c))
    usd: float | None = None
    if per_usd is not None and model.price is not None:
        first_write = (
            model.prompt_tokens * (model.price.cache_write - model.price.cache_read) / 1_000_000
            if model.prefix_cached
            else 0.0
        )
        usd = per_usd * calls + first_write * (BATCH_DISCOUNT if model.batch else 1.0)
    return CostEstimate(events, calls, input_tokens, per_output * calls, usd, model.batch)
