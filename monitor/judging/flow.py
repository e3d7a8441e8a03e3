"""Flow control around the judge: adaptive concurrency (AIMD), a client-side rate limit, a circuit breaker.

Each is a small object with its decision logic separate from waiting, so the decisions are testable with a
fake clock. The concurrency and rate limits have two lanes: a `low` caller (the shadow judge) is served only while
no normal caller waits, so a second judge sharing the limits can slow the first by at most the calls it has already
been handed, never queue ahead of it."""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from enum import Enum

from consumers.group_share import GroupShare

Clock = Callable[[], float]


class AdaptiveLimiter:
    """A concurrency limit: additive increase (one slot per `limit` successes, up to `ceiling`), multiplicative
    decrease on a rate-limit signal (down to `floor`), at most once per window of about one call's round-trip
    time, as TCP does: the calls already in flight when the provider pushed back were sent under the old limit,
    so their 429s are one signal, not sixteen. Slots are handed directly to waiters in arrival order, every normal
    waiter before any `low` one (`slot(low=True)`)."""

    def __init__(
        self,
        ceiling: int,
        floor: int = 1,
        decrease_factor: float = 0.5,
        min_window_s: float = 0.5,
        clock: Clock = time.monotonic,
    ) -> None:
        if not 1 <= floor <= ceiling:
            raise ValueError(f"need 1 <= floor <= ceiling, got {floor} and {ceiling}")
        self.ceiling = ceiling
        self.floor = floor
        self.factor = decrease_factor
        self.limit = float(ceiling)
        self.active = 0
        self.decreases = 0
        self._min_window_s = min_window_s
        self._clock = clock
        self._rtt_s: float | None = None
        self._hold_until = -math.inf
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._low_waiters: deque[asyncio.Future[None]] = deque()

    @property
    def current(self) -> int:
        """The whole number of calls allowed at once now."""
        return max(self.floor, int(self.limit))

    @property
    def window_s(self) -> float:
        """How long one decrease holds off the next: the smoothed call round-trip time, at least `min_window_s`."""
        return max(self._min_window_s, self._rtt_s or 0.0)

    def record_latency(self, seconds: float) -> None:
        """One call's round-trip time (smoothed like TCP's SRTT, gain 1/8)."""
        self._rtt_s = seconds if self._rtt_s is None else self._rtt_s + (seconds - self._rtt_s) / 8

    def on_success(self) -> None:
        """One call succeeded without being rate limited."""
        self.limit = min(float(self.ceiling), self.limit + 1.0 / self.limit)
        self._hand_off()

    def on_rate_limited(self) -> bool:
        """The provider said slow down; returns whether the limit was lowered (False within the hold window)."""
        now = self._clock()
        if now < self._hold_until:
            return False
        self.limit = max(float(self.floor), self.limit * self.factor)
        self._hold_until = now + self.window_s
        self.decreases += 1
        return True

    def _hand_off(self) -> None:
        while self.active < self.current and (self._waiters or self._low_waiters):
            waiter = (self._waiters or self._low_waiters).popleft()
            if not waiter.done():
                self.active += 1
                waiter.set_result(None)

    def slot(self, low: bool = False) -> _Slot:
        """One slot as an async context manager; a `low` caller gets one only while no normal caller waits."""
        return _Slot(self, low)

    async def acquire(self, low: bool = False) -> None:
        """Wait for a slot and take it (release it with `release`)."""
        if self.active < self.current and not self._waiters and not (low and self._low_waiters):
            self.active += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        (self._low_waiters if low else self._waiters).append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # handed a slot, then cancelled: give it back
                self.active -= 1
                self._hand_off()
            raise

    def release(self) -> None:
        """Give a slot back (to the next waiter, normal ones first)."""
        self.active -= 1
        self._hand_off()

    async def __aenter__(self) -> AdaptiveLimiter:
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()


