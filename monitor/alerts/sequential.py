"""Pure sequential detection on a segment's judged scores (numpy only).

- `Reference` and `calibrate`: what a segment's detector compares with, chosen so that scores drawn from the segment's
  own past would page once per `arl_events` events. On a histogram of scores the detector is the likelihood ratio's
  bank (`likelihood.Bank`); the CUSUM of the mean below stays for the low-score share (whose two values make the mean
  a likelihood ratio) and for the recovery. The mean's threshold `h`
  comes from the exact bootstrap: the resampling distribution of the past scores (their weighted histogram) gives
  the CUSUM's adjustment coefficient theta, the root of E[exp(theta * z)] = 1, and Siegmund's approximation turns
  it into the average run length. Discrete, skewed judge scores move theta well away from the Gaussian 2k / sigma^2,
  which is why a Gaussian threshold pages several times more often than it states.
- `Buckets`, `cusum` and `recovery`: the statistic over the window's buckets (a batched CUSUM: its alarms are a
  subset of the event-by-event one's, so the calibration is conservative), and the reverse statistic that tells
  a fix from a lull.
- `stopped_beside` and `stopped_alone`: whether a segment's silence since its last event is beyond chance, judged by
  the traffic of the segments beside it (a rollback moves the traffic to the old version), or by its own rate."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from monitor.alerts.likelihood import Bank, bank_for
from monitor.alerts.windows import SCORE_BINS

BINS = SCORE_BINS  # scores binned to 0.05: the rubric's 0, 0.25, 0.5, 0.75 and 1 exactly, statements' fractions closely
BIN_VALUES = np.linspace(0.0, 1.0, BINS)
LOW_SHARE_VALUES = np.array([0.0, 1.0])  # the low-score share's values: 0 for a low score, 1 otherwise
WEEK_S = 7 * 86_400.0
SAFETY_SE = 2.0  # the reference sits this many standard errors of the baseline mean below it (an estimated mean)
PSEUDO_EVENTS = 1.0  # spread over the bins, so a value never seen in the baseline is rare, not impossible
MIN_PAGE_EVENTS = 2.0  # a threshold is at least this many events' largest increment: no single answer pages
STOP_LEVEL = 1e-4  # a silence this improbable means the segment no longer receives traffic (looked at every round)
MIN_SILENCE_S = 180.0
ALONE_SILENCE_S = 3600.0
MIN_SPAN_S = 900.0  # a segment younger than this is rated over this long: a burst of first events is no rate


@dataclass(frozen=True, slots=True)
class Reference:
    """What a level detector compares with: the in-control `mean` (oriented so that lower is worse), the slack `k`
    (half the shift the rule is tuned to) and the threshold `h`, both in score units summed over events."""

    mean: float
    slack: float
    threshold: float
    resolve_at: float = 0.0  # the recovery statistic that resolves: the threshold, or more (`calibrate`)
    margin: float = 0.0  # how far `mean` sits below the baseline's own mean (its standard errors)
    bank: Bank | None = None  # the likelihood-ratio detector on the histogram (None: the CUSUM of the mean)

    @property
    def baseline_mean(self) -> float:
        """The baseline's own mean (what people read as the baseline)."""
        return self.mean + self.margin

    @property
    def recovery_level(self) -> float:
        """What the recovery statistic compares with: half-way between the baseline and the drop the rule is tuned
        to, raised by the margin (an estimated baseline must not make a regression look recovered) but by at most half
        the slack, so that the scores of the baseline climb by half the slack per event or more, and a regression of
        the shift falls by the slack or more, whatever the baseline's size."""
        return self.baseline_mean - self.slack + min(self.margin, self.slack / 2)

    @property
    def watchable(self) -> bool:
        """Whether the statistic can page at all (False: the drop would take the mean below the lowest score)."""
        return math.isfinite(self.threshold)

    @property
    def resolve_threshold(self) -> float:
        """What the recovery statistic must reach to resolve an episode (with a bank, `threshold` is in the
        likelihood ratio's units, and `calibrate` put the mean's threshold in `resolve_at`)."""
        return self.resolve_at if self.bank is not None else max(self.threshold, self.resolve_at)

    def delay_events(self, drop: float) -> float:
        """Events a drop of `drop` below the baseline mean needs to reach the threshold (inf when it does not, or
        cannot page). The histogram's detector: with `drop` of the mean moved from the top of the scale to its
        bottom (`dropped`). The mean's: the statistic climbs by the drop less the slack and the margin per event."""
        if not self.watchable:
            return math.inf
        if self.bank is not None:
            return self.bank.delay_events(dropped(self.bank.probs, BIN_VALUES, drop))
        climb = drop - self.slack - self.margin
        return self.threshold / climb if climb > 0 else math.inf

    def detectable(self, events: float) -> float:
        """The smallest drop below the baseline mean that reaches the threshold within `events` events (inf when
        that would take the mean below the lowest score, 0)."""
        if events <= 0 or not self.watchable:
            return math.inf
        if self.bank is not None:
            room = float(self.bank.probs @ BIN_VALUES) - float(BIN_VALUES.min())
            if self.delay_events(room) > events:
                return math.inf
            lo, hi = 0.0, room
            for _ in range(30):
                mid = (lo + hi) / 2
                lo, hi = (lo, mid) if self.delay_events(mid) <= events else (mid, hi)
            return hi
        drop = self.slack + self.margin + self.threshold / events
        return drop if drop <= self.baseline_mean else math.inf


