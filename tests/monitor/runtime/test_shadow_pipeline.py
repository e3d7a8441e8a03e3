"""The shadow judge end to end, through the real broker, chDB and the fake Messages API: its rows beside the
primary's for a deterministic sub-sample, one budget for both, failures that stay the shadow's, and offsets that
wait for both rows of a shadowed record."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from consumers.sampling import shadow_point
from monitor.config import Settings
from monitor.devtools.localbroker import LocalBroker
from monitor.judging.budget import SpendBudget
from monitor.judging.cost_control import judge_spend
from monitor.store.async_store import AsyncStore
from tests.fake_messages_api import FakeMessagesAPI, Reply, overloaded
from tests.harness import RunningPipeline, committed_offsets, count_rows, produce_values, wait_for

HOUR_START = 1_795_000_000 - 1_795_000_000 % 3600 + 60  # a fixed clock inside one hour: no rollover mid-test
RESPONSES = (
    "Order A17 shipped on 3 March.",
    "Thanks for getting in touch. We also sell gift cards. Order A17 shipped on 3 March.",
    "We are open from nine to five.",
)


def events(n: int, prefix: str) -> list[bytes]:
    """`n` flat events, each in its own conversation, with varied responses to one question."""
    return [
        json.dumps(
            {
                "event_id": f"{prefix}{i}",
                "conversation_id": f"{prefix}c{i}",
                "app": "support-bot",
                "model": "assistant-large",
                "prompt_version": "v1",
                "metadata": {"locale": "en-GB"},
                "user_message": f"When did order A17 ship? (ticket {i})",
                "response": RESPONSES[i % len(RESPONSES)],
                "timestamp": "2026-11-29T09:00:00Z",
            }
        ).encode()
        for i in range(n)
    ]


def shadowed(n: int, prefix: str, rate: float) -> set[str]:
    """The event ids the shadow judges at `rate` when the primary judges everything (by conversation id)."""
    return {f"{prefix}{i}" for i in range(n) if shadow_point(f"{prefix}c{i}") < rate}


async def committed(broker: LocalBroker, settings: Settings, n: int) -> None:
    """Wait until the group has committed `n` offsets in total."""

    async def done() -> bool:
        c = await committed_offsets(broker.bootstrap, settings.kafka.group_id, settings.kafka.topics[0])
        return sum(v or 0 for v in c.values()) == n

    await wait_for(done, 60, f"{n} offsets committed")


async def test_shadow_rows_sit_beside_the_primary_rows_for_a_deterministic_sub_sample(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """The salted sub-sample gets a statements row beside each lexical row, with the same event fields, `shadow:`
    rule, the product rate, its own judge_id and cost; the shadow's counters and cost are exported apart."""
    n, rate = 60, 0.3
    settings = make_settings(
        sample_rate=1.0, shadow_judge="statements", shadow_sample_rate=rate, **fake_messages_api.settings_overrides()
    )
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(n, "s"))
    async with RunningPipeline(settings, async_store) as run:
        await committed(broker, settings, n)
    p = run.pipeline
    assert p.shadow is not None
    primary_id, shadow_id = p.guard.judge.info.judge_id, p.shadow.guard.judge.info.judge_id
    expected = shadowed(n, "s", rate)
    assert 5 < len(expected) < 30  # a sub-sample, neither nothing nor everything
    t = async_store.store.qualified_table
    cols = (
        "event_id, conversation_id, event_time, app, model, prompt_version, metadata, kafka_topic, kafka_partition, "
        "kafka_offset, question"
    )
    primary = {
        r[0]: r
        for r in (
            await async_store.query(f"SELECT {cols} FROM {t} FINAL WHERE judge_id = {{j:String}}", {"j": primary_id})
        ).rows
    }
    shadow = {
        r[0]: r
        for r in (
            await async_store.query(
                f"SELECT {cols}, judge, sample_rule, sample_rate, status, cost_usd FROM {t} FINAL WHERE judge_id = "
                f"{{j:String}}",
                {"j": shadow_id},
            )
        ).rows
    }
    assert len(primary) == n and set(shadow) == expected
    for event_id, row in shadow.items():
        assert row[:11] == primary[event_id]  # the same event fields, question and Kafka position
        assert row[11:15] == ("statements", "shadow:base", pytest.approx(rate), "ok") and row[15] > 0
    assert await count_rows(async_store, "NOT startsWith(sample_rule, 'shadow:')") == n  # the primary rows are unmarked
    assert len(fake_messages_api.message_requests) == len(expected)  # the lexical primary calls no API
    assert run.counter("relevancy_monitor_events_judged") == n
    assert run.counter("relevancy_monitor_shadow_rows", judge="statements", status="ok") == len(expected)
    assert run.counter("relevancy_monitor_shadow_cost_usd", judge="statements") == pytest.approx(
        sum(r[15] for r in shadow.values())
    )
    assert run.counter("relevancy_monitor_shadow_judge_api_requests", judge="statements") == len(expected)


