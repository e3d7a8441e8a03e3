"""Judge spend budget: requests, tokens and estimated USD per hour and per UTC day.

Below the soft limit the factor is 1; between the soft limit and the cap it falls linearly to a small floor
(the effective sampling rate lowers smoothly); at the cap it is 0 and judging stops until the window rolls
over. Spend is what this process recorded plus what the store says everyone else spent (other replicas, and
earlier runs of this one), re-read every `budget_sync_s`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

HOUR_S = 3600.0
DAY_S = 86400.0
_MIN_FACTOR = 0.02  # just below the cap, still judge a trickle rather than a cliff


@dataclass(frozen=True, slots=True)
class Spend:
    """Judge spend in one window."""

    requests: float = 0.0
    tokens: float = 0.0
    usd: float = 0.0

    def __add__(self, other: Spend) -> Spend:
        return Spend(self.requests + other.requests, self.tokens + other.tokens, self.usd + other.usd)


@dataclass(frozen=True, slots=True)
class Limits:
    """Caps for one window; None is unlimited."""

    requests: float | None = None
    tokens: float | None = None
    usd: float | None = None

    def used(self, spend: Spend) -> float:
        """The largest share of any cap used, 0 when no cap is set."""
        shares = [
            spent / cap
            for spent, cap in ((spend.requests, self.requests), (spend.tokens, self.tokens), (spend.usd, self.usd))
            if cap is not None
        ]
        return max(shares, default=0.0)


@dataclass(slots=True)
class _Window:
    length_s: float
    limits: Limits
    start: float = -1.0
    mine: Spend = field(default_factory=Spend)  # recorded by this process (reserved at decision time)
    written: Spend = field(default_factory=Spend)  # the part of `mine` durably in the store
    others: Spend = field(default_factory=Spend)  # the store's total minus `written`: other replicas, earlier runs

    def roll(self, now: float) -> None:
        start = now - (now % self.length_s)
        if start != self.start:
            self.start, self.mine, self.written, self.others = start, Spend(), Spend(), Spend()

    @property
    def spent(self) -> Spend:
        return self.others + self.mine


class SpendBudget:
    """Tracks spend in the current hour and UTC day and turns it into a sampling factor."""

    def __init__(
        self, per_hour: Limits, per_day: Limits, soft_limit: float = 0.8, clock: Callable[[], float] = time.time
    ) -> None:
        if not 0.0 < soft_limit <= 1.0:
            raise ValueError("soft_limit must be in (0, 1]")
        self.soft_limit = soft_limit
        self._clock = clock
        self.hour = _Window(HOUR_S, per_hour)
        self.day = _Window(DAY_S, per_day)

    @property
    def enabled(self) -> bool:
        """Whether any cap is set."""
        return any(
            v is not None for lim in (self.hour.limits, self.day.limits) for v in (lim.requests, lim.tokens, lim.usd)
        )

    def _windows(self) -> tuple[_Window, _Window]:
        now = self._clock()
        self.hour.roll(now)
        self.day.roll(now)
        return self.hour, self.day

    def record(self, spend: Spend) -> None:
        """Add this process's spend (a reserved request, or the tokens and USD of a finished call)."""
        for w in self._windows():
            w.mine = w.mine + spend

    def written(self, spend: Spend) -> None:
        """Part of this process's spend is now durably in the store (so a sync must not count it twice)."""
        for w in self._windows():
            w.written = w.written + spend

    def sync(self, hour: Spend, day: Spend) -> None:
        """Learn what everyone else spent: the store's totals for the current windows minus what we wrote."""
        for w, total in zip(self._windows(), (hour, day), strict=True):
            w.others = Spend(
                *(
                    max(0.0, t - m)
                    for t, m in (
                        (total.requests, w.written.requests),
                        (total.tokens, w.written.tokens),
                        (total.usd, w.written.usd),
                    )
                )
            )

    def used(self) -> float:
        """The largest share of any cap used in the current windows."""
        return max(w.limits.used(w.spent) for w in self._windows())

    def factor(self) -> float:
        """1 below the soft limit, falling linearly to a small floor at the cap, 0 at or past the cap."""
        used = self.used()
        if used >= 1.0:
            return 0.0
        if used <= self.soft_limit:
            return 1.0
        return max(_MIN_FACTOR, (1.0 - used) / (1.0 - self.soft_limit))

    def window_starts(self) -> tuple[float, float]:
        """Epoch seconds where the current hour and day windows began."""
        h, d = self._windows()
        return h.start, d.start


class FreshnessGovernor:
    """Freshness over completeness: while consumer lag exceeds `max_lag` or the judge is throttled, halve the
    sampling factor each adjustment (down to `min_factor`); once lag is below half of `max_lag` and the judge is
    not throttled, double it back towards 1."""

    def __init__(self, max_lag: int | None, min_factor: float = 0.01) -> None:
        self.max_lag = max_lag
        self.min_factor = min_factor
        self.factor = 1.0

    def update(self, lag: int, throttled: bool) -> float:
        """One adjustment from the current total lag and judge state; returns the new factor."""
        over = self.max_lag is not None and lag > self.max_lag
        if over or throttled:
            self.factor = max(self.min_factor, self.factor / 2)
        elif self.max_lag is None or lag <= self.max_lag // 2:
            self.factor = min(1.0, self.factor * 2)
        return self.factor