class _Slot:
    """`async with limiter.slot(low)`: one slot of `limiter` in the caller's lane."""

    def __init__(self, limiter: AdaptiveLimiter, low: bool) -> None:
        self._limiter = limiter
        self._low = low

    async def __aenter__(self) -> AdaptiveLimiter:
        await self._limiter.acquire(self._low)
        return self._limiter

    async def __aexit__(self, *exc: object) -> None:
        self._limiter.release()


class PriorityLock:
    """A lock handed to waiters in arrival order, every normal waiter before any `low` one."""

    def __init__(self) -> None:
        self._held = False
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._low_waiters: deque[asyncio.Future[None]] = deque()

    @property
    def locked(self) -> bool:
        """Whether someone holds the lock."""
        return self._held

    async def acquire(self, low: bool = False) -> None:
        """Wait until the lock is handed to us."""
        if not self._held and not self._waiters and not self._low_waiters:
            self._held = True
            return
        waiter = asyncio.get_running_loop().create_future()
        (self._low_waiters if low else self._waiters).append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # handed the lock, then cancelled: pass it on
                self.release()
            raise

    def release(self) -> None:
        """Hand the lock to the next waiter (normal ones first), or free it."""
        for queue in (self._waiters, self._low_waiters):
            while queue:
                waiter = queue.popleft()
                if not waiter.done():  # a cancelled waiter is skipped
                    waiter.set_result(None)
                    return
        self._held = False


_NO_SHARE_RECHECK_S = 1.0


class RateLimiter:
    """Token buckets for requests and input tokens per minute (None: unlimited). `acquire` waits for both; waiters
    take their turn in arrival order, every normal one before any `low` one. The limits are the consumer group's:
    `set_share` scales them to this replica's share at each rebalance (a share of 0 lets nothing through)."""

    def __init__(
        self, requests_per_minute: float | None, tokens_per_minute: float | None, clock: Clock = time.monotonic
    ) -> None:
        self._clock = clock
        self._limits = (requests_per_minute, tokens_per_minute)
        self._buckets: list[list[float]] = []  # [capacity, level, refill_per_s, last]
        self._rpm = self._bucket(requests_per_minute)
        self._tpm = self._bucket(tokens_per_minute)
        self._lock = PriorityLock()

    def _bucket(self, per_minute: float | None) -> list[float] | None:
        if per_minute is None:
            return None
        # A burst of one second's worth, so a cold start does not fire a whole minute's budget at once.
        b = [max(1.0, per_minute / 60), max(1.0, per_minute / 60), per_minute / 60, self._clock()]
        self._buckets.append(b)
        return b

    @property
    def requests_per_minute(self) -> float | None:
        """This replica's request limit now (its share of the group's)."""
        return None if self._rpm is None else self._rpm[2] * 60

    def set_share(self, share: GroupShare) -> None:
        """Scale both limits to `share` of the group's: the refill rate exactly, the burst to a second's worth of it
        (at most the level already held, so a rebalance never adds a burst)."""
        for b, limit in ((self._rpm, self._limits[0]), (self._tpm, self._limits[1])):
            if b is None or limit is None:
                continue
            self._refill(b)
            mine = limit * share.fraction
            b[0] = max(1.0, mine / 60) if mine > 0 else 0.0
            b[1] = min(b[1], b[0])
            b[2] = mine / 60

    def _refill(self, b: list[float]) -> None:
        now = self._clock()
        b[1] = min(b[0], b[1] + (now - b[3]) * b[2])
        b[3] = now

    def delay_for(self, tokens: float) -> float:
        """Seconds until one request of `tokens` input tokens fits; 0 if it fits now (then it is taken)."""
        need = [(self._rpm, 1.0), (self._tpm, min(tokens, self._tpm[0]) if self._tpm else 0.0)]
        wait = 0.0
        for b, n in need:
            if b is None:
                continue
            self._refill(b)
            if b[2] <= 0:
                wait = max(wait, _NO_SHARE_RECHECK_S)  # no share of the group's limit: look again after a while
            elif b[1] < n:
                wait = max(wait, (n - b[1]) / b[2])
        if wait == 0.0:
            for b, n in need:
                if b is not None:
                    b[1] -= n
        return wait

    async def acquire(self, tokens: float = 0.0, low: bool = False) -> None:
        """Wait until the request fits under both limits, then take it. A `low` request waits for its turn until no
        normal one is waiting; once its turn has come it is not overtaken (one refill interval at most)."""
        await self._lock.acquire(low)
        try:
            # Sleeping exactly until the bucket refills is the point here: nothing else could signal it sooner.
            while (wait := self.delay_for(tokens)) > 0:  # noqa: ASYNC110
                await asyncio.sleep(wait)
        finally:
            self._lock.release()


