"""Prompt caching of the judges' static system prompt, before and after the worked examples, in the same run.

For each judge (rubric, statements), each system prompt (before: the instructions alone, the whole prompt until
the examples were added; after: with the guidance and worked examples) and each way of counting tokens (the usual
estimate, characters / 3.5, and the conservative one the cache check uses, characters / 4.5: the API's real count
lies somewhere about them, and a prefix must clear the minimum at either), N synthetic events
(`monitor.devtools.traffic`, decoded as the consumer does) are judged by the real judge and client against a fresh
fake Messages API that emulates the cache minimum of the judge model (the default model unless `--model`) counting
tokens that way. The first event is judged alone and the rest CONCURRENCY at a time: the real API makes a cache
entry available only once its first response has started, so concurrent first requests would each write it.

Then, with the prompt of today only, each judge judges the same events with context off (the pair alone, as a flat
event) and on (each event a follow-up after a realistic history of 3 to 6 earlier messages, taken from the traffic
before it, with a support assistant's system instructions, cut to the default window as the pipeline cuts it): the
prompt tokens per request and the cache share, to see what the context costs and that the static prefix still caches.

Reported per judge, prompt and count: the prefix's tokens as the fake counted them, whether the fake cached it,
prompt tokens and tokens read from cache per judged event, the share of prompt tokens read from cache at steady
state (every event after the first, which writes), and the cost per 1,000 judged events at the configured prices
(steady state). The fake's tokens are an estimate and its brain's replies are short, so compare the rows with each
other, not with a bill.
Prints a table and writes JSON (`--json PATH`). Run: `python -m bench.prompt_cache [--events 500] [--json PATH]`."""

from __future__ import annotations

import argparse
import asyncio
import math
from pathlib import Path
from typing import Any

from bench.output import emit
from consumers.decode import decode_event
from monitor.config import load_settings
from monitor.devtools.traffic import generate_events
from monitor.judges.cache_minimums import (
    CACHE_CHECK_CHARS_PER_TOKEN,
    CHARS_PER_TOKEN,
    assumed_min_tokens,
    min_cacheable_tokens,
)
from monitor.judges.context_window import ContextWindow, fit
from monitor.judges.llm import LLMJudge
from monitor.judges.rubric import INSTRUCTIONS as RUBRIC_INSTRUCTIONS
from monitor.judges.rubric import RubricJudge
from monitor.judges.statements import INSTRUCTIONS as STATEMENTS_INSTRUCTIONS
from monitor.judges.statements import StatementsJudge
from schemas.events import KafkaPosition, Turn
from schemas.usage import Usage
from tests.fake_messages_api import API_KEY, FakeMessagesAPI

DEFAULT_JSON = Path(".relevancy-monitor/bench/prompt_cache.json")
CONCURRENCY = 8
ESTIMATES = (CHARS_PER_TOKEN, CACHE_CHECK_CHARS_PER_TOKEN)  # characters per token the fake counts with, per row


class RubricBefore(RubricJudge):
    """The rubric judge with its system prompt as it was before the scoring guidance and the worked examples."""

    system_prompt = RUBRIC_INSTRUCTIONS


class StatementsBefore(StatementsJudge):
    """The statements judge with its system prompt as it was before the worked examples."""

    system_prompt = STATEMENTS_INSTRUCTIONS


VARIANTS: tuple[tuple[str, str, type[LLMJudge[Any]]], ...] = (
    ("rubric", "before", RubricBefore),
    ("rubric", "after", RubricJudge),
    ("statements", "before", StatementsBefore),
    ("statements", "after", StatementsJudge),
)


# A support assistant's brief, as a chat event's system message carries it (about 600 characters).
SYSTEM_INSTRUCTIONS = (
    "You are the customer support assistant of an online shop that sells kitchen appliances. Answer questions about "
    "orders, delivery, returns, warranties and the products in the catalogue. Be concise and friendly. Never give "
    "legal, medical or financial advice; politely decline and suggest a professional instead. Do not discuss "
    "competitors' products or prices. When an order number is needed and not given, ask for it. If you do not know "
    "an answer, say so and offer to hand the conversation to a human agent. Reply in the language of the customer."
)
HISTORY_MESSAGES = (3, 4, 5, 6)  # earlier messages per follow-up, in turn


