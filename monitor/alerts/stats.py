"""Pure statistical tests used to decide whether a change is real. One-sided: `greater` asks "is the
first sample's value above the second's (or above the reference)?", `less` the opposite."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from types import ModuleType
from typing import Literal

Alternative = Literal["greater", "less"]


@cache
def _st() -> ModuleType:
    # scipy loads on the first test, not on import: rules (and so every command's settings) import this
    # package, and scipy.stats alone takes about half a second to import.
    from scipy import stats

    return stats


def _finite(x: float) -> bool:
    return x is not None and math.isfinite(x)


def welch_t_test(
    mean1: float, var1: float, n1: float, mean2: float, var2: float, n2: float, alternative: Alternative
) -> float:
    """One-sided Welch's t-test p-value for mean1 vs mean2 from summary statistics (1.0 when undefined). The sizes
    may be effective sample sizes (weighted samples), so they need not be whole numbers."""
    if n1 < 2 or n2 < 2 or not all(_finite(v) for v in (mean1, var1, mean2, var2)):
        return 1.0
    se2 = var1 / n1 + var2 / n2
    if se2 <= 0:
        # Both samples constant: any difference is certain, none is no evidence.
        diff = mean1 - mean2
        return 0.0 if (diff > 0 if alternative == "greater" else diff < 0) else 1.0
    t = (mean1 - mean2) / math.sqrt(se2)
    df = se2**2 / ((var1 / n1) ** 2 / (n1 - 1) + (var2 / n2) ** 2 / (n2 - 1)) if var1 > 0 or var2 > 0 else n1 + n2 - 2
    return float(_st().t.sf(t, df) if alternative == "greater" else _st().t.cdf(t, df))


def one_sample_t_test(mean: float, var: float, n: float, mu0: float, alternative: Alternative) -> float:
    """One-sided one-sample t-test p-value of mean vs a fixed reference mu0 (1.0 when undefined); n may be effective."""
    if n < 2 or not _finite(mean) or not _finite(var):
        return 1.0
    if var <= 0:
        return 0.0 if (mean > mu0 if alternative == "greater" else mean < mu0) else 1.0
    t = (mean - mu0) / math.sqrt(var / n)
    return float(_st().t.sf(t, n - 1) if alternative == "greater" else _st().t.cdf(t, n - 1))


def two_proportion_z_test(x1: float, n1: float, x2: float, n2: float, alternative: Alternative) -> float:
    """One-sided pooled two-proportion z-test p-value for x1/n1 vs x2/n2 (1.0 when undefined); counts may be
    effective (a weighted share times its effective sample size)."""
    if n1 <= 0 or n2 <= 0:
        return 1.0
    x1, x2 = min(max(x1, 0), n1), min(max(x2, 0), n2)
    p1, p2 = x1 / n1, x2 / n2
    pooled = (x1 + x2) / (n1 + n2)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    if se == 0:
        return 1.0  # both all-0 or all-1: no difference
    z = (p1 - p2) / se
    return float(_st().norm.sf(z) if alternative == "greater" else _st().norm.cdf(z))


def one_proportion_score_test(x: float, n: float, p0: float, alternative: Alternative) -> float:
    """One-sided score test of x/n vs p0: rejects exactly when the Wilson interval excludes p0 (x, n may be
    effective)."""
    if n <= 0:
        return 1.0
    x = min(max(x, 0), n)
    if p0 <= 0.0:
        return 0.0 if (alternative == "greater" and x > 0) else 1.0
    if p0 >= 1.0:
        return 0.0 if (alternative == "less" and x < n) else 1.0
    z = (x / n - p0) / math.sqrt(p0 * (1 - p0) / n)
    return float(_st().norm.sf(z) if alternative == "greater" else _st().norm.cdf(z))


def poisson_rate_test(count1: int, exposure1: float, count2: int, exposure2: float, alternative: Alternative) -> float:
    """One-sided exact test of two Poisson rates (count per exposure), conditional on the total (binomial)."""
    if exposure1 <= 0 or exposure2 <= 0:
        return 1.0
    total = count1 + count2
    if total == 0:
        return 1.0
    share = exposure1 / (exposure1 + exposure2)  # expected share of the total in sample 1 under equal rates
    if alternative == "greater":
        return float(_st().binom.sf(count1 - 1, total, share))
    return float(_st().binom.cdf(count1, total, share))


def poisson_test(count: int, expected: float, alternative: Alternative) -> float:
    """One-sided exact p-value of observing `count` when `expected` events are due (Poisson)."""
    if expected <= 0:
        return 0.0 if (alternative == "greater" and count > 0) else 1.0
    if alternative == "greater":
        return float(_st().poisson.sf(count - 1, expected))
    return float(_st().poisson.cdf(count, expected))


def paired_spearman(pairs: Sequence[float]) -> float | None:
    """Spearman ρ of interleaved pairs `[x0, y0, x1, y1, ...]` (average ranks for ties, as scipy); None below 2
    pairs or when either side is constant. Interleaved: the per-step query and the backtest's history both keep a
    window's pairs as one flat array, and both call this, so they give the same ρ."""
    n = len(pairs) // 2
    if n < 2:
        return None
    xs, ys = pairs[0::2], pairs[1::2]
    if min(xs) == max(xs) or min(ys) == max(ys):
        return None
    rho = float(_st().spearmanr(xs, ys).statistic)
    return rho if math.isfinite(rho) else None
