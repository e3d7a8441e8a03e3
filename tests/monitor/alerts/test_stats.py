"""The statistical tests against direct computations on raw samples and known values."""

from __future__ import annotations

import math
import random
import statistics

import pytest
from scipy import stats as st

from monitor.alerts import stats


def test_welch_from_summaries_matches_the_test_on_raw_samples() -> None:
    """Welch's t-test from summary statistics equals scipy's on the raw samples, in both directions."""
    rng = random.Random(3)
    a = [rng.gauss(0.70, 0.15) for _ in range(80)]
    b = [rng.gauss(0.75, 0.10) for _ in range(300)]
    summaries = (statistics.mean(a), statistics.variance(a), len(a), statistics.mean(b), statistics.variance(b), len(b))
    p = stats.welch_t_test(*summaries, "less")
    expected = st.ttest_ind(a, b, equal_var=False, alternative="less").pvalue
    assert p == pytest.approx(expected, rel=1e-9)
    assert p < 0.01
    assert stats.welch_t_test(*summaries, "greater") > 0.99


def test_welch_degenerate_inputs_are_not_evidence() -> None:
    """Too few samples or NaN give p = 1; constant samples give 0 or 1 by the sign of the difference."""
    assert stats.welch_t_test(0.5, 0.01, 1, 0.9, 0.01, 100, "less") == 1.0
    assert stats.welch_t_test(0.5, float("nan"), 10, 0.9, 0.01, 100, "less") == 1.0
    assert stats.welch_t_test(0.5, 0.0, 10, 0.9, 0.0, 10, "less") == 0.0  # constant samples, clearly lower
    assert stats.welch_t_test(0.9, 0.0, 10, 0.9, 0.0, 10, "less") == 1.0


def test_two_proportion_z_known_value() -> None:
    """The two-proportion z-test matches a hand computation, and is 1.0 when undefined."""
    # 30/100 vs 15/100: pooled p = 0.225, se = sqrt(.225*.775*.02) = 0.05906, z = 2.540
    p = stats.two_proportion_z_test(30, 100, 15, 100, "greater")
    assert p == pytest.approx(st.norm.sf(0.15 / math.sqrt(0.225 * 0.775 * 0.02)), rel=1e-9)
    assert p == pytest.approx(0.00554, abs=1e-4)
    assert stats.two_proportion_z_test(0, 100, 0, 100, "greater") == 1.0
    assert stats.two_proportion_z_test(5, 0, 1, 10, "greater") == 1.0


def wilson_interval(x: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Two-sided Wilson score interval for the proportion x/n ((0, 1) when n is 0)."""
    if n <= 0:
        return (0.0, 1.0)
    z = float(st.norm.ppf(0.5 + confidence / 2))
    p = min(max(x, 0), n) / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def test_score_test_agrees_with_the_wilson_interval() -> None:
    """The score test rejects a proportion at 5% exactly when it lies outside the Wilson interval."""
    x, n = 12, 100
    lo, hi = wilson_interval(x, n, 0.95)
    assert (lo, hi) == pytest.approx((0.0700, 0.1981), abs=1e-4)  # the Wilson interval of 12/100
    # The two-sided score test at 5% rejects p0 exactly when p0 lies outside the Wilson interval.
    for p0 in (lo - 1e-3, hi + 1e-3):
        assert (
            2
            * min(
                stats.one_proportion_score_test(x, n, p0, "greater"), stats.one_proportion_score_test(x, n, p0, "less")
            )
            < 0.05
        )
    for p0 in (lo + 1e-3, hi - 1e-3):
        assert (
            2
            * min(
                stats.one_proportion_score_test(x, n, p0, "greater"), stats.one_proportion_score_test(x, n, p0, "less")
            )
            > 0.05
        )


def test_poisson_rate_and_count_tests() -> None:
    """The Poisson tests match their closed forms: silence against a steady rate is near impossible, the same rate is
    not."""
    # Zero events in 30 min where 24 h had 2880 (2/min): P = (1 - 30/1470)^2880, vanishingly small.
    p = stats.poisson_rate_test(0, 1800, 2880, 86400, "less")
    assert p == pytest.approx((86400 / 88200) ** 2880, rel=1e-6)
    assert p < 1e-20
    assert stats.poisson_rate_test(60, 1800, 2880, 86400, "less") > 0.3  # the same rate
    assert stats.poisson_rate_test(0, 1800, 0, 86400, "less") == 1.0
    assert stats.poisson_test(0, 20.0, "less") == pytest.approx(math.exp(-20), rel=1e-9)
    assert stats.poisson_test(50, 20.0, "greater") < 1e-6


def test_one_sample_t() -> None:
    """The one-sample t-test from summary statistics equals scipy's on the raw sample."""
    rng = random.Random(5)
    a = [rng.gauss(0.45, 0.1) for _ in range(60)]
    p = stats.one_sample_t_test(statistics.mean(a), statistics.variance(a), len(a), 0.5, "less")
    assert p == pytest.approx(st.ttest_1samp(a, 0.5, alternative="less").pvalue, rel=1e-9)
