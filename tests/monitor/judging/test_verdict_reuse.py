"""Verdict reuse: identical pairs wait for one leader's verdict, and a failed or cancelled leader frees them."""

from __future__ import annotations

import asyncio

from monitor.judges.base import JudgeFailure, Judgement
from monitor.judging.verdict_reuse import VerdictCache, VerdictReuse

OK = Judgement(score=1.0, raw_score=1.0, reasoning="r")


async def _returning(value: object, delay: float = 0.01) -> object:
    await asyncio.sleep(delay)
    return value


async def test_followers_get_the_leaders_verdict_and_the_cache_keeps_it() -> None:
    """A follower of a successful leader gets its verdict, and the next identical pair finds it in the cache."""
    reuse = VerdictReuse(VerdictCache(10, 60))
    reuse.lead(b"k", asyncio.create_task(_returning(OK)))
    leader = reuse.leader(b"k")
    assert leader is not None
    assert await reuse.follow(b"k", leader) == OK
    assert reuse.cached(b"k") == OK and reuse.leader(b"k") is None


async def test_a_failed_leader_leaves_followers_to_judge_for_themselves() -> None:
    """A leader ending in a failure caches nothing, and its followers get None (each then judges its own event)."""
    reuse = VerdictReuse(VerdictCache(10, 60))
    reuse.lead(b"k", asyncio.create_task(_returning(JudgeFailure("timeout", "no verdict", transient=True))))
    leader = reuse.leader(b"k")
    assert leader is not None
    assert await reuse.follow(b"k", leader) is None
    assert reuse.cached(b"k") is None and reuse.leader(b"k") is None


async def test_a_leader_cancelled_before_it_ran_still_releases_followers() -> None:
    """A leader task cancelled before its first step (revocation) releases its followers instead of stranding them."""
    reuse = VerdictReuse(VerdictCache(10, 60))
    task = asyncio.create_task(_returning(OK))
    reuse.lead(b"k", task)
    leader = reuse.leader(b"k")
    assert leader is not None
    task.cancel()
    assert await asyncio.wait_for(reuse.follow(b"k", leader), 2) is None


async def test_a_follower_follows_the_next_leader_when_the_first_fails() -> None:
    """When the first leader fails and another pair has already become leader, followers wait for the new one."""
    reuse = VerdictReuse(VerdictCache(10, 60))
    first = asyncio.create_task(_returning(None, delay=0.01))
    reuse.lead(b"k", first)
    leader = reuse.leader(b"k")
    assert leader is not None
    follower = asyncio.create_task(reuse.follow(b"k", leader))
    await first
    reuse.lead(b"k", asyncio.create_task(_returning(OK, delay=0.05)))  # registered before the follower resumes
    assert await asyncio.wait_for(follower, 2) == OK


async def test_a_disabled_cache_disables_reuse() -> None:
    """With the cache off (0 entries) no pair is registered as a leader, so nothing is reused."""
    reuse = VerdictReuse(VerdictCache(0, 60))
    task = asyncio.create_task(_returning(OK))
    reuse.lead(b"k", task)
    assert reuse.leader(b"k") is None
    await task
    assert reuse.cached(b"k") is None