def distribution(
    bins: NDArray[np.float64] | tuple[float, ...], values: NDArray[np.float64] = BIN_VALUES
) -> NDArray[np.float64]:
    """Probabilities of `values` from weighted counts, with `PSEUDO_EVENTS` spread evenly over them."""
    counts = np.asarray(bins, dtype=np.float64)
    smoothed = counts + PSEUDO_EVENTS / len(values)
    out: NDArray[np.float64] = smoothed / smoothed.sum()
    return out


def adjustment_coefficient(probs: NDArray[np.float64], z: NDArray[np.float64]) -> float:
    """theta > 0 with sum p exp(theta z) = 1 for increments `z` (with probabilities `probs`) that drift down (E z < 0)
    and rise sometimes; inf when they never rise, 0 when they do not drift down."""
    if float(probs @ z) >= 0:
        return 0.0
    if not np.any((z > 0) & (probs > 0)):
        return math.inf
    # The root is cached by the distribution to 3 significant digits and the increments rounded up to 0.001, and
    # computed from that key, not from the first distribution to reach it: a baseline that moved by a few events
    # reuses it, and larger increments can only lower theta (raise h), so a hit lowers h only by what rounding the
    # probabilities can (measured: 0.2 % at most), and raises it by up to ~4 %. Rounding the increments to the
    # nearest, and keeping the first asker's root, lowered h by up to 3.6 %.
    key_p = tuple(float(f"{p:.3g}") for p in probs.tolist())
    key_z = tuple((np.ceil(np.round(z * 1000, 6)) / 1000).tolist())
    found = _THETAS.get((key_p, key_z))
    if found is None:
        if len(_THETAS) >= 8192:
            _THETAS.clear()
        pp, zz = np.array(key_p), np.array(key_z)
        found = _THETAS[(key_p, key_z)] = _theta(pp[pp > 0] / pp.sum(), zz[pp > 0])
    return found


_THETAS: dict[tuple[tuple[float, ...], tuple[float, ...]], float] = {}


def _theta(p: NDArray[np.float64], zz: NDArray[np.float64]) -> float:
    # log E[exp(t z)] is convex, 0 at t = 0 with a negative slope there: one positive root, found by bisection
    # after doubling an upper bound (Newton can overshoot on the steep side).

    def log_mgf(t: float) -> float:
        top = float(np.max(t * zz))
        return top + math.log(float(p @ np.exp(t * zz - top)))

    hi = 1.0
    while log_mgf(hi) < 0:
        hi *= 2
        if hi > 1e6:
            return math.inf
    lo = 0.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if log_mgf(mid) < 0:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-6 * hi:
            break
    return hi


