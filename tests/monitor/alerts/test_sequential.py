"""The sequential detector's maths, checked by simulation: the calibrated threshold keeps its false-alarm rate on
discrete, skewed judge scores where a Gaussian threshold does not, the batched statistic is the event-by-event one,
the rollout test stays valid under continuous looking, and silence is judged by the traffic beside a segment."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.typing import NDArray

from monitor.alerts.observations import observe
from monitor.alerts.rules import load_rules
from monitor.alerts.sequential import (
    _THETAS,
    BIN_VALUES,
    Buckets,
    Reference,
    _theta,
    adjustment_coefficient,
    calibrate_mean,
    cusum,
    distribution,
    recovery,
    regressed,
    stopped_alone,
    stopped_beside,
    threshold_for,
)
from monitor.alerts.windows import SegmentData, WeightedSums, WindowStats

LEVELS = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
RUBRIC = np.array([0.03, 0.05, 0.10, 0.27, 0.55])  # mostly good answers with a long left tail
RARE_ZEROS = np.array([0.03, 0.0, 0.0, 0.0, 0.97])  # nearly all perfect, now and then a zero: very skewed
CASES = [(RUBRIC, 1e9), (RUBRIC, 100), (RARE_ZEROS, 1e9), (RARE_ZEROS, 200)]  # mixes and baseline sizes


def _bins(mix: NDArray[np.float64], n: float = 1e6) -> NDArray[np.float64]:
    out = np.zeros(len(BIN_VALUES))
    for level, p in zip(LEVELS, mix, strict=True):
        out[round(level * 20)] = p * n
    return out


def _moments(mix: NDArray[np.float64]) -> tuple[float, float]:
    mean = float(mix @ LEVELS)
    return mean, float(mix @ (LEVELS - mean) ** 2)


def _run_lengths(
    mix: NDArray[np.float64], level: float, h: float, reps: int = 400, horizon: int = 20_000, seed: int = 3
) -> float:
    """The mean events until an event-by-event CUSUM of `level - x` reaches `h`, scores drawn from `mix`."""
    rng = np.random.default_rng(seed)
    s = np.zeros(reps)
    alive = np.ones(reps, dtype=bool)
    lengths = np.full(reps, horizon)
    for i in range(horizon):
        s = np.maximum(0.0, s + level - rng.choice(LEVELS, size=reps, p=mix))
        hit = alive & (s >= h)
        lengths[hit] = i + 1
        alive &= ~hit
        if not alive.any():
            break
    assert not alive.any(), "the horizon is too short for this threshold"
    return float(lengths.mean())


@pytest.mark.parametrize(("mix", "n"), CASES, ids=["rubric", "rubric 100", "rare zeros", "rare 200"])
def test_the_calibrated_threshold_pages_no_more_often_than_its_target(mix: NDArray[np.float64], n: float) -> None:
    """Scores resampled from the baseline reach the calibrated threshold after at least the target run length
    (and not wastefully later: within 3x), on a long baseline and on a short one (its reference 2 se lower)."""
    mean, var = _moments(mix)
    for target in (300.0, 1000.0):
        ref = calibrate_mean(_bins(mix, min(n, 1e6)), mean, var, n, 0.1, target)
        arl = _run_lengths(mix, ref.mean - ref.slack, ref.threshold, horizon=40_000)
        assert target <= arl <= 3 * target, (target, arl, ref)


def test_a_gaussian_threshold_would_page_several_times_too_often_on_skewed_scores() -> None:
    """On rare zeros, the threshold from the Gaussian theta (2k / sigma^2) gives a run length well under its
    target: why the threshold comes from the scores' own distribution."""
    mean, var = _moments(RARE_ZEROS)
    ref = calibrate_mean(_bins(RARE_ZEROS), mean, var, 1e9, 0.1, 1000.0)
    gaussian = threshold_for(2 * ref.slack / var, ref.slack, 1000.0)
    assert gaussian < ref.threshold
    assert _run_lengths(RARE_ZEROS, ref.mean - ref.slack, gaussian) < 1000 / 2.5