async def test_shadow_off_by_default_writes_nothing_extra(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """Without MONITOR_SHADOW_JUDGE every judged event has one row, of one judge, and no shadow counter moves."""
    settings = make_settings()
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(30, "d"))
    async with RunningPipeline(settings, async_store) as run:
        await committed(broker, settings, 30)
    assert run.pipeline.shadow is None
    t = async_store.store.qualified_table
    assert (
        await async_store.query(
            f"SELECT count(), uniqExact(judge_id), countIf(startsWith(sample_rule, 'shadow')) FROM {t}"
        )
    ).rows[0] == (
        30,
        1,
        0,
    )
    assert run.counter("relevancy_monitor_shadow_rows") == 0 and len(run.pipeline.owed) == 0


async def test_one_budget_for_both_judges_stops_both_at_the_cap(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """Primary and shadow calls count against the same request cap: together they never pass it, and at it both stop."""
    settings = make_settings(
        budget_requests_per_hour=40,
        budget_soft_limit=0.5,
        cache_max_entries=0,
        shadow_judge="statements",
        shadow_sample_rate=1.0,
        **fake_messages_api.settings_overrides(),
    )
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(300, "b"))
    run = RunningPipeline(settings, async_store)
    p = run.pipeline
    p.cost.budget = SpendBudget(
        p.cost.budget.hour.limits, p.cost.budget.day.limits, soft_limit=0.5, clock=lambda: HOUR_START
    )
    async with run:
        await committed(broker, settings, 300)
    assert p.shadow is not None
    t = async_store.store.qualified_table
    primary_rows, shadow_rows = (
        await async_store.query(
            f"SELECT countIf(judge_id = {{a:String}}), countIf(judge_id = {{b:String}}) FROM {t} FINAL",
            {"a": p.guard.judge.info.judge_id, "b": p.shadow.guard.judge.info.judge_id},
        )
    ).rows[0]
    assert shadow_rows > 0 and primary_rows + shadow_rows <= 40  # both judges' calls under the one cap
    assert primary_rows < 40  # the shadow's calls took part of the primary's budget
    assert p.cost.budget.factor() == 0.0 and p.cost.budget.hour.mine.requests == primary_rows + shadow_rows
    hour, _ = await async_store.call(lambda s: judge_spend(s, 0.0, 0.0))  # every row written, whatever the clock
    assert hour.requests == primary_rows + shadow_rows  # what other replicas read from the store counts the shadow too
    assert run.counter("relevancy_monitor_events_not_sampled") == 300 - primary_rows