def threshold_for(theta: float, drift: float, arl_events: float) -> float:
    """h with an average run length of `arl_events` for increments of mean -`drift` and adjustment coefficient
    `theta`: Siegmund's (exp(theta h) - theta h - 1) / (theta drift) = ARL, without the overshoot correction (which
    would lower h: leaving it out errs towards fewer pages). 0 when the increments never rise (theta inf: any
    threshold is never reached), under the floor `calibrate` puts beneath every threshold."""
    if math.isinf(theta):
        return 0.0
    if theta <= 0 or drift <= 0:
        return math.inf
    target = max(arl_events, 1.0) * theta * drift
    y = math.log(target + 1.0)
    for _ in range(50):
        nxt = math.log(target + 1.0 + y)
        if abs(nxt - y) < 1e-12:
            break
        y = nxt
    return y / theta


def calibrate_mean(
    bins: NDArray[np.float64] | tuple[float, ...],
    mean: float,
    variance: float,
    n_eff: float,
    shift: float,
    arl_events: float,
    values: NDArray[np.float64] = BIN_VALUES,
    resolve_arl_events: float = 0.0,
) -> Reference:
    """The reference of a CUSUM of the mean tuned to a drop of `shift`, paging once per `arl_events` events of
    scores like the baseline's (`bins`: weighted counts of `values`; `mean`, `variance`, `n_eff`: the baseline's
    moments), and resolving a regression of `shift` that stays at most once per `resolve_arl_events` events of it."""
    se = math.sqrt(max(variance, 0.0) / n_eff) if n_eff > 0 else 0.0
    level = mean - SAFETY_SE * se
    slack = shift / 2
    probs = distribution(bins, values)
    if level - slack <= float(values.min()):
        # A drop the scores cannot fall to (a baseline within the slack of the lowest score): no score makes the
        # statistic rise, so it cannot page, and a threshold of 0 would page on the flat line every other round.
        return Reference(level, slack, math.inf, math.inf, mean - level)
    # The increments the baseline's own scores would give: level - k - x, with x resampled from the baseline.
    z = level - slack - values
    h = threshold_for(adjustment_coefficient(probs, z), -float(probs @ z), arl_events)
    # No single answer pages: the drop is a sustained shift of the mean, so h is at least MIN_PAGE_EVENTS answers at
    # the lowest score. The calibration alone cannot promise it where the baseline never saw a low score: the
    # pseudo-count gives an unseen zero ~1/(21 n), where n events only rule out rates above ~3/n, so on 20,000
    # perfect scores h fell below one zero's increment. An honest prior (one pseudo-event at the lowest score)
    # would lift h to about one increment at 2 judged a minute and not at slower rates, and would move every thin
    # baseline's threshold; the floor says what the rule means and touches no segment with a tail of low scores.
    ref = Reference(level, slack, max(h, MIN_PAGE_EVENTS * float(z.max())), 0.0, mean - level)
    # The recovery's increments x - recovery_level under the regression it must not take for a fix: the baseline with
    # `shift` of its mean moved to the lowest score (`regressed`). A mirror of the detection's theta does not hold:
    # skewed scores rise and fall by different steps, and it resolved persisting regressions 2-5 times too often.
    bad = regressed(probs, values, mean - shift)
    y = values - ref.recovery_level
    resolve_at = threshold_for(adjustment_coefficient(bad, y), -float(bad @ y), resolve_arl_events)
    return dataclasses.replace(ref, resolve_at=max(resolve_at, MIN_PAGE_EVENTS * float(y.max())))


def calibrate(
    bins: NDArray[np.float64] | tuple[float, ...],
    mean: float,
    variance: float,
    n_eff: float,
    shift: float,
    arl_events: float,
    values: NDArray[np.float64] = BIN_VALUES,
    resolve_arl_events: float = 0.0,
) -> Reference:
    """The reference of a segment's detector (arguments as `calibrate_mean`'s): on a histogram of scores, the
    likelihood ratio's bank pages, and the mean's CUSUM (`calibrate_mean`) only resolves, so its threshold moves
    into `resolve_at`; on the low-score share's two values, the mean's CUSUM is the likelihood ratio's and does
    both."""
    ref = calibrate_mean(bins, mean, variance, n_eff, shift, arl_events, values, resolve_arl_events)
    if len(values) == len(LOW_SHARE_VALUES) or not ref.watchable:
        return ref
    bank = bank_for(cautious(bins, n_eff, values), values, arl_events)
    return dataclasses.replace(ref, threshold=bank.threshold, resolve_at=ref.resolve_threshold, bank=bank)


