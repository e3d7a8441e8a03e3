"""A run's figures from its pairs (pure): the calibration's statistics, without bootstrap intervals (one number per
run is what the alert rules compare; the spread between runs of one judge is their baseline)."""

from __future__ import annotations

from collections.abc import Sequence

from monitor.calibration.agreement import Bootstrap, bucket, spearman, weighted_kappa
from monitor.canary.model import RunFigures

_NO_BOOTSTRAP = Bootstrap(resamples=0)


def run_figures(scored: Sequence[tuple[float, float]], pairs: int) -> RunFigures:
    """The figures of a run of `pairs` pairs whose scored ones are `scored`: (label on 0..1, score) each."""
    labels = [label for label, _ in scored]
    scores = [score for _, score in scored]
    rho = spearman(labels, scores, _NO_BOOTSTRAP).value
    kappa = weighted_kappa([bucket(x) for x in labels], [bucket(x) for x in scores]).value
    shift = (sum(scores) - sum(labels)) / len(scored) if scored else None
    return RunFigures(pairs=pairs, errors=pairs - len(scored), spearman=rho, kappa=kappa, mean_shift=shift)
