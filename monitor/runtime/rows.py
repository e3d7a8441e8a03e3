"""Building the scored row from an event, the sampling decision and the judge's outcome (pure)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any, Literal

from consumers.sampling import SampleDecision
from monitor.judges.base import JudgeFailure, JudgeInfo, Judgement
from monitor.privacy.events import JudgedEvent
from schemas.events import ConversationEvent, Turn
from schemas.scored import ScoredRow
from schemas.usage import Usage

TextPolicy = Literal["redacted", "none", "full"]
_NO_USAGE = Usage()  # a cached verdict's: no tokens, no cost


def build_row(
    event: JudgedEvent,
    info: JudgeInfo,
    decision: SampleDecision,
    outcome: Judgement | JudgeFailure,
    *,
    latency_ms: int,
    scored_at: datetime,
    text_policy: TextPolicy,
    cached: bool = False,
    replay_run: str = "",
) -> ScoredRow:
    """An ok row from a `Judgement`, or an error row (no score, but the tokens and cost of the failed attempts)
    from a `JudgeFailure`. A `cached` verdict cost nothing this time: its row carries no tokens or cost.

    `text_policy` (MONITOR_STORE_TEXT): `redacted` stores the text as the judge saw it, `full` as received, `none`
    no question, response, context, system instructions, reasoning, statement or reason text (verdicts, counts,
    scores, ids, the turn, the number of context turns and the context's digest stay). `replay_run`
    marks a row a replay wrote ("" for live traffic)."""
    # One dict, validated as it is (model_validate): the same fields as keyword arguments would give, without
    # packing them twice. A row is the event's columns, how it was judged, and the verdict or the failure.
    keep_text = text_policy != "none"
    data = _event_columns(event, text_policy)
    data.update(
        judge=info.method,
        judge_model=info.model,
        judge_id=info.judge_id,
        sample_rate=decision.rate,
        sample_rule=decision.rule,
        latency_ms=max(0, latency_ms),
        scored_at=scored_at,
        replay_run=replay_run,
    )
    _add_usage(data, _NO_USAGE if cached else outcome.usage)
    if isinstance(outcome, JudgeFailure):  # what the failed attempts cost stays visible on the row
        data["status"] = "error"
        data["error"] = outcome.message
    else:
        _add_verdict(data, outcome, cached, keep_text)
    return ScoredRow.model_validate(data)


def _event_columns(event: JudgedEvent, text_policy: TextPolicy) -> dict[str, Any]:
    """The columns of the event: its ids and labels, its text as the policy stores it, its Kafka position and what
    redaction replaced."""
    judged = event.judged
    stored = event.original if text_policy == "full" else judged
    keep_text = text_policy != "none"
    source = judged.source
    return {
        "event_id": judged.event_id,
        "conversation_id": judged.conversation_id,
        "event_time": judged.event_time,
        "app": judged.app,
        "model": judged.model,
        "prompt_version": judged.prompt_version,
        "metadata": stored.metadata,
        "question": stored.question if keep_text else "",
        "response": stored.response if keep_text else "",
        "turn": judged.turn,
        "context_turns": len(judged.context),
        "context": context_json(stored.context) if keep_text else "",
        "system_instructions": stored.system if keep_text else "",
        "context_digest": context_digest(judged),
        "kafka_topic": source.topic,
        "kafka_partition": source.partition,
        "kafka_offset": source.offset,
        "redactions": dict(event.redactions),
        "redactor": event.redactor,
    }


def context_json(context: tuple[Turn, ...]) -> str:
    """The `context` column: a JSON array of {"role", "text"}, oldest first ('' for none, as old rows read)."""
    if not context:
        return ""
    return json.dumps([{"role": t.role, "text": t.text} for t in context], ensure_ascii=False, separators=(",", ":"))


def context_digest(event: ConversationEvent) -> str:
    """The `context_digest` column: the hex SHA-256 of the context and system instructions the judge read ('' when it
    read neither), over their redacted text, so it says which rows were judged in the same context without the text.

    SHA-256 because anyone can recompute it, in Python or in ClickHouse (`lower(hex(SHA256(...)))`), over the
    canonical JSON below. It is not keyed: a short context ("yes") can be found by guessing, which is why it is taken
    of the text as the judge read it, redacted (unless MONITOR_REDACT=false), never of the text as received."""
    if not event.context and not event.system:
        return ""
    document = {"context": [{"role": t.role, "text": t.text} for t in event.context], "system": event.system}
    canonical = json.dumps(document, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def _add_usage(data: dict[str, Any], u: Usage) -> None:
    """The tokens and cost of the judge's calls for this row."""
    data["input_tokens"] = u.input_tokens
    data["output_tokens"] = u.output_tokens
    data["cache_read_tokens"] = u.cache_read_tokens
    data["cache_write_tokens"] = u.cache_write_tokens
    data["cost_usd"] = u.cost_usd


def _add_verdict(data: dict[str, Any], outcome: Judgement, cached: bool, keep_text: bool) -> None:
    """An ok row's verdict: the score, and the reasoning and statements when text is kept."""
    data["cached"] = cached
    data["status"] = "ok"
    data["score"] = outcome.score
    data["raw_score"] = outcome.raw_score
    data["score_confidence"] = outcome.confidence
    data["reasoning"] = outcome.reasoning if keep_text else ""
    data["statements"] = list(outcome.statements) if keep_text else []
    data["verdicts"] = list(outcome.verdicts)
    data["verdict_reasons"] = list(outcome.verdict_reasons) if keep_text else []
    data["n_statements"] = len(outcome.statements)
