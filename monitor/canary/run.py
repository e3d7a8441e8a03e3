"""One canary run: every labelled pair judged concurrently through `GuardedJudge` (the service's adaptive concurrency,
client-side rate limits, per-call deadline, retries and circuit breaker), redacted as live traffic is, within a
deadline for the whole run.

The calibration's `judge_pairs` does the same for `calibrate` but waits for every pair: while the circuit is open
a pair waits instead of failing, so in an outage a run would never end. Here a pair still unscored at the deadline
is an error row (`deadline: ...`), which is what the canary must report."""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from monitor.calibration.labels import LabelledPair, parse_labels
from monitor.calibration.run import Spend, pair_event
from monitor.canary.figures import run_figures
from monitor.canary.model import RunFigures, RunSummary
from monitor.judges.base import FailureReason, Judge, JudgeFailure, JudgeInfo, Judgement
from monitor.judges.context_window import ContextWindow
from monitor.judging.guarded_judge import GuardedJudge
from monitor.judging.metrics import JudgingMetrics
from monitor.judging.settings import FlowSettings
from monitor.privacy.events import JudgedEvent, redact_event
from monitor.privacy.spans import Redactor
from schemas.errors import UsageError
from schemas.usage import Usage

DEADLINE_REASON = FailureReason.DEADLINE


@dataclass(frozen=True, slots=True)
class LabelledSet:
    """The pairs of a labels file and the set's name: the file's name and the start of its SHA-256, so another
    version of the set is another name (and another canary history)."""

    name: str
    source: str
    pairs: tuple[LabelledPair, ...]


def labels_name(path: Path, data: bytes) -> str:
    """`golden_set.jsonl:3f2a9c1b0d4e`: the file's name and the first 12 hex digits of the SHA-256 of its bytes."""
    return f"{path.name}:{hashlib.sha256(data).hexdigest()[:12]}"


def read_labelled_set(path: Path) -> LabelledSet:
    """The labelled set in `path` (the calibration's JSONL format, labels 0–4); raises `LabelsError` for a bad
    file, naming the line."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read the canary labels file {path}: {e.strerror or e}") from None
    return LabelledSet(labels_name(path, data), str(path), tuple(parse_labels(data, "rubric", str(path))))


def pairs_for(labelled: LabelledSet, judge: JudgeInfo) -> tuple[LabelledPair, ...]:
    """The pairs of `labelled` a run of `judge` scores: all of them, except that a heuristic judge (lexical), which
    reads no context, leaves out the multi-turn cases. Their labels rest on the earlier turns, so its scores on
    them would drag its agreement figures down with noise and tell nothing about drift."""
    if not judge.heuristic:
        return labelled.pairs
    return tuple(p for p in labelled.pairs if not p.context)


@dataclass(frozen=True, slots=True)
class JudgedPair:
    """A labelled pair and its verdict (or why it has none), with how long its last judge call took."""

    pair: LabelledPair
    verdict: Judgement | JudgeFailure
    latency_s: float = 0.0

    @property
    def judgement(self) -> Judgement | None:
        """The verdict when the pair was scored."""
        return self.verdict if isinstance(self.verdict, Judgement) else None


@dataclass(frozen=True, slots=True)
class CanaryRun:
    """A finished run: which judge judged which set when, every pair in the set's order, the figures and the spend
    over every call (failed and retried ones are paid for too)."""

    run_id: str
    run_at: datetime
    judge: JudgeInfo
    labels: str
    pairs: tuple[JudgedPair, ...]
    figures: RunFigures
    spend: Spend
    seconds: float

    def summary(self) -> RunSummary:
        """The run in ids and figures."""
        return RunSummary(
            self.run_id,
            self.run_at,
            self.judge.judge_id,
            self.judge.method,
            self.labels,
            self.figures,
            self.spend.calls,
            self.spend.cost_usd,
            self.seconds,
            heuristic=self.judge.heuristic,
        )


async def judge_set(
    labelled: LabelledSet,
    judge: Judge,
    flow: FlowSettings,
    redactor: Redactor | None,
    deadline_s: float,
    run_at: datetime,
    window: ContextWindow | None = None,
) -> CanaryRun:
    """Judge every pair of `labelled` under `flow`'s limits, each unscored at `deadline_s` seconds an error, and close
    the judge; the pairs (`pairs_for` the judge) keep the set's order. Multi-turn cases carry their context, cut to
    `window` as the live judge's is (None: as written)."""
    spent: list[Usage] = []
    guard = GuardedJudge(judge, flow, JudgingMetrics(), on_spent=spent.append)
    started = time.monotonic()
    deadline = started + deadline_s

    async def one(pair: LabelledPair) -> JudgedPair | None:
        event = pair_event(pair, run_at, window)
        judged = redact_event(event, redactor) if redactor is not None else JudgedEvent.unredacted(event)
        # Past the deadline a waiting pair (circuit open, rate limit) is given up instead of being sent.
        outcome = await guard.judge_event(judged.judged, still_wanted=lambda: time.monotonic() < deadline)
        return None if outcome is None else JudgedPair(pair, outcome.verdict, outcome.elapsed_s)

    pairs = pairs_for(labelled, judge.info)
    tasks = [asyncio.create_task(one(p)) for p in pairs]
    try:
        if tasks:
            await asyncio.wait(tasks, timeout=deadline_s)
    finally:
        for t in tasks:
            t.cancel()  # a no-op for finished ones; the rest are in a call, or waiting, past the deadline
        await asyncio.gather(*tasks, return_exceptions=True)
        await judge.aclose()
    judged = tuple(_result(t, p, deadline_s) for t, p in zip(tasks, pairs, strict=True))
    spend = Spend()
    for usage in spent:
        spend = spend.plus(usage)
    scored = [(j.pair.label_unit, j.judgement.score) for j in judged if j.judgement is not None]
    figures = run_figures(scored, len(judged))
    return CanaryRun(
        uuid.uuid4().hex[:16], run_at, judge.info, labelled.name, judged, figures, spend, time.monotonic() - started
    )


def _result(task: asyncio.Task[JudgedPair | None], pair: LabelledPair, deadline_s: float) -> JudgedPair:
    if not task.cancelled():
        error = task.exception()
        if error is not None:
            raise error  # a bug: GuardedJudge turns every judge failure into a verdict
        done = task.result()
        if done is not None:
            return done
    return JudgedPair(
        pair, JudgeFailure(DEADLINE_REASON, f"no verdict within the run's deadline of {deadline_s:g}s", transient=True)
    )
