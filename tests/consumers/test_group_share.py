"""A replica's share of the group's judge quota and per-segment minimum: its partitions over all, at each rebalance."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import TopicPartition

from consumers.group_share import WHOLE, GroupShare, share_of
from consumers.sampling import DecisionKind, MinPerSegment, Sampler, SamplingPolicy
from monitor.judging.flow import RateLimiter
from tests.monitor.privacy.events import event


def tps(topic: str, *partitions: int) -> set[TopicPartition]:
    """Partitions of one topic."""
    return {TopicPartition(topic, p) for p in partitions}


def test_the_share_is_the_partitions_held_over_all_of_the_topics() -> None:
    """3 of 12 partitions is a quarter; partitions of a topic not consumed do not count; none is no share."""
    assert share_of(tps("a", 0, 1) | tps("b", 5), {"a": 8, "b": 4}).fraction == pytest.approx(0.25)
    assert share_of(tps("a", 0) | tps("other", 1), {"a": 4}).fraction == pytest.approx(0.25)
    assert share_of(set(), {"a": 4}).fraction == 0.0 and GroupShare(2, 0).fraction == 0.0
    assert GroupShare(1, 4).of(600.0) == 150.0 and GroupShare(1, 4).of(None) is None and WHOLE.fraction == 1.0


def test_shares_of_a_settled_group_add_up_to_the_group_limit() -> None:
    """However 12 partitions are split over 5 replicas, their request limits add up to the group's."""
    split = [tps("t", 0, 1, 2), tps("t", 3, 4, 5), tps("t", 6, 7), tps("t", 8, 9), tps("t", 10, 11)]
    limits = []
    for assigned in split:
        rate = RateLimiter(600.0, None)
        rate.set_share(share_of(assigned, {"t": 12}))
        limits.append(rate.requests_per_minute or 0.0)
    assert sum(limits) == pytest.approx(600.0)


def test_a_replica_without_partitions_lets_no_request_through_until_it_gets_some() -> None:
    """Share 0: every request waits; share back: the limiter refills at the share's rate, with no extra burst."""
    now = [0.0]
    rate = RateLimiter(600.0, 60_000.0, clock=lambda: now[0])
    rate.set_share(GroupShare(0, 4))
    now[0] += 30.0
    assert rate.delay_for(100) > 0 and rate.requests_per_minute == 0.0
    rate.set_share(GroupShare(1, 4))  # 150 a minute: 2.5 a second, a burst of 2.5
    assert rate.delay_for(100) > 0  # nothing was banked while the share was 0
    now[0] += 1.0
    taken = 0
    while rate.delay_for(100) == 0:
        taken += 1
    assert taken == 2


async def test_a_replica_with_no_share_waits_instead_of_calling() -> None:
    """`acquire` under share 0 does not return until a share is given."""
    rate = RateLimiter(6000.0, None)
    rate.set_share(GroupShare(0, 2))
    waiter = asyncio.create_task(rate.acquire())
    await asyncio.sleep(0.05)
    assert not waiter.done()
    rate.set_share(GroupShare(1, 2))
    await asyncio.wait_for(waiter, 3)


def test_the_per_segment_minimum_is_the_groups() -> None:
    """min_per_minute 30 over 4 replicas: each judges 8 a minute (30/4, up), none without partitions."""
    policy = SamplingPolicy(default_rate=0.0, min_per_segment=MinPerSegment(min_per_minute=30, segment_by=["app"]))
    judged = []
    for share in (GroupShare(3, 12), GroupShare(0, 12), WHOLE):
        sampler = Sampler(policy)
        sampler.set_share(share)
        decisions = [sampler.decide(event(event_id=f"e{i}"), now=120.0 + i * 0.1) for i in range(100)]
        assert all(d.kind is DecisionKind.MIN_PER_SEGMENT for d in decisions if d.sampled)
        judged.append(sum(d.sampled for d in decisions))
    assert judged == [8, 0, 30]


def test_a_small_share_of_a_low_minimum_counts_over_a_longer_window() -> None:
    """2 a minute over 12 replicas is one event every 6 minutes per replica: the window grows, never to 0 events."""
    mps = MinPerSegment(min_per_minute=2)
    assert mps.window_seconds(1 / 12) == pytest.approx(360.0) and mps.events_per_window(1 / 12) == 1
    assert mps.events_per_window(0.0) == 0 and MinPerSegment(events_per_replica=5).events_per_window(0.1) == 5
