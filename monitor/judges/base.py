"""What every judge returns and raises, and how a judge is identified."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any


class JudgeError(Exception):
    """A judge could not produce a score. `reason` is a short stable code (a metric label and the row's error)."""

    reason = "judge_error"


class JudgeReplyInvalid(JudgeError):
    """The judge replied, but not with a valid structured verdict (after the bounded retries)."""

    reason = "invalid_reply"


class JudgeUnavailable(JudgeError):
    """The judge could not be reached or kept failing with transient errors (after the bounded retries).
    `kind` is the last failure (`rate_limited`, `overloaded`, `server_error`, `timeout`, `connection`, ...)."""

    reason = "unavailable"

    def __init__(self, message: str, kind: str = "unknown") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens and estimated cost of one judged event (cost None when the model's price is unknown)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = 0.0


@dataclass(frozen=True, slots=True)
class Judgement:
    """A judge's verdict: `score` in [0, 1], the method's own `raw_score`, and per-statement detail if any."""

    score: float
    raw_score: float
    reasoning: str
    statements: tuple[str, ...] = ()
    verdicts: tuple[str, ...] = ()
    verdict_reasons: tuple[str, ...] = ()
    usage: Usage = field(default_factory=Usage)

    def __post_init__(self) -> None:
        if not 0.0 <= self.score <= 1.0:
            raise ValueError(f"score {self.score} outside [0, 1]")
        if len(self.verdicts) != len(self.statements):
            raise ValueError("one verdict per statement")


@dataclass(frozen=True, slots=True)
class JudgeInfo:
    """Identity of a judge as stored on every row."""

    method: str
    model: str
    judge_id: str
    heuristic: bool = False


def make_judge_id(method: str, model: str, prompt: str, params: dict[str, Any]) -> str:
    """A short stable id over method, model, prompt template and parameters: any change gives a new id."""
    blob = json.dumps({"method": method, "model": model, "prompt": prompt, "params": params}, sort_keys=True)
    return f"{method}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"