def test_the_reference_sits_below_an_estimated_mean_by_its_standard_error() -> None:
    """A baseline of few events moves the reference down by 2 standard errors; a long one hardly at all."""
    mean, var = _moments(RUBRIC)
    short = calibrate_mean(_bins(RUBRIC), mean, var, 100, 0.1, 1000.0)
    long = calibrate_mean(_bins(RUBRIC), mean, var, 1e8, 0.1, 1000.0)
    assert short.mean == pytest.approx(mean - 2 * math.sqrt(var / 100))
    assert long.mean == pytest.approx(mean, abs=1e-4)


def test_the_threshold_grows_with_the_run_length_asked_for() -> None:
    """More events between false alarms (more segments sharing the budget, a faster segment) need a higher threshold."""
    mean, var = _moments(RUBRIC)
    hs = [calibrate_mean(_bins(RUBRIC), mean, var, 1e6, 0.1, arl).threshold for arl in (1e2, 1e4, 1e6)]
    assert hs[0] < hs[1] < hs[2]


def _false_resolutions(mix: NDArray[np.float64], ref: Reference, reps: int = 300, horizon: int = 12_000) -> float:
    """The mean events until the recovery statistic resolves on scores drawn from `mix` (censored at `horizon`,
    which can only make it shorter)."""
    rng = np.random.default_rng(4)
    s = np.zeros(reps)
    lengths = np.full(reps, float(horizon))
    alive = np.ones(reps, dtype=bool)
    for i in range(horizon):
        s = np.maximum(0.0, s + rng.choice(LEVELS, size=reps, p=mix) - ref.recovery_level)
        hit = alive & (s >= ref.resolve_threshold)
        lengths[hit] = i + 1
        alive &= ~hit
        if not alive.any():
            break
    return float(lengths.mean())


def _mix_of(probs: NDArray[np.float64]) -> NDArray[np.float64]:
    """The five rubric levels' probabilities out of 21 bins (the others hold only pseudo-counts)."""
    mix = probs[[round(v * 20) for v in LEVELS]]
    return np.asarray(mix / mix.sum(), dtype=np.float64)


@pytest.mark.parametrize(("mix", "n"), CASES, ids=["rubric", "rubric 100", "rare zeros", "rare 200"])
def test_a_lasting_regression_resolves_falsely_no_more_often_than_targeted(mix: NDArray[np.float64], n: float) -> None:
    """Regressions of the shift that stay (mass moved from the top to a zero, and the worst case: from the lowest
    levels first) reach the resolve threshold after at least the target run length, on long and short baselines."""
    mean, var = _moments(mix)
    target = 300.0
    ref = calibrate_mean(_bins(mix, min(n, 1e6)), mean, var, n, 0.1, 50.0, resolve_arl_events=target)
    assert ref.resolve_threshold == ref.resolve_at  # not the detection threshold under it
    top = mix.copy()
    top[0], top[-1] = top[0] + 0.1, top[-1] - 0.1
    worst = _mix_of(regressed(distribution(_bins(mix, min(n, 1e6))), BIN_VALUES, mean - 0.1))
    for bad in (top, worst):
        assert float(bad @ LEVELS) == pytest.approx(mean - 0.1, abs=2e-3)
        assert _false_resolutions(bad, ref) >= target, (bad, ref)
    assert _false_resolutions(worst, ref) <= 3 * target  # the worst case is where it is calibrated: not far beyond


