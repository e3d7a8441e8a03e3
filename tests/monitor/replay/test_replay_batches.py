"""`replay --batch-api`: history scored through the Message Batches API of the fake, on the real SDK."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from consumers.time_range import TimeRange
from monitor.config import Settings
from monitor.devtools.localbroker import LocalBroker
from monitor.judges.batches import custom_id_for
from monitor.judges.factory import build_judge
from monitor.judges.pricing import DEFAULT_PRICES
from monitor.replay.records import BATCHES_TABLE
from monitor.replay.run import Replay, ReplayOptions, Snapshot
from monitor.store.async_store import AsyncStore
from schemas.errors import ReplayRefused
from tests.fake_messages_api import FakeMessagesAPI, expired
from tests.harness import count_rows, produce_values
from tests.monitor.replay.conftest import RecordedView, events, minutes_ago, ms, replay


async def _batch_states(store: AsyncStore) -> dict[str, str]:
    rows = (await store.query(f"SELECT batch_id, state FROM {store.store.database}.{BATCHES_TABLE} FINAL")).rows
    return {str(b): str(s) for b, s in rows}


async def test_a_batch_replay_scores_every_event_at_half_price(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """12 events in batches of 5 go out as three batches, not one call each; every event gets a row of the run whose
    cost is half the one-call price; every batch is recorded as written."""
    fake_messages_api.batch_processing(0.1)
    settings = make_settings(judge="rubric", **fake_messages_api.settings_overrides())
    at = minutes_ago(20)
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(12, "b", at), timestamp_ms=ms(at))
    since, until = at - timedelta(minutes=1), at + timedelta(minutes=1)

    outcome = await replay(
        settings, async_store, since, until, yes=True, batch_api=True, batch_size=5, batch_poll_s=0.05
    )

    assert outcome.status == "finished"
    assert outcome.tally.scored == 12
    assert len(fake_messages_api.batch_calls("create")) == 3
    assert fake_messages_api.message_requests == []
    states = await _batch_states(async_store)
    assert len(states) == 3 and set(states.values()) == {"written"}
    rows = (
        await async_store.query(
            f"SELECT cost_usd, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens FROM "
            f"{async_store.store.qualified_table} FINAL"
        )
    ).rows
    price = DEFAULT_PRICES[settings.judge.model]
    assert all(cost == pytest.approx(price.cost(*tokens) / 2) for cost, *tokens in rows)
    assert all(cost > 0 for cost, *_ in rows)


async def test_a_transient_failure_in_a_batch_goes_into_a_later_batch(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """A request that expired in its batch is sent again in the next one and ends in an ok row."""
    fake_messages_api.batch_processing(0.05)
    settings = make_settings(judge="rubric", **fake_messages_api.settings_overrides())
    judge_id = build_judge(settings.judge).info.judge_id
    fake_messages_api.batch_outcome(custom_id_for(judge_id, "t2"), expired())
    at = minutes_ago(20)
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(4, "t", at), timestamp_ms=ms(at))

    outcome = await replay(
        settings,
        async_store,
        at - timedelta(minutes=1),
        at + timedelta(minutes=1),
        yes=True,
        batch_api=True,
        batch_poll_s=0.05,
    )

    assert outcome.tally.scored == 4 and outcome.tally.failed == 0
    assert len(fake_messages_api.batch_calls("create")) == 2
    assert [r.custom_id for r in fake_messages_api.batch_requests].count(custom_id_for(judge_id, "t2")) == 2


async def test_an_interrupted_batch_replay_is_collected_by_the_next_run_without_paying_again(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """Interrupted while its batch is processing, the replay leaves it recorded as submitted; the resumed run waits
    for it, writes its results as rows and sends no request for those events again."""
    fake_messages_api.batch_processing(None)  # ends only when the test says so
    settings = make_settings(judge="rubric", **fake_messages_api.settings_overrides())
    at = minutes_ago(20)
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(6, "k", at), timestamp_ms=ms(at))
    since, until = at - timedelta(minutes=1), at + timedelta(minutes=1)
    judge = build_judge(settings.judge)

    class StopOnceSent(RecordedView):
        def progress(self, snapshot: Snapshot) -> None:
            super().progress(snapshot)
            if fake_messages_api.batch_calls("create"):
                run.stop.set()

    options = ReplayOptions(span=TimeRange(since, until), yes=True, batch_api=True, batch_poll_s=0.05)
    run = Replay(settings, options, judge, async_store, StopOnceSent())
    try:
        interrupted = await run.run()
    finally:
        await judge.aclose()

    assert interrupted.status == "interrupted"
    assert interrupted.left_in_batches == 6
    assert await count_rows(async_store) == 0
    assert set((await _batch_states(async_store)).values()) == {"submitted"}

    fake_messages_api.end_batch()
    resumed = await replay(
        settings, async_store, since, until, yes=True, batch_api=True, resume=True, batch_poll_s=0.05
    )

    assert resumed.status == "finished"
    assert resumed.tally.scored == 6
    assert len(fake_messages_api.batch_calls("create")) == 1
    assert set((await _batch_states(async_store)).values()) == {"written"}


@pytest.mark.parametrize("provider", ["openai", "azure_openai"])
async def test_batch_api_is_refused_in_one_line_for_a_provider_without_message_batches(
    make_settings: Callable[..., Settings], async_store: AsyncStore, provider: str
) -> None:
    """`replay --batch-api` with an OpenAI-compatible judge stops before reading anything, in one line naming the
    provider; nothing is sent (the endpoint does not even exist)."""
    settings = make_settings(
        judge="rubric",
        judge_provider=provider,
        judge_model="gpt-test",
        judge_base_url="http://127.0.0.1:9/v1",
        judge_api_key="k",
    )
    at = minutes_ago(20)
    with pytest.raises(ReplayRefused, match=f"the {provider} provider has none here") as exc:
        await replay(settings, async_store, at - timedelta(minutes=1), at, yes=True, batch_api=True)
    assert "\n" not in str(exc.value)
