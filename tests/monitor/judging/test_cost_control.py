"""Sampling and cost control in the running pipeline: budget cap, traffic counts, verdict cache."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from monitor.config import Settings
from monitor.devtools.localbroker import LocalBroker
from monitor.judging.budget import Limits, SpendBudget
from monitor.judging.cost_control import judge_spend
from monitor.store.async_store import AsyncStore
from monitor.store.connection import ClickHouseStore
from tests.fake_messages_api import FakeMessagesAPI, Reply
from tests.harness import RunningPipeline, committed_offsets, produce_values, wait_for
from tests.monitor.alerts.conftest import insert, make_row

HOUR_START = 1_795_000_000 - 1_795_000_000 % 3600 + 60  # a fixed clock inside one hour: no rollover mid-test


def events(
    n: int, prefix: str, question: str = "When did order A17 ship?", response: str = "Order A17 shipped on 3 March."
) -> list[bytes]:
    """`n` flat event values, ids `prefix`0.., each in its own conversation, all with the same pair."""
    return [
        json.dumps(
            {
                "event_id": f"{prefix}{i}",
                "conversation_id": f"{prefix}c{i}",
                "app": "support-bot",
                "prompt_version": "v1",
                "user_message": question,
                "response": response,
                "timestamp": "2026-11-29T09:00:00Z",
            }
        ).encode()
        for i in range(n)
    ]


async def committed(broker: LocalBroker, settings: Settings, n: int) -> None:
    """Wait until the group has committed `n` offsets in total."""

    async def done() -> bool:
        c = await committed_offsets(broker.bootstrap, settings.kafka.group_id, settings.kafka.topics[0])
        return sum(v or 0 for v in c.values()) == n

    await wait_for(done, 60, f"{n} offsets committed")


async def test_budget_lowers_the_rate_before_the_cap_and_stops_at_it(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """The budget lowers the recorded sampling rate before the cap and stops judging at it; traffic counts agree."""
    settings = make_settings(budget_requests_per_hour=40, budget_soft_limit=0.5, cache_max_entries=0)
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(300, "b"))
    run = RunningPipeline(settings, async_store)
    p = run.pipeline
    p.cost.budget = SpendBudget(
        p.cost.budget.hour.limits, p.cost.budget.day.limits, soft_limit=0.5, clock=lambda: HOUR_START
    )
    async with run:
        await committed(broker, settings, 300)
    t = async_store.store.qualified_table
    rows = (
        await async_store.query(
            f"SELECT sample_rate, sample_rule FROM {t} FINAL ORDER BY kafka_partition, kafka_offset"
        )
    ).rows
    assert 20 < len(rows) <= 40  # never past the cap
    lowered = [r for r in rows if r[1].endswith(":budget")]
    assert lowered and all(0 < r[0] < 1 for r in lowered)  # the rate fell smoothly before the cap...
    assert p.cost.budget.factor() == 0.0  # ...and judging stopped at it
    assert run.counter("relevancy_monitor_events_not_sampled") == 300 - len(rows)
    traffic = (
        await async_store.query(
            f"SELECT sum(consumed), sum(sampled), sum(not_sampled), sum(dead_lettered) "
            f"FROM {async_store.store.database}.traffic_counts WHERE app = 'support-bot'"
        )
    ).rows[0]
    assert traffic == (300, len(rows), 300 - len(rows), 0)


async def test_budget_sync_counts_other_replicas_spend(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """A second process in the same hour counts the first one's spend and judges only what is left."""
    # a first run spends 30 of 40 requests; a second process starting in the same hour must know
    settings = make_settings(budget_requests_per_hour=40, cache_max_entries=0)
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(30, "x"))
    async with fixed_clock(RunningPipeline(settings, async_store)):
        await committed(broker, settings, 30)
    again = make_settings(
        budget_requests_per_hour=40, cache_max_entries=0, kafka_group_id=settings.kafka.group_id + "-b"
    )
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(100, "y"))
    async with fixed_clock(RunningPipeline(again, async_store)) as second:
        await committed(broker, again, 130)
    # the second process (a new group: it replays x and reads y) knew the first one's 30 requests: 10 were left
    assert 0 < second.counter("relevancy_monitor_events_judged") <= 10
    assert second.pipeline.cost.budget.hour.others.requests >= 30


def fixed_clock(run: RunningPipeline) -> RunningPipeline:
    """Give the pipeline's budget a clock frozen inside one hour (the store's rows all count for it)."""
    b = run.pipeline.cost.budget
    run.pipeline.cost.budget = SpendBudget(
        b.hour.limits, b.day.limits, soft_limit=b.soft_limit, clock=lambda: HOUR_START
    )
    return run


