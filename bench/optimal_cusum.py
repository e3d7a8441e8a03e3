"""The least delay any detector can have on a planted change: the likelihood-ratio CUSUM that knows the score
histograms before (`pre`) and after (`post`) the change, at a given average run length between false alarms (ARL0,
in events), on the engine's round grid. Pure functions on numpy arrays; `bench/alert_quality.py` uses them as its
reference.

How the threshold is found (`threshold_for`): by Monte Carlo, with the renewal identity and importance sampling.
A CUSUM on the log-likelihood ratio z = log(post(x) / pre(x)) restarts whenever it falls to 0, so its run is a
sequence of independent cycles: a random walk from 0 that ends at the first sum <= 0 (a restart) or >= h (the
alarm). Wald's identity gives ARL0 = E_pre[T] / P_pre(a cycle alarms), with T a cycle's length. E_pre[T] is a few
events and plain simulation gets it to 0.1 %. The alarm probability is tiny (about E[T] / ARL0, 1e-5 to 1e-7), so
it is estimated under `post`, where the walk climbs, and weighted back by dP_pre / dP_post = exp(-W), W the sum at
the cycle's end: P_pre(alarm) = E_post[exp(-W_tau); W_tau >= h]. Because z is the true log-likelihood ratio this
weight is exact (no tilting parameter to solve for; theta = 1), bounded by exp(-h), and carries the overshoot over
h as simulated: no Siegmund approximation and no overshoot correction are involved. Why this and not Siegmund's
formula with theta = 1: its overshoot correction needs the ladder-height constants of a five-point, non-lattice
walk, themselves an approximation to verify; this estimator is unbiased at any h, states its error (`arl_rel_se`,
1-2 % with 20,000 paths: 0.01-0.02 nats of h), and the tests check it against brute simulation at short ARL0s.
One set of post paths serves every h: a path's first sum at or over h is its first ladder height (record) >= h, so
the records are kept once and the bisection on h reads them. Discrete scores make ARL0(h) a step function; the h
returned is the smallest with ARL0 >= the target (the optimum never spends more than its budget), and its estimated
ARL0 is reported with it.

The delay (`delays`): Poisson arrivals at the segment's rate (a diurnal swing by time change), scores from `post`
(or, during a ramp, from `pre` with the probability the ramp has not yet reached), the CUSUM from 0 at the change
(Lorden's worst case for a CUSUM) and, as a second figure, from its stationary law under `pre` (the typical case);
the detection counts at the first round boundary at or after the crossing event."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
DAY_MIN = 1440.0
LOW_LLR = -50.0  # a score `post` never gives: the CUSUM restarts at 0 (log 0 clipped, so that sums stay finite)


def llr(pre: FloatArray, post: FloatArray) -> FloatArray:
    """log(post / pre) per score value; `pre` must give every value `post` gives a positive probability (a value
    the baseline never shows would be proof at once: no finite threshold describes that)."""
    pre, post = np.asarray(pre, dtype=np.float64), np.asarray(post, dtype=np.float64)
    if pre.shape != post.shape or not np.isclose(pre.sum(), 1) or not np.isclose(post.sum(), 1):
        raise ValueError("pre and post must be probabilities over the same values")
    if np.any((post > 0) & (pre <= 0)):
        raise ValueError("post gives a value pre never gives: the log-likelihood ratio is infinite")
    with np.errstate(divide="ignore"):
        out = np.where(post > 0, np.log(np.where(post > 0, post, 1.0) / np.where(pre > 0, pre, 1.0)), LOW_LLR)
    return np.asarray(out, dtype=np.float64)


def _draw(probs: FloatArray, u: FloatArray) -> NDArray[np.intp]:
    """Value indices for uniforms `u` (inverse CDF)."""
    cdf = np.cumsum(probs)
    cdf[-1] = 1.0
    return np.minimum(np.searchsorted(cdf, u, side="right"), len(probs) - 1)


@dataclass(frozen=True, slots=True)
class Threshold:
    """A CUSUM threshold `h` (in nats of log-likelihood ratio) and the ARL0 it gives, as estimated."""

    h: float
    target_events: float
    arl_events: float
    arl_rel_se: float  # relative standard error of `arl_events` (Monte Carlo)
    cycle_events: float  # E_pre[T]: the mean length of one cycle under `pre`


@dataclass(frozen=True, slots=True)
class _Records:
    """The ladder heights (record sums) of cycles simulated under `post`, sorted by path, then value."""

    path: NDArray[np.int64]
    value: FloatArray
    paths: int


def _post_records(z: FloatArray, post: FloatArray, cap: float, paths: int, rng: np.random.Generator) -> _Records:
    """Simulate `paths` cycles under `post` until each restarts (sum <= 0) or passes `cap`; keep their records."""
    block = 64
    w = np.zeros(paths)
    top = np.zeros(paths)  # the running maximum (0: the start)
    alive = np.arange(paths)
    rec_path: list[NDArray[np.int64]] = []
    rec_value: list[FloatArray] = []
    while len(alive):
        steps = z[_draw(post, rng.random((len(alive), block)))]
        sums = w[alive, None] + np.cumsum(steps, axis=1)
        # A cycle ends at its first sum <= 0 or >= cap: nothing after it counts.
        ends = (sums <= 0) | (sums >= cap)
        first_end = np.where(ends.any(axis=1), ends.argmax(axis=1), block)
        live = np.arange(block)[None, :] <= first_end[:, None]
        running = np.maximum.accumulate(np.concatenate([top[alive, None], sums], axis=1), axis=1)
        is_record = live & (sums > running[:, :-1]) & (sums > 0)
        rows, cols = np.nonzero(is_record)
        rec_path.append(alive[rows].astype(np.int64))
        rec_value.append(sums[rows, cols])
        w[alive], top[alive] = sums[:, -1], running[:, -1]
        alive = alive[first_end >= block]
    path, value = np.concatenate(rec_path), np.concatenate(rec_value)
    order = np.lexsort((value, path))
    return _Records(path[order], value[order], paths)


def _alarm_terms(records: _Records, h: float) -> FloatArray:
    """Per path, exp(-W_tau) for a cycle that passes h (W_tau: its first record >= h), else 0."""
    at = records.value >= h
    paths, first = np.unique(records.path[at], return_index=True)
    out = np.zeros(records.paths)
    out[paths] = np.exp(-records.value[at][first])
    return out


def cycle_events(z: FloatArray, pre: FloatArray, cap: float, paths: int, rng: np.random.Generator) -> float:
    """E_pre[T]: the mean number of events from a restart to the next restart or to the first sum >= `cap` (h)."""
    total, w, alive, block = 0.0, np.zeros(paths), np.arange(paths), 16
    while len(alive):
        sums = w[alive, None] + np.cumsum(z[_draw(pre, rng.random((len(alive), block)))], axis=1)
        ends = (sums <= 0) | (sums >= cap)
        done = ends.any(axis=1)
        total += float(np.where(done, ends.argmax(axis=1) + 1, block).sum())
        w[alive] = sums[:, -1]
        alive = alive[~done]
    return total / paths


def threshold_for(
    pre: FloatArray, post: FloatArray, arl_events: float, rng: np.random.Generator, paths: int = 20_000
) -> Threshold:
    """The smallest h whose ARL0 under `pre` is at least `arl_events` for the CUSUM of log(post / pre)."""
    if arl_events <= 1:
        raise ValueError("arl_events must be more than 1")
    z = llr(pre, post)
    # exp(-W) <= exp(-h) on every alarm, so ARL0(h) >= E[T] e^h >= e^h: h = log(ARL0) is always enough.
    cap = math.log(arl_events) + 1e-9
    records = _post_records(z, post, cap, paths, rng)
    # E_pre[T] depends on h through the rare cycles that alarm (they end at h, not later): found at the cap, then
    # again at the h that gives, and the bisection repeated with it (at short ARL0s, 1e3 events, it moves h).
    hi = cap
    for _ in range(2):
        length = cycle_events(z, pre, hi, paths * 5, rng)
        lo, hi = 0.0, cap
        for _ in range(60):
            mid = (lo + hi) / 2
            p_mid = float(_alarm_terms(records, mid).mean())
            if p_mid <= 0 or length / p_mid >= arl_events:
                hi = mid
            else:
                lo = mid
            if hi - lo < 1e-6:
                break
    length = cycle_events(z, pre, hi, paths * 5, rng)
    terms = _alarm_terms(records, hi)
    p = float(terms.mean())
    se = float(terms.std(ddof=1)) / math.sqrt(paths) / p if p > 0 else math.inf
    return Threshold(hi, arl_events, length / p if p > 0 else math.inf, se, length)


@dataclass(frozen=True, slots=True)
class Arrivals:
    """Poisson arrivals of the changed segment: `rate_per_min` before the diurnal swing, its amplitude `diurnal`
    (volume x (1 + diurnal sin(2 pi t / 1 day))), `at_min`: the change in minutes from the swing's zero, and a ramp
    of `ramp_min` minutes over which the scores move from `pre` to `post` (a mixture: each event is from `post`
    with probability t / ramp_min)."""

    rate_per_min: float
    diurnal: float = 0.0
    at_min: float = 0.0
    ramp_min: float = 0.0

    def cumulative(self, t: FloatArray) -> FloatArray:
        """Expected arrivals from the change to `t` minutes after it."""
        w = 2 * math.pi / DAY_MIN
        swing = self.diurnal / w * (np.cos(w * self.at_min) - np.cos(w * (self.at_min + t)))
        out: FloatArray = self.rate_per_min * (t + swing)
        return out


def _times(arrivals: Arrivals, operational: FloatArray) -> FloatArray:
    """Minutes after the change of the arrivals at unit-rate times `operational` (inverting `cumulative`)."""
    if not arrivals.diurnal:
        out: FloatArray = operational / arrivals.rate_per_min
        return out
    horizon = max(float(operational.max()) / (arrivals.rate_per_min * (1 - arrivals.diurnal)), 1.0) + 1.0
    grid = np.linspace(0.0, horizon, int(horizon) + 2)
    return np.asarray(np.interp(operational, arrivals.cumulative(grid), grid), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class Delays:
    """Detection delays of a CUSUM, in minutes from the change, each at the round boundary that first sees it."""

    from_zero: FloatArray  # the statistic at 0 at the change (Lorden's worst case for a CUSUM)
    steady: FloatArray  # the statistic drawn from its law under `pre` before the change (no alarm yet)
    events: FloatArray  # events of the changed segment up to the crossing, from zero

    @property
    def mean_min(self) -> float:
        """The mean delay from zero, in minutes on the grid."""
        return float(self.from_zero.mean())

    @property
    def se_min(self) -> float:
        """The standard error of `mean_min`."""
        return float(self.from_zero.std(ddof=1)) / math.sqrt(len(self.from_zero))


def steady_starts(
    z: FloatArray, pre: FloatArray, h: float, paths: int, rng: np.random.Generator, burn: int = 400
) -> FloatArray:
    """The CUSUM after `burn` events under `pre` from 0, kept below `h` (the law it has when a change comes)."""
    sums = np.cumsum(z[_draw(pre, rng.random((paths, burn)))], axis=1)
    stat = sums - np.minimum(0.0, np.minimum.accumulate(sums, axis=1))
    out: FloatArray = np.where(stat[:, -1] < h, stat[:, -1], 0.0)
    return out


def _crossings(
    z: FloatArray,
    pre: FloatArray,
    post: FloatArray,
    h: float,
    start: FloatArray,
    arrivals: Arrivals,
    rng: np.random.Generator,
) -> tuple[FloatArray, FloatArray]:
    """Per path (one per `start`): the minute after the change of the event whose CUSUM first reaches `h`, and that
    event's number."""
    paths = len(start)
    stat, clock, count = start.astype(np.float64).copy(), np.zeros(paths), np.zeros(paths)
    when, events = np.full(paths, np.nan), np.full(paths, np.nan)
    alive, block = np.arange(paths), 64
    while len(alive):
        operational = clock[alive, None] + np.cumsum(rng.exponential(size=(len(alive), block)), axis=1)
        t = _times(arrivals, operational)
        u = rng.random((len(alive), block))
        if arrivals.ramp_min > 0:
            from_post = rng.random((len(alive), block)) < np.minimum(t / arrivals.ramp_min, 1.0)
            idx = np.where(from_post, _draw(post, u), _draw(pre, u))
        else:
            idx = _draw(post, u)
        sums = np.cumsum(z[idx], axis=1)
        # Lindley: S_n = W_n - min(-S_0, min_{k<=n} W_k).
        s = sums - np.minimum(-stat[alive, None], np.minimum.accumulate(sums, axis=1))
        hit = s >= h
        found = hit.any(axis=1)
        first = hit.argmax(axis=1)
        rows = np.nonzero(found)[0]
        when[alive[rows]] = t[rows, first[rows]]
        events[alive[rows]] = count[alive[rows]] + first[rows] + 1
        stat[alive], clock[alive], count[alive] = s[:, -1], operational[:, -1], count[alive] + block
        alive = alive[~found]
    return when, events


