"""A canary run's figures and its schedule: pure, no store, no judge."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from monitor.canary.figures import run_figures
from monitor.canary.schedule import is_due, next_due

LABELS = [0.0, 0.25, 0.5, 0.75, 1.0, 0.5, 0.25, 1.0]
T0 = datetime(2026, 11, 2, tzinfo=UTC)


def test_a_judge_that_matches_the_labels_agrees_perfectly() -> None:
    """Scores equal to the labels: ρ 1, κ 1, mean shift 0, no errors."""
    f = run_figures([(x, x) for x in LABELS], len(LABELS))
    assert f.spearman == pytest.approx(1.0) and f.kappa == pytest.approx(1.0)
    assert (f.mean_shift, f.errors, f.error_rate) == (0.0, 0, 0.0)


def test_a_uniform_shift_keeps_the_ranks_and_moves_the_mean_shift_and_kappa() -> None:
    """Every score a rubric point lower: ρ barely moves, κ falls and the mean shift is about −0.25 (why both are
    watched)."""
    f = run_figures([(x, max(0.0, x - 0.25)) for x in LABELS], len(LABELS))
    assert f.spearman is not None and f.spearman > 0.95
    assert f.kappa is not None and f.kappa < 0.9
    assert f.mean_shift == pytest.approx(-0.25 + 0.25 / len(LABELS))  # the label 0 cannot go lower


def test_undefined_figures_are_none_never_a_made_up_zero() -> None:
    """A judge that gives one score to everything has no ρ; a run without a scored pair has no figures; errors count."""
    constant = run_figures([(x, 0.5) for x in LABELS], len(LABELS) + 2)
    assert constant.spearman is None and constant.kappa == pytest.approx(0.0) and constant.errors == 2
    assert constant.error_rate == pytest.approx(2 / 10)
    nothing = run_figures([], 5)
    assert (nothing.spearman, nothing.kappa, nothing.mean_shift, nothing.error_rate) == (None, None, None, 1.0)


def test_the_next_run_is_an_interval_after_the_later_of_the_stored_and_the_started_run() -> None:
    """No run known: due at once; else an interval after the last stored run or the last start, whichever is later."""
    hour = timedelta(hours=1)
    assert next_due(None, None, hour) is None and is_due(T0, None)
    assert next_due(T0, None, hour) == T0 + hour
    assert next_due(T0, T0 + timedelta(minutes=20), hour) == T0 + timedelta(minutes=80)  # a run that never got written
    assert next_due(T0 + timedelta(minutes=30), T0, hour) == T0 + timedelta(minutes=90)  # another replica ran one since
    assert not is_due(T0 + timedelta(minutes=59, seconds=59), T0 + hour) and is_due(T0 + hour, T0 + hour)
