"""The likelihood-ratio bank on a segment's score histogram: its false-alarm rate and its delays, by simulation."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from numpy.typing import NDArray

from monitor.alerts.evaluator import Frozen
from monitor.alerts.likelihood import bank_for
from monitor.alerts.sequential import BIN_VALUES, Buckets, calibrate, cusum, distribution, dropped
from monitor.alerts.state import frozen_from_json, frozen_to_json

LEVELS = {0.0: 0, 0.25: 5, 0.5: 10, 0.75: 15, 1.0: 20}


def rubric(*probs: float) -> NDArray[np.float64]:
    """A histogram over the 21 bins with `probs` on the rubric's five levels."""
    out = np.zeros(len(BIN_VALUES))
    for p, i in zip(probs, LEVELS.values(), strict=True):
        out[i] = p
    return out / out.sum()


GOOD = rubric(0.03, 0.05, 0.10, 0.27, 0.55)
SEVENTY_FOUR = rubric(0.05, 0.08, 0.12, 0.30, 0.45)
CONTINUOUS = np.exp(-(((BIN_VALUES - 0.8) / 0.2) ** 2)) / np.exp(-(((BIN_VALUES - 0.8) / 0.2) ** 2)).sum()


def moved(p: NDArray[np.float64], to: float, mass: float) -> NDArray[np.float64]:
    """`p` with `mass` moved from the top bin to the bin of `to`."""
    out = p.copy()
    out[-1] -= mass
    out[round(to * 20)] += mass
    return out


def run_lengths(
    stat: NDArray[np.float64],
    limits: NDArray[np.float64],
    draw: NDArray[np.float64],
    reps: int,
    longest: int,
    seed: int,
) -> NDArray[np.float64]:
    """Events until any member of the per-bin increments `stat` (members x bins) reaches its limit, scores drawn
    from `draw`, started at 0 (`longest` when none did)."""
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(draw)
    s = np.zeros((len(stat), reps))
    out = np.full(reps, float(longest))
    alive = np.ones(reps, dtype=bool)
    for n in range(1, longest + 1):
        x = np.minimum(np.searchsorted(cdf, rng.random(reps)), len(draw) - 1)
        s = np.maximum(0.0, s + stat[:, x])
        hit = alive & (s >= limits[:, None]).any(axis=0)
        out[hit] = n
        alive &= ~hit
        if not alive.any():
            break
    return out


@pytest.mark.long(seconds=20)
@pytest.mark.parametrize(
    ("baseline", "target", "reps"),
    [(GOOD, 1500.0, 500), (SEVENTY_FOUR, 1500.0, 500), (CONTINUOUS, 1500.0, 500), (SEVENTY_FOUR, 20_000.0, 250)],
    ids=["rubric", "rubric-74", "continuous", "rubric-74-long"],
)
def test_the_bank_pages_no_more_often_than_its_budget_on_its_own_baseline(
    baseline: NDArray[np.float64], target: float, reps: int
) -> None:
    """Scores drawn from the baseline itself reach the bank's thresholds no sooner, on average, than the events
    between false alarms it was calibrated for (the union of its members and their overshoot, by simulation), at a
    short target and at a longer one, where the union costs more."""
    probs = distribution(baseline * 100_000)
    bank = bank_for(probs, BIN_VALUES, target)
    lengths = run_lengths(bank.llr, bank.limits, probs, reps=reps, longest=int(target * 20), seed=3)
    # Run lengths are roughly exponential: the mean's standard error is 1/sqrt(reps), 4.5-6.3 %.
    assert lengths.mean() >= target * 0.85, lengths.mean()


def test_the_bank_detects_good_answers_turned_partial_faster_than_the_mean_does() -> None:
    """A release that turns 36 % of the answers from 1.0 into 0.25 (the mean from 0.74 to 0.47): the bank pages in
    under two thirds of the events the CUSUM of the mean needs at the same false-alarm rate."""
    probs = distribution(SEVENTY_FOUR * 100_000)
    after = moved(SEVENTY_FOUR, 0.25, 0.36)
    ref = calibrate(
        SEVENTY_FOUR * 100_000,
        float(SEVENTY_FOUR @ BIN_VALUES),
        float(SEVENTY_FOUR @ BIN_VALUES**2) - float(SEVENTY_FOUR @ BIN_VALUES) ** 2,
        100_000,
        0.1,
        300_000.0,
    )
    assert ref.bank is not None
    bank_delay = run_lengths(ref.bank.llr, ref.bank.limits, after, 400, 2_000, 5).mean()
    mean_increments = (ref.mean - ref.slack - BIN_VALUES)[None, :]
    mean_limit = np.array([ref.resolve_at])  # the mean's threshold, which `calibrate` keeps for the recovery
    mean_delay = run_lengths(mean_increments, mean_limit, after, 400, 2_000, 5).mean()
    assert probs.min() > 0
    assert bank_delay < mean_delay * 2 / 3, (bank_delay, mean_delay)


