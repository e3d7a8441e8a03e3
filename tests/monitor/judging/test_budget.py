"""Spend budget, freshness governor and verdict cache: pure decisions with a fake clock."""

from __future__ import annotations

import pytest

from monitor.judges.base import Judgement
from monitor.judging.budget import FreshnessGovernor, Limits, Spend, SpendBudget
from monitor.judging.verdict_reuse import VerdictCache, cache_key
from schemas.events import Turn


class Clock:
    """A settable clock for the budget and the verdict cache."""

    def __init__(self, t: float) -> None:
        """Start the clock at `t`."""
        self.t = t

    def __call__(self) -> float:
        """The current time."""
        return self.t


def test_rate_lowers_smoothly_before_the_cap_and_stops_at_it() -> None:
    """Past the soft limit the factor falls step by step to 0 at the cap; the next hour restores it."""
    clock = Clock(7200.0)  # the start of an hour
    b = SpendBudget(per_hour=Limits(usd=10.0), per_day=Limits(), soft_limit=0.8, clock=clock)
    factors = []
    for _ in range(20):
        factors.append(b.factor())
        b.record(Spend(requests=1, usd=0.55))
    assert factors[:15] == [1.0] * 15  # under 8 USD
    lowering = factors[15:19]
    assert all(0 < f < 1 for f in lowering) and lowering == sorted(lowering, reverse=True)
    assert b.factor() == 0.0 and b.used() >= 1.0
    clock.t += 3600  # the next hour: judging resumes
    assert b.factor() == 1.0


def test_day_cap_and_requests_cap_and_sync() -> None:
    """Hour and day caps on requests and tokens apply, and sync adds others' spend without double counting ours."""
    clock = Clock(86400.0 * 3 + 100)
    b = SpendBudget(per_hour=Limits(requests=100), per_day=Limits(tokens=1000), clock=clock)
    b.record(Spend(requests=10, tokens=990))
    assert 0 < b.factor() < 1  # the day's token cap is nearly used
    b.written(Spend(requests=4, tokens=400))  # part of it reached the store
    b.sync(hour=Spend(requests=4, tokens=400), day=Spend(requests=4, tokens=400))  # ...and the store has only ours
    assert b.hour.spent == Spend(requests=10, tokens=990)  # nothing counted twice, nothing in flight forgotten
    b.sync(hour=Spend(requests=94), day=Spend(requests=94, tokens=400))  # another replica made 90 calls this hour
    assert b.hour.spent.requests == 100 and b.factor() == 0.0
    clock.t += 3600  # a new hour; the day's token cap (990 of 1000) still holds the rate down
    assert b.factor() == pytest.approx((1 - 0.99) / 0.2)
    clock.t += 86400
    assert b.factor() == 1.0
    assert not SpendBudget(Limits(), Limits()).enabled and b.enabled


def test_freshness_halves_under_pressure_and_recovers() -> None:
    """Lag past the max halves the factor to its floor, a throttled judge holds it, low lag doubles it back."""
    g = FreshnessGovernor(max_lag=1000, min_factor=0.1)
    assert g.update(lag=10, throttled=False) == 1.0
    assert [g.update(lag=5000, throttled=False) for _ in range(5)] == [0.5, 0.25, 0.125, 0.1, 0.1]
    assert g.update(lag=800, throttled=False) == 0.1  # between half and max: hold
    assert g.update(lag=100, throttled=True) == 0.1  # throttled judge counts as pressure
    assert [g.update(lag=100, throttled=False) for _ in range(4)] == [0.2, 0.4, 0.8, 1.0]


def pair_key(judge_id: str, question: str, response: str) -> bytes:
    """The reuse key of a pair without context (a flat event, a first turn)."""
    return cache_key(judge_id, question, response, context=(), system="")


def test_cache_ttl_lru_and_keys() -> None:
    """The verdict cache evicts the least recently used entry, expires by TTL, and keys every field apart."""
    clock = Clock(0.0)
    c = VerdictCache(max_entries=2, ttl_s=10, clock=clock)
    j = Judgement(score=1.0, raw_score=4, reasoning="ok")
    k1, k2, k3 = pair_key("j", "q", "a"), pair_key("j", "q", "b"), pair_key("j2", "q", "a")
    assert len({k1, k2, k3, pair_key("j", "qa", ""), pair_key("j", "q", "a ")}) == 5
    c.put(k1, j)
    c.put(k2, j)
    assert c.get(k1) is j
    c.put(k3, j)  # evicts k2, the least recently used
    assert c.get(k2) is None and c.get(k3) is j
    clock.t = 11
    assert c.get(k1) is None
    assert VerdictCache(0, 10).get(k1) is None


@pytest.mark.parametrize("soft", [0.0, 1.5])
def test_soft_limit_validated(soft: float) -> None:
    """A soft limit of 0 or above 1 is rejected."""
    with pytest.raises(ValueError):
        SpendBudget(Limits(), Limits(), soft_limit=soft)


def test_reuse_key_differs_by_context_and_system() -> None:
    """The same answer to the same follow-up in another conversation (other earlier turns, other system
    instructions) is another question, so another key; the same conversation gives the same key, and the turns'
    boundaries and roles cannot collide."""
    first = (Turn("user", "Which kettles ship to Spain?"), Turn("assistant", "The blue and the steel kettle."))
    other = (Turn("user", "Which toasters ship to Spain?"), Turn("assistant", "The red and the steel toaster."))

    def key(context: tuple[Turn, ...] = first, system: str = "") -> bytes:
        return cache_key("j", "How long does the second one take?", "About four days.", context=context, system=system)

    assert key() == key(first) == key(tuple(first))
    keys = {
        key(),
        key(other),
        key(()),
        key(first[1:]),
        key(system="You sell kettles."),
        key(system="You sell toasters."),
        key((Turn("assistant", "Which kettles ship to Spain?"), first[1])),  # another role
        key((Turn("user", "Which kettles ship to Spain?The blue"), Turn("assistant", " and the steel kettle."))),
        key((first[1],), system="Which kettles ship to Spain?"),  # a turn's text moved to the instructions
    }
    assert len(keys) == 9
    assert key(()) == pair_key("j", "How long does the second one take?", "About four days.")
