"""The rollout rules' betting test, checked by simulation: under no change its e-value stays below 1/alpha in all
but alpha of long, continuously watched streams whatever the shape of the scores, the old version's lower bound
holds at every sample size, a canary at 0.09 against 0.74 pages after a handful of events, and a version that keeps
its mean but spreads its scores pages on nothing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.typing import NDArray

from monitor.alerts.betting import log_e_above, log_e_below, p_below
from monitor.alerts.evaluator import decide
from monitor.alerts.observations import observe, score_histogram
from monitor.alerts.rules import load_rules
from monitor.alerts.sequential import BIN_VALUES
from monitor.alerts.windows import SegmentData, WeightedSums, WindowStats

ROLLOUT = next(r for r in load_rules().rules if r.name == "prompt_rollout_regression")
VERSION = (("app", "a"), ("prompt_version", "v2"), ("judge_id", "j"))
RUBRIC_BINS = [0, 5, 10, 15, 20]  # the rubric's 0, 0.25, 0.5, 0.75 and 1 among the 21 bins
SHAPES = {
    "rubric, long left tail": [0.03, 0.05, 0.10, 0.27, 0.55],
    "nearly all perfect, now and then a zero": [0.03, 0.0, 0.0, 0.0, 0.97],
    "mostly low": [0.5, 0.2, 0.1, 0.1, 0.1],
    "all ones": [0.0, 0.0, 0.0, 0.0, 1.0],
}
OLD_074 = [0.10, 0.05, 0.10, 0.28, 0.47]  # mean 0.7425
CANARY_009 = [0.88, 0.0, 0.0, 0.04, 0.06]  # mean 0.09: mostly zeros


def _probs(mix: list[float]) -> NDArray[np.float64]:
    p = np.zeros(len(BIN_VALUES))
    p[RUBRIC_BINS] = mix
    out: NDArray[np.float64] = p / p.sum()
    return out


def _checks(n: int) -> list[int]:
    """After every event for the first 100, then every 5 events: how often a round looks."""
    return [*range(1, min(n, 100) + 1), *range(105, n + 1, 5)]


def _sums(counts: NDArray[np.float64]) -> WeightedSums:
    """A window of `counts` events per bin, each of weight 1."""
    n = float(counts.sum())
    return WeightedSums(
        n, n, float(counts @ BIN_VALUES), float(counts @ BIN_VALUES**2), 0.0, tuple(float(c) for c in counts)
    )


def _window(counts: NDArray[np.float64]) -> WindowStats:
    n = int(counts.sum())
    return WindowStats(86400.0, rows=n, ok=n, weighted=_sums(counts))


@pytest.mark.long(seconds=40)
@pytest.mark.parametrize("shape", SHAPES)
def test_the_e_values_stay_below_one_over_alpha_under_no_change_however_often_they_are_looked_at(shape: str) -> None:
    """Scores drawn from a histogram, 1,000 events looked at after every event for the first 100 and every 5 after:
    the e-value against "the mean is at least its true value" (the new version's side) and the one against "at most"
    (the old version's lower bound) each ever reach 1/alpha = 20 in at most alpha = 5 % of 400 streams (within Monte
    Carlo error), where a fixed-sample t-test looked at as often crosses in many more."""
    rng = np.random.default_rng(42)
    probs, alpha, runs, n = _probs(SHAPES[shape]), 0.05, 400, 1000
    mean = float(probs @ BIN_VALUES)
    below = above = naive = 0
    for _ in range(runs):
        draws = rng.choice(len(BIN_VALUES), size=n, p=probs)
        counts = np.cumsum(np.eye(len(BIN_VALUES))[draws], axis=0)
        below += any(log_e_below(BIN_VALUES, counts[k - 1], mean) >= math.log(1 / alpha) for k in _checks(n))
        above += any(log_e_above(BIN_VALUES, counts[k - 1], mean) >= math.log(1 / alpha) for k in _checks(n))
        x = BIN_VALUES[draws]
        ks = np.arange(2, n + 1)
        m = np.cumsum(x)[1:] / ks
        sd = np.sqrt(np.maximum(np.cumsum(x**2)[1:] / ks - m**2, 0) * ks / (ks - 1))
        naive += bool(np.any((mean - m) * np.sqrt(ks) > 1.645 * np.maximum(sd, 1e-12)))
    error = 2 * math.sqrt(alpha * (1 - alpha) / runs)
    assert below / runs <= alpha + error and above / runs <= alpha + error, (below, above)
    if shape != "all ones":  # scores that never vary give a t-test nothing to cross on
        assert naive / runs > 0.1


@pytest.mark.long(seconds=95)
def test_the_whole_rollout_test_stays_valid_with_the_old_version_estimated() -> None:
    """Both versions drawn from the same skewed histogram, the old one with 200 events: the rollout p-value
    (`p_below`: the two bets where they meet), looked at after every event for 30 and every 20 after over 1,000 new
    events, is ever below alpha = 0.1 in at most 10 % of 200 rollouts (within Monte Carlo error)."""
    rng = np.random.default_rng(3)
    probs, alpha, runs, n = _probs(SHAPES["rubric, long left tail"]), 0.1, 200, 1000
    looks = [*range(1, 31), *range(40, n + 1, 20)]
    paged = 0
    for _ in range(runs):
        old = np.bincount(rng.choice(len(BIN_VALUES), size=200, p=probs), minlength=len(BIN_VALUES)).astype(float)
        new = np.cumsum(np.eye(len(BIN_VALUES))[rng.choice(len(BIN_VALUES), size=n, p=probs)], axis=0)
        paged += any(p_below(BIN_VALUES, new[k - 1], BIN_VALUES, old) < alpha for k in looks)
    assert paged / runs <= alpha + 2 * math.sqrt(alpha * (1 - alpha) / runs), paged


def _events_to_page(new_probs: NDArray[np.float64], old: NDArray[np.float64], rng: np.random.Generator) -> int:
    """Events of the new version after which the rollout rule's p-value first falls below its alpha (0.001),
    looked at after every event, through `observe` as a round reads it."""
    counts = np.zeros(len(BIN_VALUES))
    for k, b in enumerate(rng.choice(len(BIN_VALUES), size=200, p=new_probs), start=1):
        counts[b] += 1
        p = observe(ROLLOUT, VERSION, SegmentData(_window(counts), _window(old))).p_change
        if p is not None and p < ROLLOUT.alpha:
            return k
    return 10**6


def test_a_canary_at_0_09_against_0_74_pages_after_a_handful_of_events() -> None:
    """A canary scoring 0.09 (mostly zeros) against an old version at 0.74 with 4,000 events in the window: the
    rollout rule's p-value is below 0.001 after a median of 9 events in 200 canaries (the normal-mixture SPRT it
    replaced needed 19), at most 25; a canary of zeros only pages at its 8th (6 if it knew both histograms)."""
    rng = np.random.default_rng(9)
    old = _probs(OLD_074) * 4000
    delays = [_events_to_page(_probs(CANARY_009), old, rng) for _ in range(200)]
    assert np.median(delays) <= 10 and max(delays) <= 25, (np.median(delays), max(delays))
    zeros = _probs([1.0, 0.0, 0.0, 0.0, 0.0])
    assert _events_to_page(zeros, old, rng) == 8


@pytest.mark.long(seconds=65)
def test_a_version_that_keeps_its_mean_but_spreads_its_scores_pages_on_nothing() -> None:
    """The old version mostly at 0.75, the new one with the same mean 0.75 but more 0.5s and 1.0s: looked at after
    every event (every 5th after 30) for 200 events, the rollout rule at alpha = 0.05 fires (observed drop of 10 %
    and p < alpha, `evaluator.decide`) in at most 5 % of 200 rollouts (within Monte Carlo error), though the observed
    drop alone reaches 10 % early in many of them."""
    rng = np.random.default_rng(11)
    rule = ROLLOUT.model_copy(update={"alpha": 0.05})
    old = _probs([0.0, 0.0, 0.1, 0.8, 0.1]) * 400
    new_probs = _probs([0.0, 0.0, 0.3, 0.4, 0.3])
    assert float(new_probs @ BIN_VALUES) == pytest.approx(float(old @ BIN_VALUES) / 400)
    runs, fired, dropped = 200, 0, 0
    looks = [*range(3, 31), *range(35, 201, 5)]
    for _ in range(runs):
        new = np.cumsum(np.eye(len(BIN_VALUES))[rng.choice(len(BIN_VALUES), size=200, p=new_probs)], axis=0)
        verdicts = [decide(rule, observe(rule, VERSION, SegmentData(_window(new[k - 1]), _window(old)))) for k in looks]
        fired += any(v.fire for v in verdicts)
        dropped += any("changed by" in v.reason for v in verdicts)
    assert fired / runs <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / runs), fired
    assert dropped / runs > 0.3


def test_without_bins_the_mean_alone_gives_less_evidence_than_the_histogram() -> None:
    """A window summed without bins is read as 0s and 1s with its mean: for every bet its capital is at most the
    histogram's, so the test stays valid on it, and a clear drop still pages."""
    rng = np.random.default_rng(5)
    for _ in range(50):
        counts = rng.integers(0, 20, len(BIN_VALUES)).astype(float)
        full = _sums(counts)
        bare = WeightedSums(full.weight, full.weight_sq, full.score, full.score_sq, 0.0)
        v, c = score_histogram(bare)
        assert c.sum() == pytest.approx(counts.sum()) and float(v @ c) == pytest.approx(float(BIN_VALUES @ counts))
        for mu0 in (0.2, 0.5, 0.8):
            assert log_e_below(v, c, mu0) <= log_e_below(BIN_VALUES, counts, mu0) + 1e-9
            assert log_e_above(v, c, mu0) <= log_e_above(BIN_VALUES, counts, mu0) + 1e-9
    ends = np.array([0.0, 1.0])
    assert p_below(ends, np.array([20.0, 0.0]), ends, np.array([0.0, 500.0])) < 1e-6