def test_a_cached_root_never_lowers_a_threshold_by_more_than_a_fifth_of_a_percent() -> None:
    """Two baselines with the same cache key (a level 0.001 apart at most, probabilities within 3 significant digits):
    the threshold from the root the first one cached is at most 0.2 % below the second one's own."""
    rng = np.random.default_rng(0)
    worst, hits = 0.0, 0
    for _ in range(400):
        probs = distribution(np.sort(rng.dirichlet(np.full(21, 0.3))) * 10 ** rng.uniform(2, 5))
        z = float(probs @ BIN_VALUES) - rng.uniform(0.02, 0.1) - BIN_VALUES
        cell = math.ceil(round(z[0] * 1000, 6)) / 1000
        near = z + rng.uniform(cell - 0.001 - z[0], cell - z[0]) * 0.999
        other = probs * (1 + rng.uniform(-4e-4, 4e-4, len(probs)))
        other /= other.sum()
        _THETAS.clear()
        first = adjustment_coefficient(probs, z)
        cached = adjustment_coefficient(other, near)
        if len(_THETAS) > 1 or not math.isfinite(first):
            continue  # another key: no hit to judge
        hits += 1
        own = _theta(other, near)  # the root of the distribution asked about, uncached
        drift = -float(other @ near)
        worst = min(worst, threshold_for(cached, drift, 1e5) / threshold_for(own, drift, 1e5) - 1)
    assert hits > 50 and worst >= -0.002, (hits, worst)


def _buckets(values: list[list[float]]) -> Buckets:
    n = np.array([len(v) for v in values], dtype=np.float64)
    return Buckets(np.arange(len(values), dtype=np.int64) * 60_000, n, n, np.array([sum(v) for v in values]))


def test_the_batched_statistic_is_the_event_by_event_one_with_one_event_per_bucket() -> None:
    """With one event per bucket the statistic is exactly max(0, S + level - x) event after event."""
    rng = np.random.default_rng(5)
    xs = rng.choice(LEVELS, size=300, p=RUBRIC).tolist()
    ref = Reference(0.8, 0.05, 10.0)
    s = 0.0
    for x in xs:
        s = max(0.0, s + ref.mean - ref.slack - x)
    assert cusum(_buckets([[x] for x in xs]), ref) == pytest.approx(s)


def test_batching_never_raises_the_statistic_above_the_event_by_event_one() -> None:
    """Summing a minute's events before the reset can only lower the statistic: the calibration stays conservative."""
    rng = np.random.default_rng(6)
    ref = Reference(0.8, 0.05, 10.0)
    for _ in range(50):
        minutes = [rng.choice(LEVELS, size=int(rng.integers(1, 6)), p=RUBRIC).tolist() for _ in range(40)]
        s = 0.0
        for x in (x for m in minutes for x in m):
            s = max(0.0, s + ref.mean - ref.slack - x)
        assert cusum(_buckets(minutes), ref) <= s + 1e-9


def test_recovery_grows_only_once_the_scores_are_back() -> None:
    """The reverse statistic stays at 0 on regressed scores and climbs by the slack per event on good ones."""
    ref = Reference(0.8, 0.05, 10.0)
    assert recovery(_buckets([[0.6]] * 200), ref) == 0.0
    assert recovery(_buckets([[0.6]] * 200 + [[0.8]] * 100), ref) == pytest.approx(100 * 0.05)


@pytest.mark.parametrize("n", [50, 60, 100, 140, 400, 20_000])
def test_recovery_climbs_on_a_fix_and_falls_on_a_regression_whatever_the_baseline_size(n: int) -> None:
    """From the shipped minimum of 50 baseline events up, the baseline's own scores climb by at least half the slack
    per event and a regression of the shift falls by at least the slack, margin or not."""
    mean, var = _moments(RUBRIC)
    ref = calibrate_mean(_bins(RUBRIC, n), mean, var, n, 0.1, 1e4, resolve_arl_events=1e4)
    assert ref.margin == pytest.approx(2 * math.sqrt(var / n))
    assert recovery(_buckets([[mean]] * 400), ref) >= 400 * ref.slack / 2 - 1e-9
    assert recovery(_buckets([[mean]] * 399 + [[mean - 0.1 + ref.slack]]), ref) <= 400 * ref.slack
    assert recovery(_buckets([[mean - 0.1]] * 400), ref) == 0.0


def test_since_keeps_the_buckets_from_a_time_on() -> None:
    """`since` drops the buckets that start before the time given; the mean is over what is left."""
    b = _buckets([[1.0], [0.0, 0.0], [0.5]])
    assert b.since(60_000).start_ms.tolist() == [60_000, 120_000]
    assert b.since(60_000).mean() == pytest.approx(0.5 / 3)
    assert b.since(10**9).mean() is None