def histories(judged: list[tuple[str, str]]) -> list[tuple[tuple[Turn, ...], str]]:
    """For each pair, a realistic context: the 3 to 6 messages before it, made of the traffic's earlier pairs (the
    first pairs reach back to the end of the list), cut to the default window; and the system instructions."""
    window = ContextWindow()
    flat = [Turn(role, text) for q, r in judged for role, text in (("user", q), ("assistant", r))]
    out = []
    for i in range(len(judged)):
        n = HISTORY_MESSAGES[i % len(HISTORY_MESSAGES)]
        before = [flat[(2 * i - k) % len(flat)] for k in range(n, 0, -1)]
        out.append((fit(tuple(before)[-window.turns :], window.max_chars), SYSTEM_INSTRUCTIONS))
    return out


def pairs(n: int, seed: int = 7) -> list[tuple[str, str]]:
    """`n` (question, response) pairs from the synthetic traffic, decoded as the consumer decodes records."""
    out = []
    for i, value in enumerate(generate_events(n, seed=seed, malformed_share=0.0)):
        event = decode_event(
            value, position=KafkaPosition(topic="bench", partition=0, offset=i), record_timestamp_ms=None
        )
        out.append((event.question, event.response))
    return out


def _summary(usages: list[Usage]) -> dict[str, Any]:
    def prompt_tokens(u: Usage) -> int:
        return u.input_tokens + u.cache_read_tokens + u.cache_write_tokens

    steady = usages[1:] or usages
    costs = [u.cost_usd for u in steady]
    read = sum(u.cache_read_tokens for u in steady)
    return {
        "prompt_tokens_per_event": sum(prompt_tokens(u) for u in usages) / len(usages),
        "cache_read_tokens_per_event": sum(u.cache_read_tokens for u in usages) / len(usages),
        "cache_write_tokens_total": sum(u.cache_write_tokens for u in usages),
        "cache_share_steady": read / max(1, sum(prompt_tokens(u) for u in steady)),
        "cost_per_1000_steady_usd": None
        if any(c is None for c in costs)
        else sum(c or 0.0 for c in costs) / len(steady) * 1000,
        "cost_per_1000_run_usd": None
        if any(u.cost_usd is None for u in usages)
        else sum(u.cost_usd or 0.0 for u in usages) / len(usages) * 1000,
    }


async def _run_variant(
    cls: type[LLMJudge[Any]],
    judged: list[tuple[str, str]],
    model: str | None,
    min_tokens: int,
    chars_per_token: float,
    context: list[tuple[tuple[Turn, ...], str]] | None = None,
) -> dict[str, Any]:
    with FakeMessagesAPI(cache_min_tokens=min_tokens, chars_per_token=chars_per_token) as api:
        overrides: dict[str, Any] = {"judge_model": model} if model else {}
        settings = load_settings(
            judge=cls.method, anthropic_base_url=api.base_url, anthropic_api_key=API_KEY, **overrides
        )
        judge = cls(settings.judge)
        sem = asyncio.Semaphore(CONCURRENCY)

        async def one(i: int) -> Usage:
            q, r = judged[i]
            turns, system = context[i] if context is not None else ((), "")
            async with sem:
                return (await judge.judge(q, r, context=turns, system=system)).usage

        try:
            first = await one(0)
            usages = [first, *await asyncio.gather(*(one(i) for i in range(1, len(judged))))]
        finally:
            await judge.aclose()
    prefix_tokens = math.ceil(len(cls.system_prompt) / chars_per_token)  # as the fake counts it
    return {
        "prefix_chars": len(cls.system_prompt),
        "prefix_tokens": prefix_tokens,
        "cached": usages[-1].cache_read_tokens > 0,
        **_summary(usages),
    }


async def measure(events: int, model: str | None = None) -> dict[str, Any]:
    """Judge `events` events with each judge and prompt; returns the figures."""
    judged = pairs(events)
    settings = load_settings()
    model_name = model or settings.judge.model
    min_tokens = assumed_min_tokens(model_name)
    rows = []
    for chars_per_token in ESTIMATES:
        for method, prompt, cls in VARIANTS:
            row = await _run_variant(cls, judged, model, min_tokens, chars_per_token)
            rows.append({"judge": method, "prompt": prompt, "chars_per_token": chars_per_token, **row})
    ratios: dict[str, float | None] = {}
    for chars_per_token in ESTIMATES:
        for method in ("rubric", "statements"):
            before, after = (
                next(
                    r
                    for r in rows
                    if r["judge"] == method and r["prompt"] == p and r["chars_per_token"] == chars_per_token
                )
                for p in ("before", "after")
            )
            b, a = before["cost_per_1000_steady_usd"], after["cost_per_1000_steady_usd"]
            ratios[f"{method}@{chars_per_token:g}"] = a / b if a is not None and b else None
    context = histories(judged)
    context_rows = []
    for method, prompt, cls in VARIANTS:
        if prompt != "after":
            continue
        for on in (False, True):
            row = await _run_variant(cls, judged, model, min_tokens, CHARS_PER_TOKEN, context if on else None)
            context_rows.append({"judge": method, "context": "on" if on else "off", **row})
    return {
        "events": events,
        "model": model_name,
        "min_cacheable_tokens": min_tokens,
        "model_in_table": min_cacheable_tokens(model_name) is not None,
        "chars_per_token": list(ESTIMATES),
        "rows": rows,
        "cost_ratio_after_to_before": ratios,
        "context_rows": context_rows,
        "context_messages_per_event": sum(len(t) for t, _ in context) / len(context),
        "context_chars_per_event": sum(sum(len(x.text) for x in t) + len(s) for t, s in context) / len(context),
    }


