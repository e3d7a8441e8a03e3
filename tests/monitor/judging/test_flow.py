"""Flow-control decisions with a fake clock: AIMD, token buckets, circuit breaker."""

from __future__ import annotations

import asyncio

import pytest

from monitor.judging.flow import AdaptiveLimiter, BreakerState, CircuitBreaker, RateLimiter


class FakeClock:
    """A settable clock starting at 1000 s."""

    def __init__(self) -> None:
        """Start the clock at 1000 s."""
        self.t = 1000.0

    def __call__(self) -> float:
        """The current time."""
        return self.t


async def test_aimd_halves_to_the_floor_and_climbs_back() -> None:
    """Rate limits halve the limit down to the floor, and successes climb it back additively to the ceiling."""
    clock = FakeClock()
    lim = AdaptiveLimiter(ceiling=16, floor=2, clock=clock)
    assert lim.current == 16
    for expected in (8, 4, 2, 2):
        lim.on_rate_limited()
        assert lim.current == expected
        clock.t += lim.window_s  # each signal in a window of its own
    successes = 0
    while lim.current < 16:
        lim.on_success()
        successes += 1
    assert 50 < successes < 200  # additive: about `limit` successes per step
    lim.on_success()
    assert lim.current == 16


async def test_limiter_bounds_concurrency_and_shrinks_live() -> None:
    """The limiter caps concurrent holders at its limit, and a halved limit caps the next work."""
    lim = AdaptiveLimiter(ceiling=4)
    peak = 0

    async def work() -> None:
        nonlocal peak
        async with lim:
            peak = max(peak, lim.active)
            await asyncio.sleep(0.01)

    await asyncio.gather(*(work() for _ in range(20)))
    assert peak == 4
    assert lim.on_rate_limited()
    peak = 0
    await asyncio.gather(*(work() for _ in range(20)))
    assert peak == 2
    assert lim.active == 0 and not lim._waiters


async def test_cancelled_waiters_do_not_leak_slots() -> None:
    """Cancelled waiters, even one just handed the slot, do not leak slots."""
    lim = AdaptiveLimiter(ceiling=1)
    release = asyncio.Event()

    async def hold() -> None:
        async with lim:
            await release.wait()

    holder = asyncio.create_task(hold())
    await asyncio.sleep(0)
    waiters = [asyncio.create_task(hold()) for _ in range(3)]
    await asyncio.sleep(0)
    waiters[0].cancel()
    release.set()
    await holder
    waiters[1].cancel()  # may have just been handed the slot
    await asyncio.gather(*waiters, return_exceptions=True)
    assert lim.active == 0
    async with lim:
        assert lim.active == 1


def test_rate_limiter_requests_and_tokens() -> None:
    """Requests and tokens past a one-second burst are delayed until refilled; no limits never delay."""
    clock = FakeClock()
    rl = RateLimiter(requests_per_minute=120, tokens_per_minute=6000, clock=clock)  # 2 rps, 100 tokens/s
    assert rl.delay_for(10) == 0 and rl.delay_for(10) == 0  # burst of one second
    assert rl.delay_for(10) == pytest.approx(0.5)
    clock.t += 0.5
    assert rl.delay_for(10) == 0
    clock.t += 10
    assert rl.delay_for(100) == 0  # the token burst is 100
    assert rl.delay_for(50) == pytest.approx(0.5)  # one request refilled... tokens need 50/100 s
    unlimited = RateLimiter(None, None, clock=clock)
    assert all(unlimited.delay_for(1e9) == 0 for _ in range(100))


def test_breaker_opens_probes_and_closes() -> None:
    """The breaker opens at the threshold, lets one probe per cooldown, doubles it to a cap, then closes."""
    clock = FakeClock()
    br = CircuitBreaker(threshold=3, cooldown_s=2, max_cooldown_s=5, clock=clock)
    for _ in range(2):
        br.on_failure()
    assert br.state is BreakerState.CLOSED and br.try_enter()
    br.on_success()
    for _ in range(3):
        br.on_failure()
    assert br.state is BreakerState.OPEN and not br.try_enter()
    clock.t += 2
    assert br.try_enter()  # the probe
    assert not br.try_enter()  # only one
    br.on_failure()  # probe failed: reopen, longer
    assert br.state is BreakerState.OPEN and br.cooldown_s == 4
    clock.t += 3.9
    assert not br.try_enter()
    clock.t += 0.1
    assert br.try_enter()
    br.on_failure()
    assert br.cooldown_s == 5  # capped
    clock.t += 5
    assert br.try_enter()
    br.on_success()
    assert br.state is BreakerState.CLOSED and br.cooldown_s == 2 and br.opens == 3


async def test_breaker_wait_releases_when_closed() -> None:
    """wait() on an open breaker gives the first caller the probe; the others wait until it closes."""
    br = CircuitBreaker(threshold=1, cooldown_s=0.1)
    br.on_failure()
    assert br.is_open
    await asyncio.wait_for(br.wait(), 2)  # the probe slot after the cooldown
    waiter = asyncio.create_task(br.wait())
    await asyncio.sleep(0.2)
    assert not waiter.done()  # probe is out: others wait
    br.on_success()
    await asyncio.wait_for(waiter, 1)


async def test_a_cancelled_probe_hands_the_probe_on() -> None:
    """An abandoned probe hands the probe to the next waiter instead of leaving the circuit half-open."""
    br = CircuitBreaker(threshold=1, cooldown_s=0.05)
    br.on_failure()
    assert await asyncio.wait_for(br.wait(), 2) is True  # this caller holds the probe
    second = asyncio.create_task(br.wait())
    await asyncio.sleep(0.2)
    assert not second.done()  # one probe at a time
    br.on_abandoned()  # the probe's call was cancelled (as the pipeline reports it)
    assert await asyncio.wait_for(second, 2) is True  # the next caller probes instead of everyone waiting forever
    br.on_success()
    assert await br.wait() is False  # closed: ordinary callers do not hold a probe