ROLLOUT = next(r for r in load_rules().rules if r.name == "prompt_rollout_regression")
VERSION = (("app", "a"), ("prompt_version", "v2"), ("judge_id", "j"))


def _version(x: NDArray[np.float64]) -> WindowStats:
    n = len(x)
    return WindowStats(86400.0, rows=n, ok=n, weighted=WeightedSums(n, n, float(x.sum()), float((x**2).sum()), 0.0))


def _rollout_p(new: NDArray[np.float64], old: WindowStats) -> float:
    p = observe(ROLLOUT, VERSION, SegmentData(_version(new), old)).p_change
    assert p is not None
    return p


def test_a_rollout_from_a_version_that_always_scored_the_same_still_pages() -> None:
    """An old version that always scored 1 against a new one that always scores 0 (or 0.5) pages from its first
    events; a new version that also always scores 1 does not."""
    old = _version(np.ones(2000))
    for new, n in ((0.0, 25), (0.0, 500), (0.5, 500), (0.0, 12)):
        assert _rollout_p(np.full(n, new), old) < 0.001, (new, n)
    assert _rollout_p(np.ones(500), old) == 1.0


@pytest.mark.long(seconds=75)
def test_the_rollout_test_stays_valid_when_the_new_version_spreads_its_scores_more() -> None:
    """Equal means, the old version tight (0.5 +- 0.03), the new one 0 or 1: looked at after each of its first 60
    events, the rollout rule's p-value crosses 0.01 in at most 1 % of rollouts (it was 77 % at 0.001)."""
    rng = np.random.default_rng(4)
    reps, crossed = 300, 0
    for _ in range(reps):
        old = _version(np.clip(rng.normal(0.5, 0.03, 2000), 0, 1))
        new = rng.integers(0, 2, 60).astype(np.float64)
        crossed += min(_rollout_p(new[:k], old) for k in range(3, 61)) < 0.01
    assert crossed / reps <= 0.01


def test_silence_beside_other_traffic_is_judged_by_the_share_the_segment_had() -> None:
    """A version that had all the traffic is gone after two events of the old one; a 10 % canary only after about
    90 of its app's events; one stray event retires nothing, and a silence under 3 minutes stops none."""
    assert stopped_beside(events=360, beside_during=0, beside_after=2, silent_s=240)
    assert not stopped_beside(events=360, beside_during=0, beside_after=1, silent_s=240)
    assert not stopped_beside(events=36, beside_during=324, beside_after=60, silent_s=1800)
    assert stopped_beside(events=36, beside_during=324, beside_after=100, silent_s=1800)
    assert not stopped_beside(events=360, beside_during=0, beside_after=50, silent_s=120)
    assert not stopped_beside(events=0, beside_during=100, beside_after=100, silent_s=1800)


def test_silence_alone_is_judged_at_the_segment_s_own_rate_as_if_looked_at_after_every_event() -> None:
    """With nothing beside it, a segment of 2 events a minute stops after an hour's silence, one of 0.1 a minute
    only after about 3 hours; never under an hour."""
    assert stopped_alone(events=720, active_s=6 * 3600, silent_s=3600)
    assert not stopped_alone(events=720, active_s=6 * 3600, silent_s=3000)
    assert not stopped_alone(events=36, active_s=6 * 3600, silent_s=3600 * 2)
    assert stopped_alone(events=36, active_s=6 * 3600, silent_s=3600 * 3)


def test_a_burst_of_events_in_one_minute_is_no_rate_to_judge_silence_by() -> None:
    """Three events in one minute are rated over 15 minutes, as the threshold rates them: an hour's silence after
    them is no evidence that the segment stopped; 90 minutes is."""
    assert not stopped_alone(events=3, active_s=60.0, silent_s=3600)
    assert stopped_alone(events=3, active_s=60.0, silent_s=5400)
