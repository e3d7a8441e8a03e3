"""The judge-against-user statistics: the AUC of the score for telling liked from disliked answers (Mann-Whitney,
ties half) with its DeLong / Hanley-McNeil interval, and Spearman's ρ against ratings with a Fisher-z interval,
checked against brute force, scipy and hand-computed values."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from monitor.feedback.agreement import auc_of, midranks, spearman_of

# Small integer grids give many ties, the case the formulas most often get wrong.
scores = st.lists(st.integers(0, 8).map(lambda k: k / 8), min_size=1, max_size=30)
Z95 = NormalDist().inv_cdf(0.975)


def brute_auc(disliked: list[float], liked: list[float]) -> float:
    """The share of liked × disliked pairs the liked answer wins, ties half, pair by pair."""
    wins = sum(1.0 if p > q else 0.5 if p == q else 0.0 for p in liked for q in disliked)
    return wins / (len(liked) * len(disliked))


def brute_delong_variance(disliked: list[float], liked: list[float]) -> float:
    """DeLong's variance of the AUC from its structural components, computed pair by pair."""

    def psi(p: float, q: float) -> float:
        return 1.0 if p > q else 0.5 if p == q else 0.0

    v10 = [sum(psi(p, q) for q in disliked) / len(disliked) for p in liked]
    v01 = [sum(psi(p, q) for p in liked) / len(liked) for q in disliked]
    return float(np.var(v10, ddof=1)) / len(liked) + float(np.var(v01, ddof=1)) / len(disliked)


@given(scores, scores)
def test_auc_is_the_brute_force_pair_count(disliked: list[float], liked: list[float]) -> None:
    """The AUC equals the share of liked × disliked pairs the liked answer wins, ties counted half, and its counts
    are the classes' sizes."""
    figure = auc_of(disliked, liked)
    assert figure.auc == pytest.approx(brute_auc(disliked, liked), abs=1e-12)
    assert (figure.disliked, figure.liked) == (len(disliked), len(liked))


@given(scores, scores)
def test_auc_of_reversed_labels_is_one_minus_the_auc(disliked: list[float], liked: list[float]) -> None:
    """Swapping which answers were liked turns the AUC into 1 - AUC, and mirrors its interval."""
    forward = auc_of(disliked, liked)
    backward = auc_of(liked, disliked)
    assert forward.auc is not None and backward.auc is not None
    assert backward.auc == pytest.approx(1.0 - forward.auc, abs=1e-12)
    assert forward.low is not None and backward.high is not None
    assert backward.high == pytest.approx(1.0 - forward.low, abs=1e-9)


@given(scores, scores)
def test_auc_ignores_monotone_transforms_of_the_score(disliked: list[float], liked: list[float]) -> None:
    """Only the order of scores matters: a strictly increasing transform keeps the AUC and its interval."""

    def bend(xs: list[float]) -> list[float]:
        return [x**3 + 2 * x - 5 for x in xs]

    plain = auc_of(disliked, liked)
    bent = auc_of(bend(disliked), bend(liked))
    assert bent.auc == pytest.approx(plain.auc, abs=1e-12)
    assert bent.low == pytest.approx(plain.low, abs=1e-9)
    assert bent.high == pytest.approx(plain.high, abs=1e-9)


@given(st.lists(st.integers(0, 8).map(lambda k: k / 8), min_size=2, max_size=30),
       st.lists(st.integers(0, 8).map(lambda k: k / 8), min_size=2, max_size=30))  # fmt: skip
def test_auc_interval_is_delong_around_the_auc_inside_zero_one(disliked: list[float], liked: list[float]) -> None:
    """With two or more answers per class the half-width is z·√(DeLong variance), clipped to [0, 1]."""
    figure = auc_of(disliked, liked)
    assert figure.auc is not None and figure.low is not None and figure.high is not None
    se = math.sqrt(brute_delong_variance(disliked, liked))
    assert figure.low == pytest.approx(max(0.0, figure.auc - Z95 * se), abs=1e-9)
    assert figure.high == pytest.approx(min(1.0, figure.auc + Z95 * se), abs=1e-9)
    assert 0.0 <= figure.low <= figure.auc <= figure.high <= 1.0


def test_auc_with_one_disliked_answer_uses_hanley_mcneil() -> None:
    """One disliked answer scoring 0.3 against liked 0.1, 0.5, 0.9: A = 2/3; Hanley-McNeil's variance
    (A(1-A) + (n_liked-1)(Q1-A²)) / 3 with Q1 = A/(2-A), since the disliked class adds no term."""
    figure = auc_of([0.3], [0.1, 0.5, 0.9])
    a = 2 / 3
    q1 = a / (2 - a)
    se = math.sqrt((a * (1 - a) + 2 * (q1 - a * a)) / 3)
    assert figure.auc == pytest.approx(a)
    assert figure.low == pytest.approx(a - Z95 * se)
    assert figure.high == pytest.approx(min(1.0, a + Z95 * se))


