"""What failed judge calls cost is recorded: on the error rows, and against the spend budget."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from monitor.config import Settings
from monitor.devtools.localbroker import LocalBroker
from monitor.store.async_store import AsyncStore
from tests.conftest import EXAMPLES
from tests.fake_messages_api import FakeMessagesAPI, Reply
from tests.harness import RunningPipeline, committed_offsets, produce_values, wait_for

FLAT = (EXAMPLES / "events-flat.jsonl").read_bytes().splitlines()


async def test_invalid_replies_cost_shows_on_error_rows_and_counts_against_the_budget(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """A judge that keeps replying with invalid JSON still spends tokens: the error rows carry them and the budget
    counts them."""
    fake_messages_api.always(
        Reply(text="this is not the JSON you asked for", usage={"input_tokens": 100, "output_tokens": 40})
    )
    settings = make_settings(
        judge="rubric", judge_max_retries=1, budget_usd_per_day=100.0, **fake_messages_api.settings_overrides()
    )
    topic = settings.kafka.topics[0]
    await produce_values(broker.bootstrap, topic, FLAT)
    async with RunningPipeline(settings, async_store) as run:

        async def all_committed() -> bool:
            return sum(
                v or 0 for v in (await committed_offsets(broker.bootstrap, settings.kafka.group_id, topic)).values()
            ) == len(FLAT)

        await wait_for(all_committed, 60, "every event committed")
        budget_usd = run.pipeline.cost.budget.day.mine.usd
    table = async_store.store.qualified_table
    sql = (
        f"SELECT status, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd FROM {table} "
        "FINAL"
    )
    rows = (await async_store.query(sql)).rows
    assert len(rows) == len(FLAT) and {r[0] for r in rows} == {"error"}
    assert {(r[1], r[2]) for r in rows} == {(200, 80)}  # two attempts of 100 in / 40 out each
    price = settings.judge.price
    assert price is not None
    costs = [price.cost(r[1], r[2], r[3], r[4]) for r in rows]
    assert [r[5] for r in rows] == pytest.approx(costs) and min(costs) > 0
    assert budget_usd == pytest.approx(sum(costs))
