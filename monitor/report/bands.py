"""How sure each point of a chart is (pure): a bucket's weighted mean with a 95 % band from the effective n the
alerts use (Kish's (Σw)² / Σw², with w = 1/sample_rate), and whether it holds too few events to be read at all.

A thin bucket gets the widest band a score in [0, 1] allows (variance 1/4) rather than its own spread, which is 0
for one event: a lone 0.0 or 1.0 is drawn as the guess it is, not as a collapse or a perfect minute."""

from __future__ import annotations

import math
from dataclasses import dataclass

from monitor.alerts.observations import MAX_SCORE_VARIANCE, effective_n, weighted_moments
from monitor.alerts.windows import WeightedSums

THIN_EVENTS = 5.0  # effective events below which a bucket's mean is drawn as uncertain
_Z95 = 1.959964


@dataclass(frozen=True, slots=True)
class Estimate:
    """A bucket's value with its 95 % band (clipped to the measure's range) and the effective n behind it."""

    value: float
    low: float
    high: float
    n_eff: float

    @property
    def thin(self) -> bool:
        """Too few effective events for the value to mean much: drawn hollow, its band the widest."""
        return self.n_eff < THIN_EVENTS


def mean_estimate(sums: WeightedSums) -> Estimate | None:
    """The weighted mean score of `sums` with its band; None without ok rows."""
    m = weighted_moments(sums)
    if m is None:
        return None
    variance = MAX_SCORE_VARIANCE if m.n_eff < THIN_EVENTS else m.variance
    return _estimate(m.mean, variance, m.n_eff, 1.0)


def share_estimate(sums: WeightedSums, scale: float = 100.0) -> Estimate | None:
    """The weighted share of low scores in `sums` (times `scale`: percent by default) with a binomial band."""
    if sums.weight <= 0:
        return None
    share = min(max(sums.low / sums.weight, 0.0), 1.0)
    n_eff = effective_n(sums)
    variance = MAX_SCORE_VARIANCE if n_eff < THIN_EVENTS else share * (1 - share)
    e = _estimate(share, variance, n_eff, 1.0)
    return Estimate(e.value * scale, e.low * scale, e.high * scale, e.n_eff)


def _estimate(value: float, variance: float, n_eff: float, top: float) -> Estimate:
    half = _Z95 * math.sqrt(variance / n_eff) if n_eff > 0 else top
    return Estimate(value, max(value - half, 0.0), min(value + half, top), n_eff)
