"""bench/optimal_cusum.py, the benchmark's reference: its threshold gives the ARL0 it states (checked against brute
simulation at short ARL0s), and its delays behave as the optimal detector's must."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from bench import optimal_cusum as oc
from bench.alert_quality import BASE, CANARY_BAD, moved

FloatArray = oc.FloatArray


def _run_lengths(pre: FloatArray, post: FloatArray, h: float, runs: int, rng: np.random.Generator) -> FloatArray:
    """Brute force: events until the CUSUM of log(post / pre) reaches h, scores drawn from `pre`, from 0."""
    z = oc.llr(pre, post)
    lengths, stat, done = np.zeros(runs), np.zeros(runs), np.zeros(runs)
    alive = np.arange(runs)
    while len(alive):
        sums = np.cumsum(z[oc._draw(pre, rng.random((len(alive), 256)))], axis=1)
        s = sums - np.minimum(-stat[alive, None], np.minimum.accumulate(sums, axis=1))
        hit = s >= h
        found = hit.any(axis=1)
        lengths[alive[found]] = done[alive[found]] + hit.argmax(axis=1)[found] + 1
        stat[alive], done[alive] = s[:, -1], done[alive] + 256
        alive = alive[~found]
    return lengths


@pytest.mark.parametrize(
    ("pre", "post"),
    [
        (np.array([0.8, 0.2]), np.array([0.6, 0.4])),  # Bernoulli: the LLR's sums sit on a coarse lattice
        (BASE, moved(BASE, 0.12)),  # the rubric's five levels, a modest release
    ],
    ids=["bernoulli", "five-levels"],
)
def test_the_threshold_gives_the_arl0_it_states_by_brute_simulation(pre: FloatArray, post: FloatArray) -> None:
    """At a short target (500 events), the mean run length of 20,000 brute-force runs at the h found agrees with
    the ARL0 the renewal and importance-sampling estimate states for it (within 4 combined standard errors); it is
    at least the target, and just below h (where the step function of discrete scores drops) it is below it: h is
    the smallest threshold that keeps the budget."""
    rng = np.random.default_rng(11)
    target = 500.0
    t = oc.threshold_for(pre, post, target, rng)
    runs = _run_lengths(pre, post, t.h, 20_000, rng)
    brute, brute_se = runs.mean(), runs.std() / np.sqrt(len(runs))
    combined = np.hypot(brute_se, t.arl_rel_se * t.arl_events)
    assert abs(brute - t.arl_events) < 4 * combined, (brute, t)
    assert brute > target - 4 * combined
    below = _run_lengths(pre, post, t.h - 0.02, 20_000, rng).mean()
    assert below < target + 4 * combined, (below, t)


def test_the_delay_falls_as_the_change_grows() -> None:
    """Against the same baseline and ARL0, the optimal detector's mean delay (events and minutes on the grid) is
    shorter for a drop of 0.3 than of 0.2, and for 0.2 than of 0.1."""
    rng = np.random.default_rng(5)
    arrivals = oc.Arrivals(2.0)
    means = []
    for drop in (0.1, 0.2, 0.3):
        post = moved(BASE, drop)
        t = oc.threshold_for(BASE, post, 20_000.0, rng)
        d = oc.delays(BASE, post, t.h, arrivals, rng, paths=2000)
        means.append((d.events.mean(), d.mean_min, d.se_min))
    for (events_a, min_a, se_a), (events_b, min_b, se_b) in itertools.pairwise(means):
        assert events_b < events_a
        assert min_b + 3 * np.hypot(se_a, se_b) < min_a, means


def test_a_cusum_tuned_to_the_wrong_change_is_slower_than_the_optimal() -> None:
    """A canary that answers almost nothing well: the CUSUM tuned to a modest move of answers to 0.25, calibrated to
    the same ARL0, takes longer than the one that knows the canary's histogram."""
    rng = np.random.default_rng(3)
    arl, arrivals = 50_000.0, oc.Arrivals(0.32)
    best = oc.threshold_for(BASE, CANARY_BAD, arl, rng)
    wrong_design = moved(BASE, 0.12)
    wrong = oc.threshold_for(BASE, wrong_design, arl, rng)
    fast = oc.delays(BASE, CANARY_BAD, best.h, arrivals, rng, paths=2000)
    slow = oc.delays(BASE, CANARY_BAD, wrong.h, arrivals, rng, design=wrong_design, paths=2000)
    assert slow.events.mean() > 1.3 * fast.events.mean(), (slow.events.mean(), fast.events.mean())
    assert slow.mean_min > fast.mean_min + 3 * np.hypot(slow.se_min, fast.se_min)


def test_detection_counts_at_the_first_round_at_or_after_the_crossing() -> None:
    """A crossing 0.2 min after the change is seen at the 5-minute round; one at 5.0 at that round; with rounds 2
    minutes off the change, at 2 and 7."""
    got = oc.on_grid(np.array([0.2, 5.0, 5.1]), 5.0)
    assert got.tolist() == [5.0, 5.0, 10.0]
    assert oc.on_grid(np.array([0.2, 2.5]), 5.0, 2.0).tolist() == [2.0, 7.0]


def test_a_diurnal_swing_moves_the_arrivals_not_their_daily_count() -> None:
    """The swing's cumulative arrivals over a whole day equal the flat rate's, and at its peak arrive faster."""
    a = oc.Arrivals(2.0, diurnal=0.6, at_min=360.0)  # the change at the swing's peak (6 h)
    assert a.cumulative(np.array([oc.DAY_MIN]))[0] == pytest.approx(2.0 * oc.DAY_MIN)
    assert a.cumulative(np.array([10.0]))[0] > 2.0 * 10.0 * 1.5


def test_a_value_the_baseline_never_gives_is_refused() -> None:
    """The log-likelihood ratio of a value with no baseline probability is infinite: a clear error, not a number."""
    with pytest.raises(ValueError, match="never gives"):
        oc.llr(np.array([1.0, 0.0]), np.array([0.5, 0.5]))