class BreakerState(Enum):
    """Circuit breaker states."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    """Opens after `threshold` consecutive failures; while open nobody calls; after `cooldown_s` one probe goes
    through (half-open); its success closes the circuit, its failure reopens it with a doubled cooldown."""

    def __init__(
        self, threshold: int = 5, cooldown_s: float = 2.0, max_cooldown_s: float = 60.0, clock: Clock = time.monotonic
    ) -> None:
        self.threshold = threshold
        self.base_cooldown_s = cooldown_s
        self.max_cooldown_s = max_cooldown_s
        self._clock = clock
        self.state = BreakerState.CLOSED
        self.failures = 0
        self.cooldown_s = cooldown_s
        self.opened_at = 0.0
        self.opens = 0
        self._probe_out = False
        self._changed = asyncio.Event()

    @property
    def is_open(self) -> bool:
        """True while calls are held back (open, or half-open with the probe out)."""
        return self.state is not BreakerState.CLOSED

    def try_enter(self) -> bool:
        """Whether a call may go now; in half-open, only the single probe may."""
        if self.state is BreakerState.CLOSED:
            return True
        if self.state is BreakerState.OPEN and self._clock() - self.opened_at >= self.cooldown_s:
            self.state = BreakerState.HALF_OPEN
        if self.state is BreakerState.HALF_OPEN and not self._probe_out:
            self._probe_out = True
            return True
        return False

    def retry_in(self) -> float:
        """Seconds until the next probe may go."""
        return max(0.0, self.opened_at + self.cooldown_s - self._clock())

    def on_success(self) -> None:
        """A call succeeded: close (and reset the cooldown)."""
        was_open = self.is_open
        self.failures = 0
        self.state = BreakerState.CLOSED
        self.cooldown_s = self.base_cooldown_s
        self._probe_out = False
        if was_open:
            self._changed.set()

    def on_failure(self) -> None:
        """A call failed transiently."""
        self.failures += 1
        if self.state is BreakerState.HALF_OPEN:
            self.cooldown_s = min(self.max_cooldown_s, self.cooldown_s * 2)
            self._open()
        elif self.state is BreakerState.CLOSED and self.failures >= self.threshold:
            self._open()

    def on_abandoned(self) -> None:
        """The probe ended without a verdict on the judge's health (cancelled): let another probe go."""
        if self.state is BreakerState.HALF_OPEN:
            self._probe_out = False

    def _open(self) -> None:
        self.state = BreakerState.OPEN
        self.opened_at = self._clock()
        self._probe_out = False
        self.opens += 1
        self._changed = asyncio.Event()

    async def wait_closed(self) -> None:
        """Wait until the circuit is closed, without ever taking the probe: for calls (the shadow judge's) whose
        outcome must not decide the circuit's state."""
        while self.is_open:
            changed = self._changed
            try:
                await asyncio.wait_for(changed.wait(), timeout=max(0.05, self.retry_in()))
            except TimeoutError:
                pass

    async def wait(self) -> bool:
        """Wait until a call may go (at once while closed). True when this caller holds the half-open probe: it
        must then report `on_success`, `on_failure` or `on_abandoned`, or no other probe can ever go."""
        while not self.try_enter():
            changed = self._changed
            try:
                await asyncio.wait_for(changed.wait(), timeout=max(0.05, self.retry_in()))
            except TimeoutError:
                pass
        return self.state is BreakerState.HALF_OPEN
