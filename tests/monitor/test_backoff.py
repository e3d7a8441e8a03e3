"""The one retry policy: capped exponential backoff with equal jitter."""

from __future__ import annotations

import random

import pytest

from monitor.backoff import Backoff


class Recording(random.Random):
    """A seeded Random that keeps what a `Backoff` draws from it: `halves` of each step and the resulting `waits`."""

    def __init__(self) -> None:
        super().__init__(0)
        self.halves: list[float] = []
        self.waits: list[float] = []

    def uniform(self, a: float, b: float) -> float:
        """Draw as Random does, keeping `b` (half the step) and the wait, half the step plus the draw."""
        drawn = super().uniform(a, b)
        self.halves.append(b)
        self.waits.append(b + drawn)
        return drawn

    @property
    def steps(self) -> list[float]:
        """The backoff steps drawn so far."""
        return [round(2 * half, 6) for half in self.halves]


def test_each_wait_is_in_the_upper_half_of_a_doubling_step_up_to_the_cap() -> None:
    """Retry k waits between half and all of min(max, base * 2**k)."""
    b = Backoff(base_s=0.5, max_s=4.0, rng=random.Random(1))
    for retry, step in [(0, 0.5), (1, 1.0), (2, 2.0), (3, 4.0), (4, 4.0), (200, 4.0)]:
        waits = [b.delay(retry) for _ in range(200)]
        assert min(waits) >= step / 2
        assert max(waits) <= step
        assert max(waits) - min(waits) > step / 4  # jittered, not a fixed wait


def test_retry_after_is_honoured_up_to_its_cap() -> None:
    """A server's retry-after lengthens the wait, never beyond retry_after_cap_s."""
    b = Backoff(base_s=0.5, max_s=1.0, retry_after_cap_s=10.0, rng=random.Random(2))
    assert b.delay(0, retry_after_s=3.0) == 3.0
    assert b.delay(0, retry_after_s=300.0) == 10.0
    assert b.delay(0, retry_after_s=0.0) <= 0.5


@pytest.mark.parametrize(("base", "cap"), [(0.0, 1.0), (2.0, 1.0), (-1.0, 1.0)])
def test_a_policy_that_cannot_wait_is_refused(base: float, cap: float) -> None:
    """base_s must be positive and at most max_s."""
    with pytest.raises(ValueError, match="backoff needs"):
        Backoff(base_s=base, max_s=cap)