def report_lines(r: dict[str, Any]) -> list[str]:
    """The figures as a table for people."""
    known = "from the table" if r["model_in_table"] else "not in the table: the largest known minimum"
    lines = [
        f"{r['events']} judged events per row; model {r['model']}, minimum cacheable prefix "
        f"{r['min_cacheable_tokens']:,} tokens ({known});",
        "fake Messages API emulating that minimum, counting "
        + " or ".join(f"{c:g}" for c in r["chars_per_token"])
        + " characters per token (c/tok)",
        "",
        f"{'judge':<12}{'prompt':<8}{'c/tok':>6}{'prefix chars':>13}{'prefix tok':>11}{'cached':>8}"
        f"{'prompt tok/ev':>15}{'from cache/ev':>15}{'cache share':>13}{'$ / 1,000 ev':>14}",
    ]
    for row in r["rows"]:
        cost = row["cost_per_1000_steady_usd"]
        lines.append(
            f"{row['judge']:<12}{row['prompt']:<8}{row['chars_per_token']:>6g}{row['prefix_chars']:>13,}"
            f"{row['prefix_tokens']:>11,}{'yes' if row['cached'] else 'no':>8}"
            f"{row['prompt_tokens_per_event']:>15,.0f}{row['cache_read_tokens_per_event']:>15,.0f}"
            f"{row['cache_share_steady']:>12.1%} {'n/a' if cost is None else f'{cost:.4f}':>13}"
        )
    lines.append("")
    for key, ratio in r["cost_ratio_after_to_before"].items():
        method, _, cpt = key.partition("@")
        lines.append(f"{method} at {cpt} c/tok: cost after ÷ before = {'n/a' if ratio is None else f'{ratio:.2f}'}")
    lines.append("(cache share and cost are at steady state: every event after the first, which writes the cache)")
    lines += [
        "",
        f"context off / on, today's prompt, {CHARS_PER_TOKEN:g} c/tok; on: {r['context_messages_per_event']:.1f} "
        f"earlier messages and {r['context_chars_per_event']:,.0f} characters of context (system instructions "
        "included) per event",
        f"{'judge':<12}{'context':<9}{'prompt tok/req':>15}{'from cache/req':>16}{'cache share':>13}"
        f"{'$ / 1,000 ev':>14}",
    ]
    for row in r["context_rows"]:
        cost = row["cost_per_1000_steady_usd"]
        lines.append(
            f"{row['judge']:<12}{row['context']:<9}{row['prompt_tokens_per_event']:>15,.0f}"
            f"{row['cache_read_tokens_per_event']:>16,.0f}{row['cache_share_steady']:>12.1%} "
            f"{'n/a' if cost is None else f'{cost:.4f}':>13}"
        )
    return lines


def main(events: int = 500, json_path: Path | None = DEFAULT_JSON, model: str | None = None) -> dict[str, Any]:
    """Run the benchmark; print the table and write the JSON."""
    result = asyncio.run(measure(events, model))
    emit(report_lines(result), result, json_path)
    return result


if __name__ == "__main__":
    p = argparse.ArgumentParser(
        description="Prompt caching of the judges' system prompt before and after the worked examples, at 3.5 and 4.5 "
        "characters per token."
    )
    p.add_argument("--events", type=int, default=500, help="judged events per judge and prompt (default 500)")
    p.add_argument("--model", default=None, help="judge model (default: the configured default)")
    p.add_argument(
        "--json", type=Path, default=DEFAULT_JSON, help=f"where to write the figures (default {DEFAULT_JSON})"
    )
    a = p.parse_args()
    main(a.events, a.json, a.model)
