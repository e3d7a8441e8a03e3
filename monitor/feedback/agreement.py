"""How well the judge's score predicts users' own verdicts (pure, numpy).

- Thumbs: the AUC of the score for telling a liked answer from a disliked one, P(liked scores higher than disliked)
  with ties counted half (the Mann-Whitney statistic over every liked × disliked pair). 0.5 is a coin; a judge that
  predicts complaints is well above it. The interval is DeLong's (its variance from each answer's share of the pairs
  it wins, which handles ties exactly); with a single answer in a class DeLong has no variance to estimate, so
  Hanley-McNeil's formula stands in. Clipped to [0, 1].
- Ratings: Spearman's ρ of score against rating, average ranks for ties, with a Fisher-z interval whose standard
  error is 1.06/√(n-3) (Fieller, Hartley and Pearson 1957), so it needs 4 pairs.

Either figure is None (with its counts) when the data cannot define it, never a made-up 0.5 or 0."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]
MIN_RANK_PAIRS = 4  # the Fisher-z standard error 1.06/sqrt(n-3) needs n > 3
FIELLER_SE = 1.06


@dataclass(frozen=True, slots=True)
class AucFigure:
    """AUC of the judge's score against thumbs, its interval, and how many disliked and liked answers it rests on
    (auc/low/high None when either class is empty)."""

    auc: float | None
    low: float | None
    high: float | None
    disliked: int
    liked: int


@dataclass(frozen=True, slots=True)
class RankFigure:
    """Spearman's ρ of the judge's score against ratings over `n` pairs, with its interval (None below 4 pairs or
    when either side does not vary)."""

    rho: float | None
    low: float | None
    high: float | None
    n: int


def _z(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be in (0, 1), got {level}")
    return NormalDist().inv_cdf(0.5 + level / 2.0)


def _array(values: Sequence[float] | Floats, name: str) -> Floats:
    out = np.asarray(values, dtype=np.float64).ravel()
    if not np.all(np.isfinite(out)):
        raise ValueError(f"{name} must be finite numbers")
    return out


def midranks(values: Floats) -> Floats:
    """Ranks 1..n of `values`, tied values sharing the average of the ranks they span."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)  # the last rank each distinct value spans
    return (ends - (counts - 1) / 2.0)[inverse].astype(np.float64)


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))


def auc_of(
    disliked_scores: Sequence[float] | Floats, liked_scores: Sequence[float] | Floats, level: float = 0.95
) -> AucFigure:
    """The AUC of the score for predicting a thumbs-down: P(a liked answer scores higher than a disliked one), ties
    counted half, with its `level` interval (DeLong; Hanley-McNeil when a class has one answer)."""
    z = _z(level)
    neg = _array(disliked_scores, "disliked scores")
    pos = _array(liked_scores, "liked scores")
    m, n = len(pos), len(neg)
    if m == 0 or n == 0:
        return AucFigure(None, None, None, n, m)
    combined = midranks(np.concatenate([pos, neg]))
    # Each liked answer's share of the disliked ones it beats (ties half), and each disliked one's share of the
    # liked ones that beat it: DeLong's structural components, from midranks in O((m+n) log(m+n)).
    wins_pos = (combined[:m] - midranks(pos)) / n
    wins_neg = 1.0 - (combined[m:] - midranks(neg)) / m
    auc = float(wins_pos.mean())
    if m >= 2 and n >= 2:
        variance = float(np.var(wins_pos, ddof=1)) / m + float(np.var(wins_neg, ddof=1)) / n
    else:
        q1 = auc / (2.0 - auc)
        q2 = 2.0 * auc * auc / (1.0 + auc)
        variance = (auc * (1.0 - auc) + (m - 1) * (q1 - auc * auc) + (n - 1) * (q2 - auc * auc)) / (m * n)
    se = math.sqrt(max(variance, 0.0))
    return AucFigure(auc, _clip(auc - z * se), _clip(auc + z * se), n, m)


def spearman_of(scores: Sequence[float] | Floats, ratings: Sequence[float] | Floats, level: float = 0.95) -> RankFigure:
    """Spearman's ρ of `scores[i]` against `ratings[i]` with a Fisher-z `level` interval (se 1.06/√(n-3))."""
    z = _z(level)
    x = _array(scores, "scores")
    y = _array(ratings, "ratings")
    if len(x) != len(y):
        raise ValueError(f"{len(x)} scores but {len(y)} ratings")
    n = len(x)
    if n < MIN_RANK_PAIRS:
        return RankFigure(None, None, None, n)
    rx = midranks(x) - (n + 1) / 2.0
    ry = midranks(y) - (n + 1) / 2.0
    spread = math.sqrt(float(rx @ rx) * float(ry @ ry))
    if spread == 0.0:
        return RankFigure(None, None, None, n)
    rho = max(-1.0, min(1.0, float(rx @ ry) / spread))
    if abs(rho) == 1.0:
        return RankFigure(rho, rho, rho, n)
    centre = math.atanh(rho)
    half = z * FIELLER_SE / math.sqrt(n - 3)
    return RankFigure(rho, math.tanh(centre - half), math.tanh(centre + half), n)