async def test_a_failing_shadow_gives_error_rows_and_leaves_the_primary_rows_circuit_and_offsets_alone(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """A shadow whose API keeps answering 529 ends each shadowed event in an error row after its attempts; every
    primary row is ok, the shared circuit never opens, and every offset is committed."""
    n, rate = 60, 0.4
    settings = make_settings(
        shadow_judge="rubric",
        shadow_sample_rate=rate,
        judge_max_retries=0,
        judge_event_attempts=2,
        breaker_threshold=2,
        **fake_messages_api.settings_overrides(),
    )
    fake_messages_api.always(overloaded())
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(n, "f"))
    async with RunningPipeline(settings, async_store) as run:
        await committed(broker, settings, n)
    p = run.pipeline
    assert p.shadow is not None
    expected = shadowed(n, "f", rate)
    t = async_store.store.qualified_table
    rows = (
        await async_store.query(
            f"SELECT judge, status, count(), countIf(error LIKE 'unavailable%') FROM {t} FINAL GROUP BY ALL ORDER BY "
            "ALL"
        )
    ).rows
    assert rows == [("lexical", "ok", n, 0), ("rubric", "error", len(expected), len(expected))]
    assert len(fake_messages_api.message_requests) == 2 * len(
        expected
    )  # judge_event_attempts calls each, then the error row
    assert p.guard.breaker.opens == 0  # over 20 failures against a threshold of 2: the shadow's never steer the circuit
    assert run.counter("relevancy_monitor_shadow_rows", status="error") == len(expected)
    assert run.counter("relevancy_monitor_judge_errors") == 0  # the primary's error counter stays the primary's
    assert len(p.owed) == 0


@pytest.mark.long(seconds=17)
@pytest.mark.slow
async def test_a_shadow_still_judging_at_shutdown_holds_its_offset_and_both_rows_come_on_redelivery(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """The primary rows are written while the shadow's calls hang; a stop before they answer commits each partition
    only up to its first shadowed record; the next run re-judges from there and both rows of every record exist."""
    n, rate = 45, 0.25
    settings = make_settings(
        shadow_judge="statements",
        shadow_sample_rate=rate,
        shutdown_grace_s=0.5,
        **fake_messages_api.settings_overrides(),
    )
    fake_messages_api.always(Reply(delay_s=30))  # the shadow's calls outlast the grace period
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(n, "r"))
    expected = shadowed(n, "r", rate)
    t = async_store.store.qualified_table
    async with RunningPipeline(settings, async_store) as first:
        await wait_for(
            lambda: _rows(async_store, "judge = 'lexical'", n), 60, "every primary row, while the shadow calls hang"
        )
        assert await count_rows(async_store, "judge = 'statements'") == 0
    assert first.pipeline.shadow is not None
    positions = (
        await async_store.query(
            f"SELECT event_id, kafka_partition, kafka_offset FROM {t} FINAL WHERE judge = 'lexical'"
        )
    ).rows
    want: dict[int, int] = {}
    for partition in {r[1] for r in positions}:
        mine = [r for r in positions if r[1] == partition]
        held = [r[2] for r in mine if r[0] in expected]
        want[partition] = min(held) if held else max(r[2] for r in mine) + 1
    got = await committed_offsets(broker.bootstrap, settings.kafka.group_id, settings.kafka.topics[0])
    assert {p: got[p] for p in want} == want  # nothing committed past a record still owing its shadow row

    fake_messages_api.always(Reply())
    async with RunningPipeline(settings, async_store):
        await committed(broker, settings, n)
    shadow_ids = {
        r[0] for r in (await async_store.query(f"SELECT event_id FROM {t} FINAL WHERE judge = 'statements'")).rows
    }
    assert shadow_ids == expected and await count_rows(async_store, "judge = 'lexical'") == n
    redelivered = sum(n_p - want[p] for p, n_p in _ends(positions).items())
    assert (
        await count_rows(async_store, "judge = 'lexical'", final=False) == n + redelivered
    )  # re-judged, collapsed by FINAL


async def _rows(store: AsyncStore, where: str, n: int) -> bool:
    return await count_rows(store, where) >= n


def _ends(positions: list[tuple[object, ...]]) -> dict[int, int]:
    """One past the last offset of each partition."""
    ends: dict[int, int] = {}
    for _, partition, offset in positions:
        assert isinstance(partition, int) and isinstance(offset, int)
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    return ends
