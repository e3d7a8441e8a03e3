"""Pure: the likelihood-ratio detector of a segment's score level, on its score histogram (numpy only).

A CUSUM of the log-likelihood ratio is the fastest detector of a change from one known distribution to another at a
given false-alarm rate (Lorden; Moustakides). The distribution before is the segment's baseline histogram; the one
after is unknown, so the detector is a bank of alternatives in which mass moves down the scale, each with its own
CUSUM, and it pages when any of them reaches its threshold:

- mass leaves the top of the scale (the top bins holding `SOURCE_MASS` of the baseline) for one of four bands below
  it (about 0, 0.25, 0.5 or 0.75), at three strengths: a share `MOVED` of the top's mass. A regression turns good
  answers into worse ones, and the middle of the scale keeps its share; the mean counts a 1.0 turned 0.25 as three
  quarters of a zero, the likelihood ratio as what it is;
- and a collapse: `COLLAPSE` of every answer falls to the lowest band (a broken prompt, a canary that answers
  nothing), whatever it scored before.

Measured against the CUSUM that knows the true distribution after the change, at the same false-alarm rate, this
bank needs 1.16-1.23 times its events for moves from the top to any band, 1.46 for a collapse to 0.09, and 1.5 for a
shift of every answer by one rubric level (events from a start at 0; `bench/alert_quality.py` for the minutes).
The mean's CUSUM needed 1.4-2.5 times.

Thresholds: each member's from Siegmund's approximation of the average run length, which is exact up to the
overshoot for a true likelihood ratio (its adjustment coefficient is 1), at `bank_factor` times the events between
false alarms asked for. The factor accounts for the union of the members less their overshoot (a member's threshold
is passed by a whole increment, so Siegmund's run length is short of the real one). Measured by simulation with
every member at the target itself, the bank's run length is the target over 3.0-3.2 at 2,000 events, 3.7-4.4 at
20,000 and 4.1-5.2 at 200,000 on rubric baselines (1.9-2.6 on a continuous one): the members' excursions part ways
as the threshold grows, so the union costs more. `bank_factor` is 3.4 + log10(target / 2,000), above every one
of those (`tests/monitor/alerts/test_likelihood.py` checks the calibrated bank's rate of false alarms by
simulation), and never more than the members' count (the union bound)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

SOURCE_MASS = 0.3  # the top of the scale: the highest bins that hold this much of the baseline
BANDS = ((0.0, 0.125), (0.125, 0.375), (0.375, 0.625), (0.625, 0.875))  # where the mass goes
MOVED = (0.2, 0.5, 0.85)  # how much of the top's mass moves
COLLAPSE = 0.7  # the share of all answers that falls to the lowest band in a collapse
MIN_PAGE_EVENTS = 2.0  # a member's threshold is at least this many of its largest increments: no single answer pages


@dataclass(frozen=True, slots=True, eq=False)
class Bank:
    """The alternatives of a baseline `probs` (over the bins' values), one per row of `llr` (the log-likelihood
    ratio of each bin), and each row's threshold `limits`."""

    probs: NDArray[np.float64]
    llr: NDArray[np.float64]
    limits: NDArray[np.float64]

    def __eq__(self, other: object) -> bool:
        # Arrays compare element by element; a bank read back from the state table is the same one exactly.
        if not isinstance(other, Bank):
            return NotImplemented
        return all(
            np.array_equal(a, b)
            for a, b in ((self.probs, other.probs), (self.llr, other.llr), (self.limits, other.limits))
        )

    __hash__ = None  # type: ignore[assignment]  # mutable arrays inside: equal banks need not hash alike

    @property
    def threshold(self) -> float:
        """The threshold the statistic (`statistic`) is shown against: the largest member's."""
        return float(self.limits.max())

    def excursions(self, counts: NDArray[np.float64]) -> NDArray[np.float64]:
        """Each member's CUSUM at the last of `counts` (effective events per bin, one row per bucket, oldest first),
        started at 0 before the first."""
        if not len(counts):
            return np.zeros(len(self.limits))
        c = np.cumsum(counts @ self.llr.T, axis=0)
        out: NDArray[np.float64] = c[-1] - np.minimum(c.min(axis=0), 0.0)
        return out

    def statistic(self, counts: NDArray[np.float64]) -> float:
        """The bank's CUSUM in units of `threshold`: it reaches the threshold when any member reaches its own."""
        return self.threshold * float((self.excursions(counts) / self.limits).max())

    def change_point(self, counts: NDArray[np.float64]) -> int | None:
        """The bucket after the last minimum of the leading member's cumulative sum: where its last climb began."""
        if not len(counts):
            return None
        lead = int(np.argmax(self.excursions(counts) / self.limits))
        c = np.concatenate(([0.0], np.cumsum(counts @ self.llr[lead])))
        return min(len(c) - 1 - int(np.argmin(c[::-1])), len(counts) - 1)

    def delay_events(self, after: NDArray[np.float64]) -> float:
        """Events to page when scores are drawn from `after` (Wald's approximation: the threshold over the drift of
        the member that climbs fastest to its own); inf when none climbs."""
        drift = self.llr @ after
        climbing = drift > 0
        return float((self.limits[climbing] / drift[climbing]).min()) if climbing.any() else math.inf