def cautious(
    bins: NDArray[np.float64] | tuple[float, ...], n_eff: float, values: NDArray[np.float64] = BIN_VALUES
) -> NDArray[np.float64]:
    """The baseline histogram a likelihood ratio can trust: each bin's share raised to `SAFETY_SE` standard errors
    above its estimate, and by at least SAFETY_SE^2 / 6 events, then renormalised. A share estimated too low (3 % of
    zeros seen as 0 % in 50 events) makes every such score look like evidence of a change: on 50 baseline events the
    plain estimate paged 4-8 times more often than asked, on 1,000 still 1.2-1.4 times. Raised, it pages no more often
    than asked from 50 events up (`tests/monitor/alerts/test_likelihood.py`), and costs 3 % of delay at 10,000."""
    counts = np.asarray(bins, dtype=np.float64)
    total = float(counts.sum())
    if total <= 0 or n_eff <= 0:
        return distribution(counts, values)
    share = counts / total
    raised = share + SAFETY_SE * np.sqrt(share * (1 - share) / n_eff) + SAFETY_SE**2 / (6 * n_eff)
    return distribution(raised * n_eff, values)


def dropped(probs: NDArray[np.float64], values: NDArray[np.float64], drop: float) -> NDArray[np.float64]:
    """`probs` (of ascending `values`) with `drop` of its mean moved from the highest values to the lowest: the
    regression `Reference.delay_events` rates (as the benchmark plants it)."""
    out = probs.copy()
    need = drop
    for i in range(len(values) - 1, 0, -1):
        if need <= 0:
            break
        step = float(values[i] - values[0])
        moved = min(float(out[i]), need / step)
        out[i] -= moved
        out[0] += moved
        need -= moved * step
    return out


def regressed(probs: NDArray[np.float64], values: NDArray[np.float64], mean: float) -> NDArray[np.float64]:
    """`probs` (of ascending `values`) lowered to `mean` by moving mass to the lowest value, from the lowest values
    first: of all the ways to lower the mean by moving mass down, the one that keeps the most of the top."""
    # Moving mass m from a to b < a lowers the mean by m (a - b) and E exp(t x) by m (e^ta - e^tb): per unit of
    # mean, a chord slope of e^tx, smallest for b at the bottom and a as low as possible. So this maximises
    # E exp(t x) at every t > 0 among such regressions: the smallest theta, the most false resolutions.
    out = probs.copy()
    need = float(out @ values) - mean
    for i in range(1, len(values)):
        if need <= 0:
            break
        step = float(values[i] - values[0])
        moved = min(float(out[i]), need / step)
        out[i] -= moved
        out[0] += moved
        need -= moved * step
    return out


@dataclass(frozen=True, slots=True)
class Buckets:
    """One segment's buckets in the window, oldest first: bucket start (epoch ms), sum of weights, of squared
    weights, and of weight * value (the value oriented so that lower is worse)."""

    start_ms: NDArray[np.int64]
    weight: NDArray[np.float64]
    weight_sq: NDArray[np.float64]
    value: NDArray[np.float64]
    bins: NDArray[np.float64] | None = None  # weight per score bin, one row per bucket (the scores' histogram)

    @property
    def n_eff(self) -> NDArray[np.float64]:
        """Each bucket's effective number of events (its event count when every weight is the same)."""
        return np.divide(self.weight**2, self.weight_sq, out=np.zeros_like(self.weight), where=self.weight_sq > 0)

    def since(self, start_ms: int) -> Buckets:
        """The buckets that start at or after `start_ms`."""
        i = int(np.searchsorted(self.start_ms, start_ms))
        bins = self.bins[i:] if self.bins is not None else None
        return Buckets(self.start_ms[i:], self.weight[i:], self.weight_sq[i:], self.value[i:], bins)

    def counts(self) -> NDArray[np.float64]:
        """Effective events per score bin, one row per bucket: each bucket's weights scaled to its effective
        events (its counts, when every weight is the same)."""
        assert self.bins is not None
        scale = np.divide(self.n_eff, self.weight, out=np.zeros_like(self.weight), where=self.weight > 0)
        out: NDArray[np.float64] = self.bins * scale[:, None]
        return out

    def histogram(self) -> NDArray[np.float64] | None:
        """Effective events per score bin over all the buckets (None without bins)."""
        return self.counts().sum(axis=0) if self.bins is not None else None

    @property
    def events(self) -> float:
        """Effective events in all the buckets."""
        return float(self.n_eff.sum())

    def mean(self) -> float | None:
        """The weighted mean value (None without events)."""
        total = float(self.weight.sum())
        return float(self.value.sum()) / total if total > 0 else None


