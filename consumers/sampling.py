"""Deterministic sampling: the same key gets the same decision in every process and on every replay."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from schemas.events import ConversationEvent

SampleKey = Literal["conversation_id", "event_id"]


def sample_point(key: str) -> float:
    """A stable pseudo-random number in [0, 1) for `key` (BLAKE2b, independent of PYTHONHASHSEED)."""
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


@dataclass(frozen=True, slots=True)
class SampleDecision:
    """Whether to judge an event, the effective rate (for 1/rate weights) and the rule that chose it."""

    sampled: bool
    rate: float
    rule: str


class Sampler:
    """Samples events at a base rate by a hash of their conversation id (default) or event id."""

    def __init__(self, rate: float, key: SampleKey = "conversation_id") -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"sample rate must be within [0, 1], got {rate}")
        self.rate = rate
        self.key = key

    def decide(self, event: ConversationEvent) -> SampleDecision:
        """The decision for one event."""
        key = event.conversation_id if self.key == "conversation_id" else event.event_id
        return SampleDecision(sampled=sample_point(key) < self.rate, rate=self.rate, rule="base")
