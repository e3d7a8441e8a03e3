"""Judging a labelled set as the service would: redacted like live traffic, through `GuardedJudge` (adaptive
concurrency, client-side rate limits, deadline, retries of transient failures and the circuit breaker), so the
verdicts are those the deployed judge gives and a large set cannot outrun the provider's limits."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from monitor.calibration.labels import LabelledPair
from monitor.judges.base import FailureReason, Judge, JudgeFailure, JudgeInfo, Judgement
from monitor.judges.context_window import ContextWindow, windowed
from monitor.judging.guarded_judge import GuardedJudge
from monitor.judging.metrics import JudgingMetrics
from monitor.judging.settings import FlowSettings
from monitor.privacy.events import JudgedEvent, redact_event
from monitor.privacy.spans import Redactor
from schemas.events import ConversationEvent, KafkaPosition, Turn
from schemas.usage import Usage

SOURCE_TOPIC = "calibration"  # the event's provenance in logs: no Kafka is involved
# The service waits out any outage (an event must not become an error row); a command cannot wait forever. After
# the circuit opened and this many probes in a row failed (2 + 4 + 8 s with the default cooldowns), the pairs not
# yet judged are given up as failures.
FAILED_PROBES_BEFORE_GIVING_UP = 3


@dataclass(frozen=True, slots=True)
class PairOutcome:
    """A labelled pair and the judge's verdict on it, or the failure that left it without one."""

    pair: LabelledPair
    verdict: Judgement | JudgeFailure

    @property
    def judgement(self) -> Judgement | None:
        """The verdict when the pair was scored."""
        return self.verdict if isinstance(self.verdict, Judgement) else None


@dataclass(frozen=True, slots=True)
class Spend:
    """What judging the set cost, over every call (failed and retried calls are paid for too); `cost_usd`
    None when some call's model has no price."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = 0.0

    @property
    def tokens(self) -> int:
        """All tokens, of every kind."""
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens

    def plus(self, usage: Usage) -> Spend:
        """This spend and one more call's `usage`."""
        cost = None if self.cost_usd is None or usage.cost_usd is None else self.cost_usd + usage.cost_usd
        return Spend(
            self.calls + 1,
            self.input_tokens + usage.input_tokens,
            self.output_tokens + usage.output_tokens,
            self.cache_read_tokens + usage.cache_read_tokens,
            self.cache_write_tokens + usage.cache_write_tokens,
            cost,
        )


@dataclass(frozen=True, slots=True)
class CalibrationRun:
    """Every pair's outcome in input order, the judge that gave them and what it cost."""

    judge: JudgeInfo
    outcomes: tuple[PairOutcome, ...]
    spend: Spend

    @property
    def scored(self) -> tuple[PairOutcome, ...]:
        """The outcomes with a score: what the statistics are computed over."""
        return tuple(o for o in self.outcomes if o.judgement is not None)

    @property
    def failed(self) -> tuple[PairOutcome, ...]:
        """The outcomes the judge could not score."""
        return tuple(o for o in self.outcomes if o.judgement is None)


Progress = Callable[[int, int], None]  # (pairs done, pairs in all), called after each pair


def outage_outlasts_patience(opens_since_last_success: int, probes: int = FAILED_PROBES_BEFORE_GIVING_UP) -> bool:
    """Whether to stop waiting for the judge: its circuit opened, then `probes` probes in a row failed (each
    failed probe opens it again)."""
    return opens_since_last_success > probes


def given_up(opens: int) -> JudgeFailure:
    """The failure of a pair left unjudged because the judge stayed down."""
    return JudgeFailure(
        FailureReason.UNAVAILABLE,
        f"gave up waiting: the judge's circuit opened {opens} times without a success in between",
        transient=True,
    )


def offline_event(
    key: str,
    offset: int,
    text: tuple[str, str],
    conversation: tuple[tuple[Turn, ...], str, int],
    now: datetime,
    window: ContextWindow | None,
    source: str = SOURCE_TOPIC,
) -> ConversationEvent:
    """An event judged outside Kafka (a labelled pair, a line of `relevancy-monitor judge`): named `key`, `offset` its
    place in the input under the topic `source`, `text` its question and answer, `conversation` its earlier turns,
    system instructions and turn index; one with context or instructions is a chat event, as it would be live. With
    `window`, the context is cut to it as the service cuts it, before redaction."""
    context, system, turn = conversation
    event = ConversationEvent(
        event_id=key,
        conversation_id=key,
        event_time=now,
        app=source,
        model="",
        prompt_version="",
        metadata={},
        question=text[0],
        response=text[1],
        shape="chat" if context or system else "flat",
        source=KafkaPosition(topic=source, partition=0, offset=offset),
        context=context,
        system=system,
        turn=turn,
    )
    return event if window is None else windowed(event, window)


def pair_event(pair: LabelledPair, now: datetime, window: ContextWindow | None = None) -> ConversationEvent:
    """The event the guard judges for `pair` (`offline_event`): an id naming the pair, the line as its offset."""
    key = pair.id if pair.id is not None else f"line-{pair.line}"
    return offline_event(
        key, pair.line, (pair.question, pair.answer), (pair.context, pair.system, pair.turn), now, window
    )


async def judge_pairs(
    pairs: Sequence[LabelledPair],
    judge: Judge,
    flow: FlowSettings,
    redactor: Redactor | None = None,
    progress: Progress | None = None,
    window: ContextWindow | None = None,
) -> CalibrationRun:
    """Judge every pair concurrently under `flow`'s limits and close the judge; the outcomes keep input order.
    `window` bounds each pair's context as the service's judge settings do (None: the context as written)."""
    spent: list[Usage] = []
    guard = GuardedJudge(judge, flow, JudgingMetrics(), on_spent=spent.append)
    now = datetime.now(UTC)
    done = 0
    opens_at_last_success = 0

    def still_wanted() -> bool:
        return not outage_outlasts_patience(guard.breaker.opens - opens_at_last_success)

    async def one(pair: LabelledPair) -> PairOutcome:
        nonlocal done, opens_at_last_success
        event = pair_event(pair, now, window)
        judged = redact_event(event, redactor) if redactor is not None else JudgedEvent.unredacted(event)
        outcome = await guard.judge_event(judged.judged, still_wanted)
        if outcome is None:
            verdict: Judgement | JudgeFailure = given_up(guard.breaker.opens - opens_at_last_success)
        else:
            verdict = outcome.verdict
            if isinstance(verdict, Judgement):
                opens_at_last_success = guard.breaker.opens
        done += 1
        if progress is not None:
            progress(done, len(pairs))
        return PairOutcome(pair, verdict)

    try:
        outcomes = await asyncio.gather(*(one(p) for p in pairs))
    finally:
        await judge.aclose()
    spend = Spend()
    for usage in spent:
        spend = spend.plus(usage)
    return CalibrationRun(judge.info, tuple(outcomes), spend)
