"""What every judge returns (a `Judgement`), what a failed judging is (a `JudgeFailure`), and how a judge is
identified. Judges raise from the `JudgeError` branch of `schemas.errors`."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from schemas.errors import JudgeError, JudgeUnavailable
from schemas.events import Turn
from schemas.usage import Usage


@dataclass(frozen=True, slots=True)
class Judgement:
    """A judge's verdict: `score` in [0, 1], the method's own `raw_score`, per-statement detail if any, and for a
    probability-weighted score its `confidence`."""

    score: float
    raw_score: float
    reasoning: str
    statements: tuple[str, ...] = ()
    verdicts: tuple[str, ...] = ()
    verdict_reasons: tuple[str, ...] = ()
    usage: Usage = field(default_factory=Usage)
    confidence: float | None = None  # a probability-weighted score's certainty (1 - normalised entropy), else None

    def __post_init__(self) -> None:
        if not 0.0 <= self.score <= 1.0:
            raise ValueError(f"score {self.score} outside [0, 1]")
        if len(self.verdicts) != len(self.statements):
            raise ValueError("one verdict per statement")


class FailureReason(StrEnum):
    """Why an event got no score: a closed set, so a metric label or a row's error prefix is always one of these."""

    INVALID_REPLY = "invalid_reply"  # the judge replied, but not with a valid verdict (after its corrective retry)
    UNAVAILABLE = "unavailable"  # unreachable or failing transiently (after the bounded retries)
    API_ERROR = "api_error"  # the provider refused the request for a reason retrying cannot fix
    JUDGE_ERROR = "judge_error"  # any other `JudgeError` a judge raised (read by value, from `JudgeError.reason`)
    CIRCUIT_OPEN = "circuit_open"  # not sent: the judge failed too often in a row
    TIMEOUT = "timeout"  # no verdict within the per-event deadline
    DEADLINE = "deadline"  # no verdict within a canary run's deadline
    INTERNAL = "internal"  # a defect of the monitor (logged with its traceback)
    MISSING = "missing"  # a batch returned no result for the request
    EXPIRED = "expired"  # a batch expired before the request was processed
    CANCELED = "canceled"  # a batch was canceled before the request was processed


@dataclass(frozen=True, slots=True)
class JudgeFailure:
    """Why an event got no score: a stable `reason` code (a metric label), the `detail` for the row, whether it
    is `transient` (worth judging again later) and whether the provider `rate_limited` us (not the event's fault)."""

    reason: FailureReason
    detail: str
    transient: bool = False
    rate_limited: bool = False
    usage: Usage = field(default_factory=Usage)  # what the failed attempts cost (invalid replies are paid for)

    @property
    def message(self) -> str:
        """The row's error text: `reason: detail`, at most 1,000 characters."""
        return f"{self.reason}: {self.detail}"[:1000]

    @classmethod
    def from_error(cls, err: JudgeError) -> JudgeFailure:
        """The failure a judge reported by raising `err`."""
        usage = err.usage if isinstance(err.usage, Usage) else Usage()
        reason = FailureReason(err.reason)
        if isinstance(err, JudgeUnavailable):
            return cls(reason, str(err), transient=True, rate_limited=err.kind == "rate_limited", usage=usage)
        return cls(reason, str(err), usage=usage)


@dataclass(frozen=True, slots=True)
class JudgeInfo:
    """Identity of a judge as stored on every row."""

    method: str
    model: str
    judge_id: str
    heuristic: bool = False
    provider: str | None = None  # who serves an LLM judge's model (not stored on rows: the judge_id names it)


def make_judge_id(method: str, model: str, prompt: str, params: dict[str, Any]) -> str:
    """A short stable id over method, model, prompt template and parameters: any change gives a new id."""
    blob = json.dumps({"method": method, "model": model, "prompt": prompt, "params": params}, sort_keys=True)
    return f"{method}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


class Judge(Protocol):
    """A relevancy judge: one async call per event. Raises `JudgeError` when it cannot score."""

    @property
    def info(self) -> JudgeInfo:
        """The identity stored on every row."""
        ...

    @property
    def stats(self) -> Mapping[str, int]:
        """API counters (`attempts`, `error.<kind>`, `retry.<kind>`, `tokens.<type>`, ...); empty for a judge
        that calls no API."""
        ...

    @property
    def rate_limited(self) -> int:
        """How many 429 responses this judge has met so far, retried ones included (adaptive concurrency and
        the freshness factor read the change); always 0 for a judge that calls no API."""
        ...

    async def judge(self, question: str, response: str, *, context: Sequence[Turn] = (), system: str = "") -> Judgement:
        """Score one pair; `context` (the earlier turns, oldest first) and `system` (the assistant's instructions)
        only explain what the question refers to, for a judge that reads them."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...