def test_auc_is_none_when_a_class_is_empty_and_keeps_the_counts() -> None:
    """No liked (or no disliked) answers: no AUC and no interval, but the counts say why."""
    assert auc_of([0.1, 0.2], []) == auc_of([0.1, 0.2], [])
    figure = auc_of([0.1, 0.2], [])
    assert (figure.auc, figure.low, figure.high, figure.disliked, figure.liked) == (None, None, None, 2, 0)
    assert auc_of([], [0.4]).liked == 1 and auc_of([], [0.4]).auc is None


def test_a_wider_level_gives_a_wider_interval_and_bad_levels_are_refused() -> None:
    """The 99 % interval contains the 90 % one; a level outside (0, 1) is a clear error."""
    disliked, liked = [0.1, 0.4, 0.5, 0.6, 0.8], [0.3, 0.6, 0.2, 0.9, 0.7]
    wide, narrow = auc_of(disliked, liked, 0.99), auc_of(disliked, liked, 0.90)
    assert wide.low is not None and narrow.low is not None and wide.high is not None and narrow.high is not None
    assert wide.low < narrow.low and narrow.high < wide.high
    with pytest.raises(ValueError, match="confidence level"):
        auc_of(disliked, liked, 1.0)
    with pytest.raises(ValueError, match="finite"):
        auc_of([math.nan], liked)


pairs = st.lists(st.tuples(st.integers(0, 10).map(lambda k: k / 10), st.integers(1, 5)), min_size=4, max_size=40)


@settings(max_examples=200)
@given(pairs)
def test_spearman_matches_scipy(data: list[tuple[float, int]]) -> None:
    """ρ (average ranks for ties) equals scipy's spearmanr; undefined exactly when a side does not vary."""
    xs, ys = [x for x, _ in data], [float(y) for _, y in data]
    figure = spearman_of(xs, ys)
    assert figure.n == len(data)
    if len(set(xs)) == 1 or len(set(ys)) == 1:
        assert figure.rho is None and figure.low is None
        return
    expected = float(stats.spearmanr(xs, ys).statistic)
    assert figure.rho == pytest.approx(expected, abs=1e-9)
    assert figure.rho is not None and figure.low is not None and figure.high is not None
    assert -1.0 <= figure.low <= figure.rho <= figure.high <= 1.0


@given(st.lists(st.floats(-5, 5, allow_nan=False), min_size=1, max_size=30))
def test_midranks_match_brute_force_ranks(values: list[float]) -> None:
    """A value's rank is 1 + the values below it + half of the others equal to it."""
    expected = [1 + sum(w < v for w in values) + (sum(w == v for w in values) - 1) / 2 for v in values]
    assert list(midranks(np.asarray(values))) == pytest.approx(expected)


def test_spearman_interval_is_fisher_z_with_fieller_error() -> None:
    """Scores 0.1..0.6 against ratings 1, 3, 2, 4, 5, 5 (a tie): ρ by hand from the ranks, and the interval
    tanh(atanh ρ ± 1.96·1.06/√3)."""
    scores = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    ratings = [1, 3, 2, 4, 5, 5]
    rx = np.array([1, 2, 3, 4, 5, 6]) - 3.5
    ry = np.array([1, 3, 2, 4, 5.5, 5.5]) - 3.5
    rho = float(rx @ ry / math.sqrt((rx @ rx) * (ry @ ry)))
    figure = spearman_of(scores, ratings)
    half = Z95 * 1.06 / math.sqrt(3)
    assert figure.rho == pytest.approx(rho)
    assert figure.low == pytest.approx(math.tanh(math.atanh(rho) - half))
    assert figure.high == pytest.approx(math.tanh(math.atanh(rho) + half))


def test_spearman_needs_four_pairs_and_equal_lengths() -> None:
    """Three pairs define no Fisher-z interval: ρ is None with its count; a perfect order has a point interval;
    unequal lengths are an error."""
    assert spearman_of([0.1, 0.2, 0.3], [1, 2, 3]) == spearman_of([0.1, 0.2, 0.3], [1, 2, 3])
    assert spearman_of([0.1, 0.2, 0.3], [1, 2, 3]).rho is None
    assert spearman_of([0.1, 0.2, 0.3], [1, 2, 3]).n == 3
    perfect = spearman_of([0.1, 0.2, 0.3, 0.4], [1, 2, 3, 5])
    assert (perfect.rho, perfect.low, perfect.high) == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="3 scores but 4 ratings"):
        spearman_of([0.1, 0.2, 0.3], [1, 2, 3, 4])
