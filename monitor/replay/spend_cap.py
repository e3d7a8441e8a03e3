"""`--max-usd`: a replay's own spending cap (pure).

Each call reserves what it is expected to cost before it starts (the larger of its estimate and the mean a call has
really cost so far) and settles with what it did cost. A call that would take the reservations past the cap is not
started, so the spend stops below the cap unless the calls already out cost more than expected; the overshoot is at
most that excess, and the replay reports it."""

from __future__ import annotations


class SpendCap:
    """Reservations and spend against `max_usd` (None: no cap, every reservation succeeds)."""

    def __init__(self, max_usd: float | None) -> None:
        if max_usd is not None and max_usd <= 0:
            raise ValueError(f"a spending cap must be positive, got {max_usd}")
        self.max_usd = max_usd
        self.spent = 0.0
        self.reserved = 0.0
        self.calls = 0
        self.reached = False  # a call was held back: the replay stops here

    def _expected(self, estimate: float) -> float:
        mean = self.spent / self.calls if self.calls else 0.0
        return max(estimate, mean)

    def try_reserve(self, estimate: float) -> float | None:
        """Reserve one call expected to cost `estimate`; returns the amount reserved, or None: it could cross the
        cap."""
        amount = self._expected(estimate)
        if self.max_usd is not None and self.spent + self.reserved + amount > self.max_usd:
            self.reached = True
            return None
        self.reserved += amount
        return amount

    def settle(self, reserved: float, cost: float) -> None:
        """A reserved call ended, costing `cost` (its failed attempts included)."""
        self.reserved = max(0.0, self.reserved - reserved)
        self.spent += cost
        self.calls += 1

    def release(self, reserved: float) -> None:
        """A reserved call was never made (the replay stopped first)."""
        self.reserved = max(0.0, self.reserved - reserved)