def on_grid(minutes: FloatArray, step_min: float, phase_min: float = 0.0) -> FloatArray:
    """The first round boundary at or after each time (minutes from the change; rounds at phase + k * step)."""
    out: FloatArray = np.ceil((minutes - phase_min) / step_min) * step_min + phase_min
    return out


def delays(
    pre: FloatArray,
    post: FloatArray,
    h: float,
    arrivals: Arrivals,
    rng: np.random.Generator,
    *,
    design: FloatArray | None = None,
    step_min: float = 5.0,
    phase_min: float = 0.0,
    paths: int = 4000,
) -> Delays:
    """Delays of the CUSUM of log(design / pre) with threshold `h` when the scores change from `pre` to `post` (the
    ramp in `arrivals`); `design` defaults to `post` (the optimal detector). Rounds fall at phase + k * step minutes
    from the change."""
    z = llr(pre, post if design is None else design)
    zero_when, zero_events = _crossings(z, pre, post, h, np.zeros(paths), arrivals, rng)
    starts = steady_starts(z, pre, h, paths, rng)
    steady_when, _ = _crossings(z, pre, post, h, starts, arrivals, rng)
    return Delays(on_grid(zero_when, step_min, phase_min), on_grid(steady_when, step_min, phase_min), zero_events)


@dataclass(frozen=True, slots=True)
class Optimal:
    """The optimal detector's figures for one planted change."""

    threshold: Threshold
    mean_min: float
    se_min: float
    median_min: float
    steady_mean_min: float
    mean_events: float

    def as_dict(self) -> dict[str, float]:
        """The figures for the benchmark's JSON."""
        t = self.threshold
        return {
            "h": t.h,
            "arl0_target_events": t.target_events,
            "arl0_events": t.arl_events,
            "arl0_rel_se": t.arl_rel_se,
            "mean_min": self.mean_min,
            "se_min": self.se_min,
            "median_min": self.median_min,
            "steady_mean_min": self.steady_mean_min,
            "mean_events": self.mean_events,
        }


def optimal(
    pre: FloatArray,
    post: FloatArray,
    arl_events: float,
    arrivals: Arrivals,
    seed: int = 0,
    *,
    step_min: float = 5.0,
    phase_min: float = 0.0,
    paths: int = 4000,
    threshold_paths: int = 20_000,
) -> Optimal:
    """The likelihood-ratio CUSUM that knows `pre` and `post`, at ARL0 `arl_events`: its threshold and delays
    (`threshold_paths` and `paths` Monte Carlo paths)."""
    rng = np.random.default_rng(seed)
    threshold = threshold_for(pre, post, arl_events, rng, threshold_paths)
    d = delays(pre, post, threshold.h, arrivals, rng, step_min=step_min, phase_min=phase_min, paths=paths)
    return Optimal(
        threshold,
        d.mean_min,
        d.se_min,
        float(np.median(d.from_zero)),
        float(d.steady.mean()),
        float(d.events.mean()),
    )
