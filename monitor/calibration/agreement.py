"""How well two sets of relevancy scores on the 0..1 scale agree: human labels against a judge, or one judge
against another. Pure functions over paired sequences (`reference[i]` goes with `scores[i]`); no I/O.

- Spearman ρ and Kendall τ-b, each with a percentile bootstrap confidence interval over resampled pairs (seeded,
  so a report repeats). Both need 3 pairs and some spread on each side; otherwise they are *undefined* and say
  why, never a made-up 0.
- Cohen's κ with quadratic weights on the rubric's five buckets, a score's bucket being round(score × 4), half up.
- Mean absolute error on the 0..1 scale, a 3×3 confusion table (low ≤ 1, mid = 2, high ≥ 3), a per-category
  breakdown, a per-tag one (a pair may carry several tags, e.g. `multi_turn`) and the pairs that disagree most."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from types import ModuleType

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]

BUCKETS = 5  # the rubric's 0–4
GROUPS = ("low", "mid", "high")  # buckets 0–1, 2, 3–4
MIN_PAIRS = 3  # below this a rank correlation is 1, -1 or nothing, whatever the data
MIN_CATEGORY_PAIRS = 5  # a per-category ρ over fewer pairs is noise
NAMES = ("labels", "judge scores")  # what the two sides are called when a statistic is undefined


@dataclass(frozen=True, slots=True)
class Bootstrap:
    """How confidence intervals are drawn: `resamples` resamples of the pairs with replacement, from `seed`."""

    resamples: int = 2000
    seed: int = 0
    confidence: float = 0.95


DEFAULT_BOOTSTRAP = Bootstrap()


@dataclass(frozen=True, slots=True)
class Statistic:
    """A value, or why it is undefined; `ci` the bootstrap interval (None when not computed or not computable)
    and `resamples_used` how many resamples it rests on (those where a side was constant have no correlation)."""

    value: float | None
    ci: tuple[float, float] | None = None
    undefined: str | None = None
    resamples_used: int = 0


@dataclass(frozen=True, slots=True)
class CategoryRow:
    """One category: pair count, mean reference, mean score, MAE and Spearman ρ (when it has enough pairs)."""

    category: str | None
    n: int
    mean_reference: float
    mean_score: float
    mae: float
    spearman: Statistic


@dataclass(frozen=True, slots=True)
class Agreement:
    """Every statistic of one comparison; `disagreements` are indices into the compared sequences."""

    n: int
    spearman: Statistic
    kendall: Statistic
    kappa: Statistic
    mae: Statistic
    confusion: tuple[tuple[int, ...], ...]
    categories: tuple[CategoryRow, ...]
    disagreements: tuple[int, ...]
    bootstrap: Bootstrap
    tags: tuple[CategoryRow, ...] = ()  # one row per tag, then the untagged pairs (`category` None); () without tags


def bucket(score: float) -> int:
    """The rubric bucket 0–4 of a 0..1 score: round(score × 4), halves up (Python's round would send 0.5 to 0
    and 1.5 to 2, so 0.125 and 0.375 would not land alike)."""
    return min(BUCKETS - 1, max(0, math.floor(score * (BUCKETS - 1) + 0.5)))


def group(b: int) -> int:
    """The confusion-table group of a bucket: 0 low (0–1), 1 mid (2), 2 high (3–4)."""
    return 0 if b <= 1 else 1 if b == 2 else 2


def undefined_correlation(
    reference: Sequence[float], scores: Sequence[float], names: tuple[str, str] = NAMES
) -> str | None:
    """Why no rank correlation exists between the two, or None when it does."""
    if len(reference) < MIN_PAIRS:
        return f"needs at least {MIN_PAIRS} pairs, has {len(reference)}"
    for values, name in zip((reference, scores), names, strict=True):
        if min(values) == max(values):
            return f"all {name} are equal"
    return None


def spearman(
    reference: Sequence[float],
    scores: Sequence[float],
    boot: Bootstrap = DEFAULT_BOOTSTRAP,
    names: tuple[str, str] = NAMES,
) -> Statistic:
    """Spearman's ρ (ties get average ranks) with a bootstrap interval."""
    return _correlation(_spearman_one, _spearman_rows, reference, scores, boot, names)


def kendall(
    reference: Sequence[float],
    scores: Sequence[float],
    boot: Bootstrap = DEFAULT_BOOTSTRAP,
    names: tuple[str, str] = NAMES,
) -> Statistic:
    """Kendall's τ-b (corrected for ties on either side) with a bootstrap interval."""
    return _correlation(_kendall_one, _kendall_rows, reference, scores, boot, names)


