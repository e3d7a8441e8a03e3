"""The hourly budget for judging disliked answers: the cap holds in every sliding hour, and the inclusion probability
is the share of the hour's asks admitted."""

from __future__ import annotations

import bisect
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.feedback.judge_budget import HOUR_S, INCLUSION_FLOOR, HourlyBudget
from tests.properties import examples

# Gaps between asks: bursts (0), seconds, minutes and beyond an hour, so windows fill, slide and empty.
_GAPS = st.lists(
    st.one_of(st.just(0.0), st.floats(0.0, 5.0), st.floats(0.0, 900.0), st.floats(3000.0, 4000.0)),
    min_size=1,
    max_size=300,
)


def _times(gaps: list[float]) -> list[float]:
    return list(itertools.accumulate(gaps, initial=1_000_000.0))[1:]


@settings(max_examples=examples(500))
@given(cap=st.integers(0, 20), gaps=_GAPS)
def test_never_more_than_the_cap_in_any_hour(cap: int, gaps: list[float]) -> None:
    """Whatever the asks' times, no half-open hour [t, t + 3600) holds more than `calls_per_hour` admitted asks."""
    budget = HourlyBudget(cap)
    admitted = [t for t in _times(gaps) if budget.take(t)]
    for i, start in enumerate(admitted):
        inside = bisect.bisect_left(admitted, start + HOUR_S) - i
        assert inside <= cap


@settings(max_examples=examples(500))
@given(cap=st.integers(1, 20), gaps=_GAPS)
def test_an_ask_is_refused_only_when_the_last_hour_is_full(cap: int, gaps: list[float]) -> None:
    """The budget is used, not just capped: an ask is refused only when `cap` asks were admitted in the hour before
    it."""
    budget = HourlyBudget(cap)
    admitted: list[float] = []
    for t in _times(gaps):
        if budget.take(t):
            admitted.append(t)
        else:
            assert sum(1 for a in admitted if a > t - HOUR_S) == cap


@settings(max_examples=examples(500))
@given(cap=st.integers(0, 20), gaps=_GAPS)
def test_inclusion_is_the_share_admitted_over_the_last_hour(cap: int, gaps: list[float]) -> None:
    """After each ask, the inclusion probability is admitted/asked over the last hour (refusals counted by their
    second), 1.0 with no refusal, never below the floor."""
    budget = HourlyBudget(cap)
    asks: list[tuple[float, bool]] = []
    for t in _times(gaps):
        asks.append((t, budget.take(t)))
        p = budget.inclusion(t)
        admitted = sum(1 for a, ok in asks if ok and a > t - HOUR_S)
        # A refused ask counts while any of its whole second is inside the hour.
        refused = sum(1 for a, ok in asks if not ok and int(a // 1) + 1 > t - HOUR_S)
        assert INCLUSION_FLOOR <= p <= 1.0
        if refused == 0:
            assert p == 1.0
        else:
            assert p == pytest.approx(max(INCLUSION_FLOOR, admitted / (admitted + refused)))


def test_a_budget_of_zero_never_admits() -> None:
    """0 calls per hour: every ask is refused, and the share admitted sits at the floor."""
    budget = HourlyBudget(0)
    assert not any(budget.take(float(t)) for t in range(100))
    assert budget.inclusion(100.0) == INCLUSION_FLOOR


def test_the_hour_slides() -> None:
    """Two calls an hour: the third ask within the hour is refused, admitted once the first is an hour old, and the
    refusal stops counting in the inclusion probability an hour later."""
    budget = HourlyBudget(2)
    assert budget.take(0.0) and budget.take(10.0)
    assert not budget.take(20.0)
    assert budget.inclusion(20.0) == pytest.approx(2 / 3)
    assert budget.take(HOUR_S)
    assert budget.inclusion(HOUR_S + 21.0) == 1.0


def test_a_negative_budget_is_refused() -> None:
    """A budget below zero is a caller's mistake, said in one line."""
    with pytest.raises(ValueError, match="0 or more"):
        HourlyBudget(-1)


def test_a_replica_admits_its_share_of_the_deployments_budget_rounded_up() -> None:
    """With a quarter of the partitions a replica admits a quarter of the hour's calls (rounded up), and its whole
    budget again when it owns every partition."""
    budget = HourlyBudget(10)
    budget.set_share(0.25)
    assert [budget.take(float(t)) for t in range(4)] == [True, True, True, False]
    budget.set_share(1.0)
    assert all(budget.take(float(t)) for t in range(4, 11))
    assert not budget.take(11.0)