def _increments(b: Buckets, level: float) -> NDArray[np.float64]:
    # Per bucket: n_eff * (level - mean): with equal weights exactly the sum of (level - x) over its events.
    means = np.divide(b.value, b.weight, out=np.zeros_like(b.value), where=b.weight > 0)
    out: NDArray[np.float64] = b.n_eff * (level - means)
    return out


def cusum(b: Buckets, ref: Reference) -> float:
    """The statistic at the last bucket, started at 0 at the first: the likelihood-ratio bank's, or the mean's
    CUSUM, max(0, S + n (mean - k - x))."""
    if ref.bank is not None and b.bins is not None:
        return ref.bank.statistic(b.counts())
    return _last_excursion(_increments(b, ref.mean - ref.slack))


def recovery(b: Buckets, ref: Reference) -> float:
    """The reverse statistic: evidence that the scores are back above `Reference.recovery_level`. It resolves at the
    threshold: a regression that stays rarely gets there (its increments drift down), a fix gets there."""
    # The margin is capped: in full, past the slack (a baseline of under ~140 events), the level would sit above
    # the baseline itself, where a fix drifts down and never resolves.
    return _last_excursion(-_increments(b, ref.recovery_level))


def change_point(b: Buckets, ref: Reference) -> int | None:
    """Where the statistic's last climb began (the start of the bucket after the cumulative sum's last minimum): the
    CUSUM's estimate of when the change happened; None without buckets."""
    if not len(b.start_ms):
        return None
    if ref.bank is not None and b.bins is not None:
        at = ref.bank.change_point(b.counts())
        return int(b.start_ms[at]) if at is not None else None
    c = np.concatenate(([0.0], np.cumsum(_increments(b, ref.mean - ref.slack))))
    low = len(c) - 1 - int(np.argmin(c[::-1]))  # the last minimum
    return int(b.start_ms[min(low, len(b.start_ms) - 1)])


def _last_excursion(z: NDArray[np.float64]) -> float:
    if len(z) == 0:
        return 0.0
    c = np.cumsum(z)
    low = min(0.0, float(np.min(c)))
    return float(c[-1]) - low


def stopped_beside(events: float, beside_during: float, beside_after: float, silent_s: float) -> bool:
    """Whether a segment stopped receiving traffic while the segments beside it (the same app) did not: it had
    `events` of the `events + beside_during` judged while it was live, and none of the `beside_after` judged since.
    At that share p, (1 - p) ** beside_after below `STOP_LEVEL` is no lull; p is shrunk towards 1/2 by half an event,
    so one stray event of an old version does not retire a version that took all the traffic."""
    if silent_s < MIN_SILENCE_S or events <= 0 or beside_after <= 0:
        return False
    share = (events + 0.5) / (events + beside_during + 1.0)
    return beside_after * math.log1p(-share) < math.log(STOP_LEVEL)


def stopped_alone(events: float, active_s: float, silent_s: float) -> bool:
    """Whether a segment with nothing beside it stopped receiving traffic: at its own rate, a silence of `silent_s`
    is rare even looked at after every event of a week (fewer than `STOP_LEVEL` such gaps expected), and an hour at
    least. The whole app falling silent is `app_no_data`'s page; this only keeps a retired segment from paging on."""
    if silent_s < ALONE_SILENCE_S or events <= 0:
        return False
    rate = events / max(active_s, MIN_SPAN_S)  # as `detection.events_per_s` rates it
    return rate * WEEK_S * math.exp(-rate * silent_s) < STOP_LEVEL