async def test_identical_pairs_reuse_the_verdict(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """Repeated pairs reuse the first verdict as cached rows without tokens or cost; a new pair calls again."""
    settings = make_settings(judge="statements", **fake_messages_api.settings_overrides())
    async with RunningPipeline(settings, async_store) as run:
        await produce_values(broker.bootstrap, settings.kafka.topics[0], events(1, "first"))
        await committed(broker, settings, 1)
        await produce_values(broker.bootstrap, settings.kafka.topics[0], events(20, "dup"))
        await committed(broker, settings, 21)
        await produce_values(
            broker.bootstrap, settings.kafka.topics[0], events(1, "other", response="Order A17 is lost.")
        )
        await committed(broker, settings, 22)
    assert len(fake_messages_api.message_requests) == 2  # one per distinct pair
    t = async_store.store.qualified_table
    dup = (
        await async_store.query(
            f"SELECT count(), min(cached), sum(input_tokens), sum(ifNull(cost_usd, 0)), uniqExact(score) FROM {t} "
            "FINAL WHERE event_id LIKE 'dup%'"
        )
    ).rows[0]
    assert dup[0] == 20 and dup[1] is True and dup[2] == 0 and dup[3] == 0 and dup[4] == 1
    first = (await async_store.query(f"SELECT cached, input_tokens > 0 FROM {t} FINAL WHERE event_id = 'first0'")).rows[
        0
    ]
    assert first == (False, True)
    assert run.counter("relevancy_monitor_verdict_cache_hits") == 20


async def test_lag_lowers_the_sampling_rate_and_rows_record_it(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """A lagging backlog lowers the sampling rate, the rows record it, and the backlog is thinned."""
    from tests.monitor.runtime.test_pipeline import ScriptedJudge

    settings = make_settings(
        freshness_max_lag=100,
        lag_check_s=0.5,
        judge_concurrency=2,
        max_in_flight=20,
        resume_in_flight=5,
        kafka_max_poll_records=10,
        cache_max_entries=0,
    )
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(1500, "f"))
    async with RunningPipeline(settings, async_store, judge=ScriptedJudge(delay_s=0.02)) as run:
        await committed(broker, settings, 1500)
    t = async_store.store.qualified_table
    lowered = (
        await async_store.query(f"SELECT count(), min(sample_rate) FROM {t} FINAL WHERE sample_rule LIKE '%:freshness'")
    ).rows[0]
    assert lowered[0] > 0 and lowered[1] < 0.5  # judged at a lowered, recorded rate
    assert run.counter("relevancy_monitor_events_not_sampled") > 500  # the backlog was thinned instead of judged stale


async def test_identical_pairs_arriving_together_are_judged_once(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """Duplicates arriving while their pair is being judged wait for its verdict: one call per pair."""
    settings = make_settings(judge="statements", **fake_messages_api.settings_overrides())
    fake_messages_api.always(Reply(delay_s=0.5))  # slow enough that every duplicate arrives while the first is judged
    await produce_values(
        broker.bootstrap,
        settings.kafka.topics[0],
        [*events(30, "burst"), *events(5, "other", response="Order A17 is lost.")],
    )
    async with RunningPipeline(settings, async_store) as run:
        await committed(broker, settings, 35)
    assert len(fake_messages_api.message_requests) == 2  # one call per distinct pair, not per event
    t = async_store.store.qualified_table
    got = (
        await async_store.query(
            f"SELECT countIf(NOT cached), countIf(cached), uniqExact(score) FROM {t} FINAL WHERE event_id LIKE 'burst%'"
        )
    ).rows[0]
    assert got == (1, 29, 1)
    assert run.counter("relevancy_monitor_verdict_cache_hits") == 33


async def test_a_failed_leader_lets_waiting_duplicates_judge_for_themselves(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """When the leader's call fails, one waiting duplicate judges again and the others reuse its verdict."""
    settings = make_settings(
        judge="rubric", judge_max_retries=0, judge_event_attempts=1, **fake_messages_api.settings_overrides()
    )
    # The first call fails slowly (an invalid reply, then an invalid correction); later calls succeed.
    fake_messages_api.script(Reply("{not json", delay_s=0.5), Reply("{not json"))
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(4, "f"))
    async with RunningPipeline(settings, async_store):
        await committed(broker, settings, 4)
    rows = (
        await async_store.query(
            f"SELECT status, cached, count() FROM {async_store.store.qualified_table} FINAL GROUP BY status, cached"
        )
    ).rows
    # the leader's own event keeps its error row; one waiting duplicate judged again, the other two reused that
    assert sorted((str(r[0]), bool(r[1]), r[2]) for r in rows) == [
        ("error", False, 1),
        ("ok", False, 1),
        ("ok", True, 2),
    ]
    assert len(fake_messages_api.message_requests) == 3


def test_replayed_rows_spend_none_of_the_live_budget(store: ClickHouseStore) -> None:
    """The live budget's read of the store (`judge_spend`) sums the live consumer's rows only: a replay's spend (capped
    by its own --max-usd) leaves the live sampling rate alone."""
    at = datetime.fromtimestamp(HOUR_START + 60, UTC)
    insert(store, [make_row(at, cost=0.01) for _ in range(3)])
    insert(store, [make_row(at, cost=5.0, replay_run="run-1") for _ in range(4)])
    hour, day = judge_spend(store, HOUR_START, HOUR_START - 3600)
    assert hour.requests == day.requests == 3 and hour.usd == day.usd == pytest.approx(0.03)
    budget = SpendBudget(per_hour=Limits(usd=1.0), per_day=Limits(), clock=lambda: HOUR_START + 120)
    budget.sync(hour=hour, day=day)
    assert budget.factor() == 1.0