def test_weighted_bins_count_as_the_effective_sample_size() -> None:
    """Rows sampled at 10 % weigh 10 each: their bins sum to 10 times the rows, and the test counts the rows."""
    counts = _probs(OLD_074) * 40
    w = _sums(counts)
    heavy = WeightedSums(w.weight * 10, w.weight_sq * 100, w.score * 10, w.score_sq * 10, 0.0, tuple(10 * counts))
    _, c = score_histogram(heavy)
    assert c == pytest.approx(counts)


def test_the_old_versions_own_uncertainty_holds_the_page_back() -> None:
    """The same ten events of a canary (8 zeros) against an old version at 0.74: the p-value is smaller the more
    events the old version has (its lower bound is closer to its mean), and 1 against an old version without
    events or when the canary scores higher."""
    new = _probs([0.8, 0.0, 0.0, 0.1, 0.1]) * 10
    old = _probs(OLD_074)
    ps = [p_below(BIN_VALUES, new, BIN_VALUES, old * n) for n in (20, 50, 200, 1000, 4000)]
    assert ps == sorted(ps, reverse=True) and ps[0] > 0.1 and ps[-1] < 0.005, ps
    assert p_below(BIN_VALUES, new, BIN_VALUES, old * 0) == 1.0
    assert p_below(BIN_VALUES, old * 10, BIN_VALUES, new * 100) == 1.0