def alternatives(probs: NDArray[np.float64], values: NDArray[np.float64]) -> NDArray[np.float64]:
    """The bank's distributions after a change, one per row: the top's mass moved to each band, then a collapse."""
    order = np.argsort(values)[::-1]
    top_mass = np.cumsum(probs[order])
    source = np.zeros_like(probs, dtype=bool)
    source[order[: int(np.searchsorted(top_mass, SOURCE_MASS)) + 1]] = True
    lowest = float(values[source].min())
    top = np.where(source, probs, 0.0) / float(probs[source].sum())
    rows = []
    for lo, hi in BANDS:
        band = (values >= lo) & (values < hi) & (values < lowest)
        if not band.any():
            continue
        into = np.where(band, probs, 0.0) / float(probs[band].sum())
        rows += [probs + share * float(probs[source].sum()) * (into - top) for share in MOVED]
    low = values < BANDS[0][1]
    floor = np.where(low, probs, 0.0) / float(probs[low].sum()) if low.any() else np.eye(len(values))[0]
    rows.append((1 - COLLAPSE) * probs + COLLAPSE * floor)
    return np.array(rows)


def bank_for(probs: NDArray[np.float64], values: NDArray[np.float64], arl_events: float) -> Bank:
    """The bank for baseline `probs` (every probability > 0) of `values`, paging once per `arl_events` events of
    scores drawn from it."""
    llr = np.log(alternatives(probs, values) / probs)
    each = arl_events * bank_factor(arl_events, len(llr))
    limits = np.array([_threshold(float(-(probs @ row)), each) for row in llr])
    limits = np.maximum(limits, MIN_PAGE_EVENTS * llr.max(axis=1))
    return Bank(probs, llr, limits)


def bank_factor(arl_events: float, members: int) -> float:
    """How many times `arl_events` each member's threshold is set for, so that the bank as a whole pages no more
    often than once per `arl_events` (see the module docstring for the measurements)."""
    return min(3.4 + math.log10(max(arl_events, 2_000.0) / 2_000.0), float(members))


def with_baseline(bank: Bank, probs: NDArray[np.float64], values: NDArray[np.float64]) -> Bank:
    """The bank of a new baseline `probs` with the thresholds of `bank` (an accepted level keeps its episode's)."""
    llr = np.log(alternatives(probs, values) / probs)
    limits = bank.limits if len(bank.limits) == len(llr) else np.full(len(llr), bank.threshold)
    return Bank(probs, llr, np.maximum(limits, MIN_PAGE_EVENTS * llr.max(axis=1)))


def _threshold(drift: float, arl_events: float) -> float:
    """h with (exp(h) - h - 1) / drift = arl_events: Siegmund's run length for a likelihood ratio (theta = 1)
    whose mean increment before the change is -`drift`."""
    if drift <= 0:
        return math.inf
    target = max(arl_events, 1.0) * drift
    y = math.log(target + 1.0)
    for _ in range(50):
        nxt = math.log(target + 1.0 + y)
        if abs(nxt - y) < 1e-12:
            break
        y = nxt
    return y
