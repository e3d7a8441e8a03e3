"""Pure always-valid tests of the mean of scores in [0, 1] by betting (numpy only), from a window's histogram.

A bettor who stakes the fraction `u` of the largest safe bet on each score x being below `mu0` multiplies their
capital by 1 + lam (mu0 - x), lam = u / (1 - mu0); under H0 "the mean is at least mu0" each factor has expectation
at most 1, so the product is a nonnegative supermartingale for any scores in [0, 1] (bounded scores are all it
takes: no variance is guessed or estimated), and so is its average over a prior on u (Waudby-Smith and Ramdas,
"Estimating means of bounded random variables by betting", JRSS B 2023). Ville's inequality bounds the chance that
it ever reaches 1 / alpha by alpha, however often it is looked at. The product does not depend on the order of the
scores, so it is computed from the histogram of the events so far, and a round that recomputes it from the window
looks at the same process (while the window holds every event of the version).

The prior is uniform on u over a midpoint grid of `FRACTIONS` points in (0, 1): a finite mixture, so the capital is
exactly a supermartingale (no quadrature error), and every factor stays above 0 (1 - u at a score of 1). It is
fixed in u, not in lam, for a reason: each factor grows with mu0 at fixed u (its derivative in mu0 is
u (1 - x) / (1 - mu0)^2 >= 0), so the capital against any mu0 at or below the true mean is at most the capital
against the true mean itself, one fixed supermartingale. That is what lets mu0 move from round to round (the old
version's lower bound, `p_below`) without spending more than alpha."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

FRACTIONS = 200  # the capital is smooth in u: 100 and 1,000 points give it to 5 digits on 100,000 events
_U = (np.arange(FRACTIONS) + 0.5) / FRACTIONS  # the bet as a share of the largest safe one, uniform prior
_LOG_WEIGHT = -math.log(FRACTIONS)
_BISECTIONS = 20  # on [0, the reference's mean]: where the two bets meet, to 1e-6


def log_e_below(values: NDArray[np.float64], counts: NDArray[np.float64], mu0: float) -> float:
    """log of the e-value against H0 "the mean is at least `mu0`" for scores `values` in [0, 1] seen `counts` times
    (effective counts may be fractional): large when the scores sit below `mu0`."""
    return _log_e(*_seen(values, counts), mu0)


def log_e_above(values: NDArray[np.float64], counts: NDArray[np.float64], m: float) -> float:
    """log of the e-value against H0 "the mean is at most `m`": the mirror of `log_e_below` (x -> 1 - x)."""
    return log_e_below(1.0 - np.asarray(values, dtype=np.float64), counts, 1.0 - m)


def _seen(values: NDArray[np.float64], counts: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The values seen at least once and their counts."""
    counts = np.asarray(counts, dtype=np.float64)
    seen = counts > 0
    return np.asarray(values, dtype=np.float64)[seen], counts[seen]


def _log_e(v: NDArray[np.float64], n: NDArray[np.float64], mu0: float) -> float:
    """`log_e_below` on values already filtered by `_seen`."""
    if mu0 <= 0.0 or not len(n):
        return 0.0  # every mean in [0, 1] is at least 0: no evidence against it
    if mu0 >= 1.0:
        # Against a mean of 1 (every score 1) any lower score is proof; none is no evidence.
        return math.inf if bool(np.any(v < 1.0)) else 0.0
    return _log_mixture(v, n, mu0)


def _log_mixture(v: NDArray[np.float64], n: NDArray[np.float64], mu0: float) -> float:
    lam = _U / (1.0 - mu0)
    # One row per bet: sum_b n_b log(1 + lam (mu0 - v_b)). Broadcasting is np.outer's own product without its
    # per-call overhead, which dominates on a histogram's few bins (a rollout's p-value makes 44 of these calls).
    log_capital = np.log1p(lam[:, np.newaxis] * (mu0 - v)) @ n
    top = float(log_capital.max())
    return top + math.log(float(np.exp(log_capital - top).sum())) + _LOG_WEIGHT


def p_below(
    values: NDArray[np.float64],
    counts: NDArray[np.float64],
    reference_values: NDArray[np.float64],
    reference_counts: NDArray[np.float64],
) -> float:
    """An always-valid p-value that the scores (`values` seen `counts` times) have a lower mean than the reference's,
    itself estimated from its scores: p = 2 / max over m of min(e_ref(m), e_new(m)), where e_ref bets against "the
    reference's mean is at most m" (`log_e_above`) and e_new against "the mean is at least m" (`log_e_below`).

    p < alpha says that some m is both below the reference's lower bound at level alpha / 2 (a confidence sequence:
    it holds at every round) and above the new scores' mean at alpha / 2. Under H0 (the new mean at least the
    reference's, m*), at every m one of the two is at most its value at m*: e_ref falls as m rises and e_new rises
    with m, and at m* both are supermartingales. So P(p < alpha at any round) <= alpha / 2 + alpha / 2, for every
    alpha at once: a round may decide at the level its share of the budget gives, and the chance of a false page
    over the rollout is at most the largest level used."""
    # log e_ref - log e_new falls as m rises: where it crosses 0 the smaller of the two is largest.
    ref_mean = _mean(reference_values, reference_counts)
    if ref_mean is None or _mean(values, counts) is None:
        return 1.0
    # Each side filtered once for the bisection's many m (as `log_e_above` and `log_e_below` would at each).
    ref_v, ref_n = _seen(1.0 - np.asarray(reference_values, dtype=np.float64), reference_counts)
    new_v, new_n = _seen(values, counts)
    lo, hi = 0.0, ref_mean
    at: dict[float, float] = {}  # min(log e_ref, log e_new) at each m tried: the ends are kept, not recomputed
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2
        ref, new = _log_e(ref_v, ref_n, 1.0 - mid), _log_e(new_v, new_n, mid)
        at[mid] = min(ref, new)
        if ref >= new:
            lo = mid
        else:
            hi = mid
    # Both ends are values of min(e_ref, e_new) at some m; the larger is the evidence (the exact max lies between).
    best = max(at[m] if m in at else min(_log_e(ref_v, ref_n, 1.0 - m), _log_e(new_v, new_n, m)) for m in (lo, hi))
    return 1.0 if best <= math.log(2.0) else 2.0 * math.exp(-best)


def _mean(values: NDArray[np.float64], counts: NDArray[np.float64]) -> float | None:
    total = float(np.sum(counts))
    return float(np.dot(values, counts)) / total if total > 0 else None
