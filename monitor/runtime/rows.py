"""Building the scored row from an event, the sampling decision and the judge's outcome (pure)."""

from __future__ import annotations

from datetime import datetime

from consumers.sampling import SampleDecision
from monitor.judges.base import JudgeFailure, JudgeInfo, Judgement
from schemas.events import ConversationEvent
from schemas.scored import ScoredRow
from schemas.usage import Usage


def build_row(
    event: ConversationEvent,
    info: JudgeInfo,
    decision: SampleDecision,
    outcome: Judgement | JudgeFailure,
    *,
    latency_ms: int,
    scored_at: datetime,
    store_text: bool,
    cached: bool = False,
) -> ScoredRow:
    """An ok row from a `Judgement`, or an error row (no score, but the tokens and cost of the failed attempts)
    from a `JudgeFailure`. A `cached` verdict cost nothing this time: its row carries no tokens or cost."""
    common = dict(
        event_id=event.event_id,
        conversation_id=event.conversation_id,
        event_time=event.event_time,
        app=event.app,
        model=event.model,
        prompt_version=event.prompt_version,
        metadata=event.metadata,
        judge=info.method,
        judge_model=info.model,
        judge_id=info.judge_id,
        question=event.question if store_text else "",
        response=event.response if store_text else "",
        sample_rate=decision.rate,
        sample_rule=decision.rule,
        latency_ms=max(0, latency_ms),
        kafka_topic=event.source.topic,
        kafka_partition=event.source.partition,
        kafka_offset=event.source.offset,
        scored_at=scored_at,
    )
    u = Usage() if cached else outcome.usage
    spend = dict(
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        cache_read_tokens=u.cache_read_tokens,
        cache_write_tokens=u.cache_write_tokens,
        cost_usd=u.cost_usd,
    )
    if isinstance(outcome, JudgeFailure):  # what the failed attempts cost stays visible on the row
        return ScoredRow(status="error", error=outcome.message, **spend, **common)
    return ScoredRow(
        cached=cached,
        status="ok",
        score=outcome.score,
        raw_score=outcome.raw_score,
        reasoning=outcome.reasoning,
        statements=list(outcome.statements),
        verdicts=list(outcome.verdicts),
        verdict_reasons=list(outcome.verdict_reasons),
        n_statements=len(outcome.statements),
        **spend,
        **common,
    )
