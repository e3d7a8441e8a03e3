"""Backpressure: when to pause consumption and when to resume it (a pure decision; the pipeline applies it)."""

from __future__ import annotations

from dataclasses import dataclass

from consumers.source import PauseGate

IN_FLIGHT_CAP = "in_flight_cap"
JUDGE_CIRCUIT_OPEN = "judge_circuit_open"


@dataclass(frozen=True, slots=True)
class PauseChange:
    """What to do now: `pause` True (stop fetching), False (fetch again) or None (as before); `reasons` for
    the pause; `flush_now` when the in-flight cap was just reached (nothing more arrives until rows are
    acknowledged, so waiting for a batch bound would only stall)."""

    pause: bool | None
    reasons: frozenset[str]
    flush_now: bool = False


class Backpressure:
    """Pause while too much is in flight (with hysteresis) or the judge's circuit is open; resume when neither holds."""

    def __init__(self, high: int, low: int) -> None:
        self.gate = PauseGate(high=high, low=low)
        self.reasons: frozenset[str] = frozenset()

    def update(self, in_flight: int, circuit_open: bool) -> PauseChange:
        """The change for the current in-flight count and circuit state."""
        reasons = set(self.reasons)
        gate = self.gate.update(in_flight)
        if gate is True:
            reasons.add(IN_FLIGHT_CAP)
        elif gate is False:
            reasons.discard(IN_FLIGHT_CAP)
        if circuit_open:
            reasons.add(JUDGE_CIRCUIT_OPEN)
        else:
            reasons.discard(JUDGE_CIRCUIT_OPEN)
        was_paused = bool(self.reasons)
        self.reasons = frozenset(reasons)
        pause = True if reasons and not was_paused else (False if was_paused and not reasons else None)
        return PauseChange(pause, self.reasons, flush_now=gate is True)
