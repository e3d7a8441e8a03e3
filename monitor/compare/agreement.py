"""How two judges agree on the events both scored ok: Spearman ρ, the mean difference b − a with a 95 % t
interval, the mean absolute difference, a low/high confusion table and the events they disagree on most.

Pure functions over `SharedEvent`s; the rank correlation, MAE and ranking of disagreements are those of
`monitor.calibration.agreement` (one implementation for `calibrate` and `compare`), without its bootstrap: a
shadow sample can hold hundreds of thousands of pairs, where resampling them thousands of times would not fit."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from monitor.calibration.agreement import Bootstrap, Statistic, largest_disagreements, mean_absolute_error, spearman

LOW_BELOW = 0.5  # a score below this is "low" (as the alert rules' and the report's low-score share)
CONFIDENCE = 0.95
TOP = 10
_NO_BOOTSTRAP = Bootstrap(resamples=0)


@dataclass(frozen=True, slots=True)
class SharedEvent:
    """One event both judges scored ok: its key, the question (as stored, perhaps empty), both scores and both
    verdict lists (empty for judges without statements)."""

    app: str
    event_id: str
    score_a: float
    score_b: float
    question: str = ""
    verdicts_a: tuple[str, ...] = ()
    verdicts_b: tuple[str, ...] = ()

    @property
    def difference(self) -> float:
        """b − a."""
        return self.score_b - self.score_a


@dataclass(frozen=True, slots=True)
class Confusion:
    """Shared events by side of `LOW_BELOW` under judge a (rows) and judge b (columns)."""

    a_low_b_low: int
    a_low_b_high: int
    a_high_b_low: int
    a_high_b_high: int

    @property
    def same_side(self) -> int:
        """Events both judges put on the same side."""
        return self.a_low_b_low + self.a_high_b_high


@dataclass(frozen=True, slots=True)
class Comparison:
    """Every statistic of one comparison; `disagreements` are the events themselves, largest |b − a| first."""

    n: int
    spearman: Statistic
    mean_difference: Statistic
    mae: Statistic
    confusion: Confusion
    disagreements: tuple[SharedEvent, ...]


def mean_difference(differences: Sequence[float], confidence: float = CONFIDENCE) -> Statistic:
    """The mean of the paired differences with Student's t interval (mean ± t·s/√n); no interval below 2 pairs."""
    n = len(differences)
    if n == 0:
        return Statistic(None, undefined="no shared events")
    mean = math.fsum(differences) / n
    if n < 2:
        return Statistic(mean, undefined="an interval needs at least 2 shared events")
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in differences) / (n - 1))
    from scipy import stats  # here, not on import: every command line imports this module (`compare`)

    half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * sd / math.sqrt(n)
    return Statistic(mean, (mean - half, mean + half))


def confusion(a: Sequence[float], b: Sequence[float], low_below: float = LOW_BELOW) -> Confusion:
    """Counts of pairs by low (< `low_below`) or high under each judge."""
    cells = [0, 0, 0, 0]
    for x, y in zip(a, b, strict=True):
        cells[2 * (x >= low_below) + (y >= low_below)] += 1
    return Confusion(*cells)


def compare(events: Sequence[SharedEvent], top: int = TOP) -> Comparison:
    """Every statistic over `events` (in a stable order: ties among disagreements keep it)."""
    a = [e.score_a for e in events]
    b = [e.score_b for e in events]
    return Comparison(
        n=len(events),
        spearman=spearman(a, b, _NO_BOOTSTRAP, names=("judge a's scores", "judge b's scores")),
        mean_difference=mean_difference([e.difference for e in events]),
        mae=mean_absolute_error(a, b),
        confusion=confusion(a, b),
        disagreements=tuple(events[i] for i in largest_disagreements(a, b, top)),
    )