def _p_from_the_public_bets(
    values: NDArray[np.float64], counts: NDArray[np.float64], ref_values: NDArray[np.float64], ref: NDArray[np.float64]
) -> float:
    """`p_below` as its docstring states it, from `log_e_above` and `log_e_below` alone: bisect where the two bets
    meet, then take the larger of min(e_ref, e_new) at the two ends."""
    ref_mean, new_total = float(ref_values @ ref) / ref.sum() if ref.sum() > 0 else None, counts.sum()
    if ref_mean is None or new_total <= 0:
        return 1.0
    lo, hi = 0.0, ref_mean
    for _ in range(20):
        mid = (lo + hi) / 2
        if log_e_above(ref_values, ref, mid) >= log_e_below(values, counts, mid):
            lo = mid
        else:
            hi = mid
    best = max(min(log_e_above(ref_values, ref, m), log_e_below(values, counts, m)) for m in (lo, hi))
    return 1.0 if best <= math.log(2.0) else 2.0 * math.exp(-best)


def test_the_p_value_is_exactly_the_two_public_bets_where_they_meet() -> None:
    """`p_below` (which filters each side once and keeps the ends' values from the bisection) gives bit for bit the
    p-value computed from `log_e_above` and `log_e_below` at every step, on random histograms and the edges: a side
    with no events, a reference that always scored 1 or 0, a new version at 0 or 1."""
    rng = np.random.default_rng(46)
    k = len(BIN_VALUES)
    cases = [
        (rng.integers(0, 30, k) * (rng.random(k) < 0.5), rng.integers(0, 300, k) * (rng.random(k) < 0.7))
        for _ in range(150)
    ]
    ones, zeros, nothing = np.eye(k)[-1] * 50, np.eye(k)[0] * 50, np.zeros(k)
    cases += [(ones, zeros), (zeros, ones), (zeros, zeros), (ones, ones), (nothing, ones), (ones, nothing)]
    for new, old in cases:
        new, old = new.astype(np.float64), old.astype(np.float64)
        assert p_below(BIN_VALUES, new, BIN_VALUES, old) == _p_from_the_public_bets(BIN_VALUES, new, BIN_VALUES, old)