@pytest.mark.parametrize("drop", [0.1, 0.2, 0.4])
@pytest.mark.parametrize("baseline", [GOOD, CONTINUOUS], ids=["rubric", "continuous"])
def test_the_detectable_drop_is_what_the_bank_does_in_simulation(baseline: NDArray[np.float64], drop: float) -> None:
    """`Reference.delay_events`, which `alerts check`'s detectability lines come from, is within 30 % of the mean
    delay the calibrated bank shows in simulation (from 0) for the same drop, rubric or finer scores."""
    n = 50_000.0
    mean = float(baseline @ BIN_VALUES)
    ref = calibrate(baseline * n, mean, float(baseline @ BIN_VALUES**2) - mean**2, n, 0.1, 200_000.0)
    assert ref.bank is not None
    after = dropped(baseline, BIN_VALUES, drop)
    simulated = run_lengths(ref.bank.llr, ref.bank.limits, after, 400, 5_000, 11).mean()
    assert ref.delay_events(drop) == pytest.approx(simulated, rel=0.3)
    assert ref.detectable(ref.delay_events(drop)) == pytest.approx(drop, abs=0.01)


def test_finer_scores_enter_the_histogram_unchanged_and_page() -> None:
    """Statement shares (thirds, sevenths) fall in the bins between the rubric's levels; a drop of them pages
    through the buckets, as rubric scores do, and the baseline's own mix does not."""
    scores = np.array([1.0, 6 / 7, 2 / 3, 5 / 7, 1.0, 1.0, 0.8, 2 / 3, 1 / 3, 1.0, 1 / 7, 6 / 7] * 200)
    base = np.bincount(np.floor(scores * 20 + 0.5).astype(int), minlength=21).astype(float)
    ref = calibrate(base, scores.mean(), scores.var(), len(scores), 0.1, 50_000.0)
    assert ref.bank is not None
    bad = np.array([1 / 3, 2 / 7, 1.0, 1 / 7] * 20)  # 20 minutes of four answers each
    bins = np.array(
        [np.bincount(np.floor(bad[i : i + 4] * 20 + 0.5).astype(int), minlength=21) for i in range(0, 80, 4)]
    )
    b = Buckets(
        np.arange(20, dtype=np.int64) * 60_000,
        np.full(20, 4.0),
        np.full(20, 4.0),
        bins @ BIN_VALUES,
        bins.astype(float),
    )
    assert cusum(b, ref) >= ref.threshold
    same = np.array(
        [np.bincount(np.floor(scores[i : i + 12] * 20 + 0.5).astype(int), minlength=21) for i in range(0, 240, 12)]
    )
    quiet = Buckets(b.start_ms, np.full(20, 12.0), np.full(20, 12.0), same @ BIN_VALUES, same.astype(float))
    assert cusum(quiet, ref) < ref.threshold / 4


def test_a_frozen_bank_survives_the_state_table() -> None:
    """A detector's frozen reference is stored with its histogram and thresholds and read back with the same
    likelihood ratios, so an open episode keeps its detector across restarts."""
    ref = calibrate(GOOD * 10_000, 0.8, 0.07, 10_000, 0.1, 100_000.0)
    assert ref.bank is not None
    back = frozen_from_json(frozen_to_json(Frozen(ref, datetime(2026, 12, 6, tzinfo=UTC))))
    assert back is not None and back.reference.bank is not None
    assert np.allclose(back.reference.bank.llr, ref.bank.llr)
    assert np.allclose(back.reference.bank.limits, ref.bank.limits)
    assert back.reference.threshold == pytest.approx(ref.threshold)


@pytest.mark.parametrize("n", [50, 200, 1000])
def test_a_thin_baseline_does_not_page_more_often_than_asked(n: int) -> None:
    """Baselines of 50 to 1,000 events drawn from the same scores: the bank calibrated on each estimated histogram
    pages no more often than asked on the true scores (the harmonic mean of the run lengths over ten baselines:
    the rate of false alarms averaged over them)."""
    rng = np.random.default_rng(n)
    lengths = []
    for rep in range(10):
        drawn = rng.choice(len(BIN_VALUES), size=n, p=SEVENTY_FOUR)
        bins = np.bincount(drawn, minlength=len(BIN_VALUES)).astype(float)
        scores = BIN_VALUES[drawn]
        ref = calibrate(bins, float(scores.mean()), float(scores.var()), n, 0.1, 1500.0)
        assert ref.bank is not None
        lengths.append(run_lengths(ref.bank.llr, ref.bank.limits, SEVENTY_FOUR, 150, 20_000, rep).mean())
    assert 1 / np.mean(1 / np.array(lengths)) >= 1500.0 * 0.85, lengths
