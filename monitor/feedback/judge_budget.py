"""The budget for judging the answers users disliked that sampling skipped (pure): at most `calls_per_hour` in any
sliding hour, and the share of asks admitted over the last hour, which is the inclusion probability stored on each
feedback-triggered row (`sample_rate`), so an aggregate over those rows can weight each by 1/p.

MONITOR_FEEDBACK_JUDGE_BUDGET is the deployment's: each replica admits its share of it (`set_share`, from its share
of the group's partitions, as consumers.group_share gives the provider's quotas), rounded up."""

from __future__ import annotations

import math
from collections import deque

HOUR_S = 3600.0
# The least inclusion probability stored: past it a row's weight (1/p) would let one judgement outweigh the rest.
INCLUSION_FLOOR = 0.001


class HourlyBudget:
    """Admits at most `calls_per_hour` asks in any sliding hour (0: none); remembers the refused ones by second so
    the inclusion probability covers every ask of the hour without keeping one entry per ask."""

    def __init__(self, calls_per_hour: int) -> None:
        if calls_per_hour < 0:
            raise ValueError(f"calls per hour must be 0 or more, got {calls_per_hour}")
        self.calls_per_hour = calls_per_hour
        self.cap = calls_per_hour  # this replica's part of it (`set_share`)
        self._admitted: deque[float] = deque()  # times of the admitted asks of the last hour (at most the cap)
        self._refused: deque[list[int]] = deque()  # [whole second, asks refused in it], oldest first

    def set_share(self, fraction: float) -> None:
        """Admit `fraction` (0..1) of the deployment's calls an hour, rounded up (any share may judge)."""
        self.cap = math.ceil(self.calls_per_hour * max(0.0, min(1.0, fraction)))

    def take(self, now: float) -> bool:
        """One ask at `now` (seconds, never decreasing): True if it is admitted, False if the hour's budget is spent."""
        self._forget(now)
        if len(self._admitted) < self.cap:
            self._admitted.append(now)
            return True
        second = math.floor(now)
        if self._refused and self._refused[-1][0] == second:
            self._refused[-1][1] += 1
        else:
            self._refused.append([second, 1])
        return False

    def inclusion(self, now: float) -> float:
        """The share of the last hour's asks that were admitted: 1.0 when none was refused (or none was made), never
        below `INCLUSION_FLOOR`."""
        self._forget(now)
        refused = sum(n for _, n in self._refused)
        if refused == 0:
            return 1.0
        return max(INCLUSION_FLOOR, len(self._admitted) / (len(self._admitted) + refused))

    def _forget(self, now: float) -> None:
        """Drop what is an hour old or older: an ask at t counts for the hour (t - 3600, t]."""
        since = now - HOUR_S
        while self._admitted and self._admitted[0] <= since:
            self._admitted.popleft()
        # A refused second is forgotten once all of it is an hour old, so refusals count up to a second longer.
        while self._refused and self._refused[0][0] + 1 <= since:
            self._refused.popleft()