def weighted_kappa(
    reference: Sequence[int], scores: Sequence[int], categories: int = BUCKETS, boot: Bootstrap | None = None
) -> Statistic:
    """Cohen's κ with quadratic weights over buckets `0..categories-1`: 1 − Σ w·observed / Σ w·expected, where
    w = (i − j)² / (k − 1)² and expected is the product of the two sides' bucket counts over n. With `boot`, a
    percentile bootstrap interval over resampled pairs (resamples where κ is 0/0 are left out, and counted)."""
    n = len(reference)
    if n == 0:
        return Statistic(None, undefined="no pairs")
    observed = np.zeros((categories, categories))
    np.add.at(observed, (np.asarray(reference), np.asarray(scores)), 1.0)
    i, j = np.indices((categories, categories))
    weights = (i - j) ** 2 / (categories - 1) ** 2
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / n
    chance = float((weights * expected).sum())
    if chance == 0:  # both sides put every pair in one and the same bucket: 0/0
        return Statistic(None, undefined="every pair is in the same bucket on both sides")
    value = 1.0 - float((weights * observed).sum()) / chance
    if boot is None or boot.resamples <= 0:
        return Statistic(value)
    drawn = _kappa_rows(np.asarray(reference), np.asarray(scores), categories, weights, boot)
    if drawn.size == 0:
        return Statistic(value, resamples_used=0)
    tail = (1 - boot.confidence) / 2
    low, high = np.quantile(drawn, [tail, 1 - tail])
    return Statistic(value, (float(low), float(high)), resamples_used=int(drawn.size))


def _kappa_rows(
    reference: npt.NDArray[np.int_], scores: npt.NDArray[np.int_], k: int, weights: Floats, boot: Bootstrap
) -> Floats:
    """κ of each bootstrap resample of the pairs (as `_correlation` draws them), the 0/0 ones left out."""
    n = len(reference)
    picks = np.random.default_rng(boot.seed).integers(0, n, size=(boot.resamples, n))
    cells = reference[picks] * k + scores[picks] + (np.arange(boot.resamples) * k * k)[:, None]
    observed = np.bincount(cells.ravel(), minlength=boot.resamples * k * k).reshape(boot.resamples, k, k)
    expected = observed.sum(axis=2)[:, :, None] * observed.sum(axis=1)[:, None, :] / n
    chance = (weights * expected).sum(axis=(1, 2))
    disagreement = (weights * observed).sum(axis=(1, 2))
    ok = chance > 0
    return np.asarray(1.0 - disagreement[ok] / chance[ok], dtype=np.float64)


def mean_absolute_error(reference: Sequence[float], scores: Sequence[float]) -> Statistic:
    """The mean of |reference − score| (both on the 0..1 scale)."""
    if not reference:
        return Statistic(None, undefined="no pairs")
    return Statistic(_mae(reference, scores))


def confusion(reference: Sequence[float], scores: Sequence[float]) -> tuple[tuple[int, ...], ...]:
    """Counts of pairs by group (low, mid, high) of the reference (rows) and of the score (columns)."""
    table = [[0] * len(GROUPS) for _ in GROUPS]
    for r, s in zip(reference, scores, strict=True):
        table[group(bucket(r))][group(bucket(s))] += 1
    return tuple(tuple(row) for row in table)


def per_category(
    categories: Sequence[str | None],
    reference: Sequence[float],
    scores: Sequence[float],
    boot: Bootstrap = DEFAULT_BOOTSTRAP,
) -> tuple[CategoryRow, ...]:
    """One row per category, by name (pairs without one last); ρ only from `MIN_CATEGORY_PAIRS` pairs, without an
    interval (one per category would be too wide to read at these sizes)."""
    by: dict[str | None, list[int]] = {}
    for index, category in enumerate(categories):
        by.setdefault(category, []).append(index)
    rows = []
    for category in sorted(by, key=lambda c: (c is None, c or "")):
        ref = [reference[i] for i in by[category]]
        got = [scores[i] for i in by[category]]
        if len(ref) < MIN_CATEGORY_PAIRS:
            rho = Statistic(None, undefined=f"needs at least {MIN_CATEGORY_PAIRS} pairs, has {len(ref)}")
        else:
            rho = spearman(ref, got, Bootstrap(resamples=0, seed=boot.seed, confidence=boot.confidence))
        rows.append(CategoryRow(category, len(ref), float(np.mean(ref)), float(np.mean(got)), _mae(ref, got), rho))
    return tuple(rows)


def per_tag(
    tags: Sequence[tuple[str, ...]],
    reference: Sequence[float],
    scores: Sequence[float],
    boot: Bootstrap = DEFAULT_BOOTSTRAP,
) -> tuple[CategoryRow, ...]:
    """One row per tag, by name, over the pairs carrying it, then one (`category` None) over the pairs with no tag;
    nothing when no pair has a tag. A pair with two tags counts in both rows."""
    names = sorted({t for ts in tags for t in ts})
    if not names:
        return ()
    rows = []
    for name in [*names, None]:
        members = [i for i, ts in enumerate(tags) if (name in ts if name is not None else not ts)]
        if not members:
            continue
        [row] = per_category([name] * len(members), [reference[i] for i in members], [scores[i] for i in members], boot)
        rows.append(row)
    return tuple(rows)


