"""The agreement statistics against values worked out by hand, and their edge cases (undefined, not a crash)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from scipy import stats

from monitor.calibration.agreement import (
    Bootstrap,
    agreement,
    bucket,
    confusion,
    group,
    kendall,
    largest_disagreements,
    mean_absolute_error,
    per_category,
    spearman,
    weighted_kappa,
)

# Six pairs, labels on the rubric scale 0–4 and judge scores on 0..1:
#
#   pair           1     2     3     4     5     6
#   label          0     1     2     3     4     4
#   label / 4      0    .25   .50   .75   1.0   1.0
#   judge score    0    .50   .25   .75   1.0   .75
#   judge bucket   0     2     1     3     4     3      (round(score × 4))
LABELS = [0, 1, 2, 3, 4, 4]
UNIT = [x / 4 for x in LABELS]
SCORES = [0.0, 0.5, 0.25, 0.75, 1.0, 0.75]
CATEGORIES = ["orders", "orders", "travel", "travel", "travel", None]

# Spearman ρ: Pearson's r of the average ranks.
#   ranks of the labels  1  2  3  4    5.5  5.5     (the two 4s share ranks 5 and 6)
#   ranks of the scores  1  3  2  4.5  6    4.5     (the two .75s share ranks 4 and 5)
#   deviations from the mean rank 3.5:
#     labels  -2.5 -1.5 -0.5  0.5  2    2           Σd² = 6.25+2.25+.25+.25+4+4     = 17
#     scores  -2.5 -0.5 -1.5  1    2.5  1           Σd² = 6.25+.25+2.25+1+6.25+1    = 17
#   Σ products = 6.25 + .75 + .75 + .5 + 5 + 2 = 15.25            ρ = 15.25 / √(17 · 17) = 15.25 / 17
RHO = 15.25 / 17

# Kendall τ-b over the 15 pairs of pairs: concordant 12; discordant 1 (2,3: label up, score down); tied in the
# scores only 1 (4,6: .75 and .75); tied in the labels only 1 (5,6: 4 and 4).
#   τ-b = (C − D) / √((n0 − n_label_ties)(n0 − n_score_ties)) = (12 − 1) / √((15 − 1)(15 − 1)) = 11 / 14
TAU = 11 / 14

# Quadratic-weighted κ on buckets 0–4, weights w = (i − j)² / 16:
#   observed: the pairs off the diagonal are (1,2), (2,1) and (4,3), each one bucket apart: Σ w·O = 3/16
#   label bucket counts  [1, 1, 1, 1, 2];  judge bucket counts [1, 1, 1, 2, 1];  E_ij = r_i · c_j / 6
#   Σ_j (i − j)² c_j for rows i = 0..4: 39, 19, 11, 15, 31; times r_i: 39 + 19 + 11 + 15 + 62 = 146
#   Σ w·E = 146 / (16 · 6)       κ = 1 − (3/16) / (146/96) = 1 − 18/146 = 64/73
KAPPA = 64 / 73

# MAE on 0..1: |0−0| + |.25−.5| + |.5−.25| + |.75−.75| + |1−1| + |1−.75| = .75, over 6 pairs = .125
MAE = 0.125

# Groups (low ≤ 1, mid = 2, high ≥ 3): labels low low mid high high high; judge low mid low high high high.
CONFUSION = ((1, 1, 0), (1, 0, 0), (0, 0, 3))


def test_spearman_matches_the_hand_computed_value() -> None:
    """ρ of the six pairs is 15.25/17, with average ranks for ties on both sides."""
    assert spearman(UNIT, SCORES).value == pytest.approx(RHO)


def test_kendall_tau_b_matches_the_hand_computed_value() -> None:
    """τ-b of the six pairs is 11/14: one discordant pair, one tie on each side."""
    assert kendall(UNIT, SCORES).value == pytest.approx(TAU)


def test_quadratic_weighted_kappa_matches_the_hand_computed_value() -> None:
    """κ on the 0–4 buckets of the six pairs is 64/73."""
    got = weighted_kappa([bucket(x) for x in UNIT], [bucket(s) for s in SCORES])
    assert got.value == pytest.approx(KAPPA)


def test_mae_and_confusion_match_the_hand_computed_values() -> None:
    """MAE is 0.125 on the 0..1 scale; the 3×3 table puts each pair in its label row and judge column."""
    assert mean_absolute_error(UNIT, SCORES).value == pytest.approx(MAE)
    assert confusion(UNIT, SCORES) == CONFUSION


def test_agreement_bundles_every_statistic() -> None:
    """agreement() reports the same hand-computed values, the pair count and the bootstrap used."""
    a = agreement(UNIT, SCORES, CATEGORIES)
    assert a.n == 6
    assert (a.spearman.value, a.kendall.value, a.kappa.value, a.mae.value) == pytest.approx((RHO, TAU, KAPPA, MAE))
    assert a.confusion == CONFUSION
    assert a.bootstrap == Bootstrap(resamples=2000, seed=0, confidence=0.95)


def test_buckets_round_halves_up_and_groups_split_at_one_and_three() -> None:
    """round(score × 4) sends .125 to 1 and .375 to 2 (not banker's rounding), and stays within 0–4."""
    assert [bucket(s) for s in (0.0, 0.124, 0.125, 1 / 3, 0.375, 0.5, 2 / 3, 0.875, 1.0)] == [0, 0, 1, 1, 2, 2, 3, 4, 4]
    assert [group(b) for b in range(5)] == [0, 0, 1, 2, 2]


def test_the_bootstrap_interval_repeats_with_the_seed_and_brackets_the_estimate() -> None:
    """The same seed gives the same interval, another seed another one; the interval holds ρ."""
    first, again, other = (spearman(UNIT, SCORES, Bootstrap(seed=s)) for s in (7, 7, 8))
    assert first.ci == again.ci and first.ci != other.ci
    assert first.ci is not None and first.ci[0] <= RHO <= first.ci[1] <= 1.0
    # A resample that draws one label only has no correlation: left out, and counted.
    assert 0 < first.resamples_used < 2000


def test_a_perfect_ranking_has_an_interval_of_exactly_one() -> None:
    """When every label order is the score order, every usable resample has ρ = τ = 1, so the interval is [1, 1]."""
    labels = [i / 20 for i in range(21)]
    scores = [x**2 for x in labels]  # a monotone transform: ranks are unchanged
    for stat in (spearman(labels, scores), kendall(labels, scores)):
        assert stat.value == pytest.approx(1.0) and stat.ci == pytest.approx((1.0, 1.0))


def test_intervals_agree_with_scipy_bootstrap() -> None:
    """On 200 noisy pairs the percentile intervals match scipy.stats.bootstrap's to within 0.02."""
    rng = random.Random(1)
    x = [rng.randint(0, 4) / 4 for _ in range(200)]
    y = [min(1.0, max(0.0, v + rng.gauss(0, 0.25))) for v in x]
    for ours, func in ((spearman(x, y), stats.spearmanr), (kendall(x, y), stats.kendalltau)):
        theirs = stats.bootstrap(
            (np.array(x), np.array(y)),
            lambda a, b, f=func: f(a, b).statistic,
            paired=True,
            vectorized=False,
            n_resamples=2000,
            method="percentile",
            rng=np.random.default_rng(5),
        ).confidence_interval
        assert ours.ci == pytest.approx((theirs.low, theirs.high), abs=0.02)


def test_all_labels_equal_leave_the_correlations_undefined_with_the_reason() -> None:
    """Constant labels: ρ and τ are undefined ("all labels are equal"), κ is 0 (chance) and MAE still computes."""
    labels = [0.5] * 5
    scores = [0.0, 0.25, 0.5, 0.75, 1.0]
    a = agreement(labels, scores)
    for stat in (a.spearman, a.kendall):
        assert stat.value is None and stat.ci is None and stat.undefined == "all labels are equal"
    assert a.kappa.value == pytest.approx(0.0)
    assert a.mae.value == pytest.approx(0.3)


def test_constant_judge_scores_leave_the_correlations_undefined() -> None:
    """A judge that gives every pair the same score has no rank correlation, and says which side is constant."""
    assert spearman([0.0, 0.5, 1.0], [0.5, 0.5, 0.5]).undefined == "all judge scores are equal"


@pytest.mark.parametrize("n", [0, 1, 2])
def test_fewer_than_three_pairs_leave_the_correlations_undefined(n: int) -> None:
    """With n < 3 a rank correlation is ±1 or nothing whatever the data: undefined, with the count."""
    a = agreement([0.0, 1.0][:n], [0.0, 1.0][:n])
    for stat in (a.spearman, a.kendall):
        assert stat.value is None and stat.undefined == f"needs at least 3 pairs, has {n}"
    assert (a.mae.value is None) == (n == 0)


def test_kappa_is_undefined_when_both_sides_are_one_bucket() -> None:
    """Every pair in bucket 2 on both sides gives 0/0: undefined, not 1 or 0."""
    got = weighted_kappa([2, 2, 2], [2, 2, 2])
    assert got.value is None and got.undefined == "every pair is in the same bucket on both sides"
    assert weighted_kappa([], []).undefined == "no pairs"


def test_per_category_rows_and_rho_only_from_five_pairs() -> None:
    """Each category gets n, means and MAE by hand; ρ appears from five pairs, pairs without a category come last."""
    cats = ["b"] * 5 + ["a"] * 2 + [None]
    ref = [0.0, 0.25, 0.5, 0.75, 1.0, 0.0, 1.0, 0.5]
    got = [0.0, 0.5, 0.25, 0.75, 1.0, 0.5, 0.5, 0.5]
    rows = per_category(cats, ref, got)
    assert [r.category for r in rows] == ["a", "b", None]
    a, b, none = rows
    # a: labels 0 and 1 (mean .5), scores .5 and .5 (mean .5), gaps .5 and .5 (MAE .5)
    assert (a.n, a.mean_reference, a.mean_score, a.mae) == (2, 0.5, 0.5, 0.5)
    assert a.spearman.value is None and a.spearman.undefined == "needs at least 5 pairs, has 2"
    # b: ranks 1..5 against 1 3 2 4 5: Σd² = 0+1+1+0+0 = 2, ρ = 1 − 6·2 / (5·24) = 0.9
    assert b.n == 5 and b.spearman.value == pytest.approx(0.9) and b.spearman.ci is None
    assert b.mae == pytest.approx((0.25 + 0.25) / 5)
    assert none.n == 1


def test_largest_disagreements_sort_by_gap_then_input_order_and_skip_exact_agreement() -> None:
    """Indices by |label − score| descending, ties in input order, pairs that agree exactly never listed."""
    ref = [1.0, 0.0, 0.5, 0.5, 1.0]
    got = [0.0, 0.5, 0.0, 0.5, 0.5]
    assert largest_disagreements(ref, got) == (0, 1, 2, 4)
    assert largest_disagreements(ref, got, top=2) == (0, 1)


def test_mismatched_lengths_are_a_bug_not_a_statistic() -> None:
    """Reference and scores of different lengths raise instead of pairing the wrong values."""
    with pytest.raises(ValueError, match="3 reference values but 2 scores"):
        agreement([0.0, 0.5, 1.0], [0.0, 0.5])


def test_per_tag_rows_cover_each_tag_then_the_untagged_pairs() -> None:
    """A pair counts under each of its tags; the untagged pairs make the last row (tag None); no tag, no rows."""
    from monitor.calibration.agreement import per_tag

    tags = [("multi_turn",), ("multi_turn", "brief"), (), ()]
    rows = per_tag(tags, [1.0, 0.0, 1.0, 0.5], [0.0, 1.0, 1.0, 0.5])
    assert [(r.category, r.n, r.mean_reference, r.mean_score, r.mae) for r in rows] == [
        ("brief", 1, 0.0, 1.0, 1.0),
        ("multi_turn", 2, 0.5, 0.5, 1.0),
        (None, 2, 0.75, 0.75, 0.0),
    ]
    assert per_tag([(), ()], [1.0, 0.0], [1.0, 0.0]) == ()