def largest_disagreements(reference: Sequence[float], scores: Sequence[float], top: int = 10) -> tuple[int, ...]:
    """Indices of the `top` pairs with the largest |reference − score| (ties in input order); exact agreement
    is not a disagreement and never listed."""
    gaps = [(abs(r - s), i) for i, (r, s) in enumerate(zip(reference, scores, strict=True))]
    ranked = sorted((g for g in gaps if g[0] > 0), key=lambda g: (-g[0], g[1]))
    return tuple(i for _, i in ranked[:top])


def agreement(
    reference: Sequence[float],
    scores: Sequence[float],
    categories: Sequence[str | None] | None = None,
    boot: Bootstrap = DEFAULT_BOOTSTRAP,
    top: int = 10,
    names: tuple[str, str] = NAMES,
    tags: Sequence[tuple[str, ...]] | None = None,
) -> Agreement:
    """Every statistic of `scores` against `reference` (both 0..1, paired by position); `tags` each pair's tags."""
    if len(reference) != len(scores):
        raise ValueError(f"{len(reference)} reference values but {len(scores)} scores")
    return Agreement(
        n=len(reference),
        spearman=spearman(reference, scores, boot, names),
        kendall=kendall(reference, scores, boot, names),
        kappa=weighted_kappa([bucket(r) for r in reference], [bucket(s) for s in scores], boot=boot),
        mae=mean_absolute_error(reference, scores),
        confusion=confusion(reference, scores),
        categories=per_category(
            categories if categories is not None else [None] * len(reference), reference, scores, boot
        ),
        disagreements=largest_disagreements(reference, scores, top),
        bootstrap=boot,
        tags=per_tag(tags, reference, scores, boot) if tags is not None else (),
    )


# ---- correlations and their bootstrap -----------------------------------------------------------------------

One = Callable[[Floats, Floats], float]
Rows = Callable[[Floats, Floats], Floats]  # one statistic per row of two (resamples × n) arrays; NaN when degenerate


def _correlation(
    one: One, rows: Rows, reference: Sequence[float], scores: Sequence[float], boot: Bootstrap, names: tuple[str, str]
) -> Statistic:
    if len(reference) != len(scores):
        raise ValueError(f"{len(reference)} reference values but {len(scores)} scores")
    why = undefined_correlation(reference, scores, names)
    if why is not None:
        return Statistic(None, undefined=why)
    x, y = np.asarray(reference, dtype=float), np.asarray(scores, dtype=float)
    value = _clip(one(x, y))
    if boot.resamples <= 0:
        return Statistic(value)
    # Resampling pairs (not each side alone) keeps each label with its own judge score.
    picks = np.random.default_rng(boot.seed).integers(0, len(x), size=(boot.resamples, len(x)))
    drawn = rows(x[picks], y[picks])
    usable = drawn[~np.isnan(drawn)]  # a resample with one side constant has no correlation: left out, and counted
    if usable.size == 0:
        return Statistic(value, undefined=None, resamples_used=0)
    tail = (1 - boot.confidence) / 2
    low, high = np.quantile(usable, [tail, 1 - tail])
    return Statistic(value, (_clip(float(low)), _clip(float(high))), resamples_used=int(usable.size))


def _clip(r: float) -> float:
    # Rounding can leave a perfect correlation at 1.0000000000000002.
    return min(1.0, max(-1.0, r))


@cache
def _stats() -> ModuleType:
    # scipy's stats load on the first statistic, not on import: every command line imports this module (through
    # `calibrate` and `compare`), and they alone take about half a second to import (as in alerts/stats.py).
    from scipy import stats

    return stats


def _spearman_one(x: Floats, y: Floats) -> float:
    return float(_stats().spearmanr(x, y).statistic)


def _kendall_one(x: Floats, y: Floats) -> float:
    return float(_stats().kendalltau(x, y, variant="b").statistic)


def _spearman_rows(xs: Floats, ys: Floats) -> Floats:
    # Pearson's r of average ranks, row by row, in one pass: what spearmanr computes for one pair of rows.
    rx = _stats().rankdata(xs, axis=1)
    ry = _stats().rankdata(ys, axis=1)
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    norm = np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))
    out = np.full(len(xs), np.nan)
    ok = norm > 0
    out[ok] = (rx * ry).sum(axis=1)[ok] / norm[ok]
    return out


def _kendall_rows(xs: Floats, ys: Floats) -> Floats:
    out = np.full(len(xs), np.nan)
    for k, (x, y) in enumerate(zip(xs, ys, strict=True)):
        if x.min() != x.max() and y.min() != y.max():  # kendalltau would warn and answer NaN
            out[k] = _kendall_one(x, y)
    return out


def _mae(reference: Sequence[float], scores: Sequence[float]) -> float:
    return float(np.mean(np.abs(np.asarray(reference, dtype=float) - np.asarray(scores, dtype=float))))
