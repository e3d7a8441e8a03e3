"""`replay --from-store`: re-scoring the text already in the store with another judge, for history the topics lost."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from monitor.config import Settings
from monitor.devtools.localbroker import LocalBroker
from monitor.store.async_store import AsyncStore
from schemas.errors import ReplayRefused
from tests.fake_messages_api import FakeMessagesAPI
from tests.harness import RunningPipeline, count_rows, produce_values, wait_for
from tests.monitor.replay.conftest import QUESTION, events, minutes_ago, ms, replay


async def _live(broker: LocalBroker, settings: Settings, store: AsyncStore, n: int, prefix: str) -> None:
    at = minutes_ago(30)
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(n, prefix, at), timestamp_ms=ms(at))
    async with RunningPipeline(settings, store):
        await wait_for(lambda: _rows_at_least(store, n), 60, f"{n} live rows")


async def _rows_at_least(store: AsyncStore, n: int) -> bool:
    return await count_rows(store) >= n


async def test_stored_text_is_re_scored_by_another_judge_beside_the_live_rows(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """The rubric judge re-scores the events the lexical judge stored, from their stored text, matching `--where`; the
    new rows carry the run id and the same texts, the lexical rows are untouched, and Kafka is not read."""
    live = make_settings(judge="lexical")
    await _live(broker, live, async_store, 6, "s")
    table = async_store.store.qualified_table
    before = (await async_store.query(f"SELECT event_id, version FROM {table} FINAL ORDER BY event_id")).rows
    rubric = make_settings(
        judge="rubric", kafka_bootstrap_servers="127.0.0.1:9", **fake_messages_api.settings_overrides()
    )

    outcome = await replay(
        rubric, async_store, minutes_ago(60), minutes_ago(0), from_store=True, where="event_id != 's5'", yes=True
    )

    assert outcome.status == "finished"
    assert outcome.tally.scored == 5
    new = (
        await async_store.query(
            f"SELECT event_id, question, replay_run FROM {table} FINAL WHERE judge = 'rubric' ORDER BY event_id"
        )
    ).rows
    assert [r[0] for r in new] == [f"s{i}" for i in range(5)]
    assert {r[1] for r in new} == {QUESTION}
    assert {r[2] for r in new} == {outcome.run_id}
    assert (
        await async_store.query(
            f"SELECT event_id, version FROM {table} FINAL WHERE judge = 'lexical' ORDER BY event_id"
        )
    ).rows == before
    assert all(QUESTION in r.user_text for r in fake_messages_api.message_requests)


async def test_a_store_that_kept_no_text_says_so(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """When MONITOR_STORE_TEXT=none kept no text, --from-store refuses in one line naming the setting."""
    live = make_settings(judge="lexical", store_text="none")
    await _live(broker, live, async_store, 3, "n")
    rubric = make_settings(judge="rubric", **fake_messages_api.settings_overrides())

    with pytest.raises(ReplayRefused, match="MONITOR_STORE_TEXT=none"):
        await replay(rubric, async_store, minutes_ago(60), minutes_ago(0), from_store=True)


async def test_a_bad_filter_is_a_one_line_error(
    make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """A --where the store cannot parse is refused with ClickHouse's reason, before anything is judged."""
    from schemas.errors import UsageError

    settings = make_settings(judge="lexical")
    with pytest.raises(UsageError, match="--where: the store refused the filter"):
        await replay(
            settings,
            async_store,
            minutes_ago(60),
            minutes_ago(0) + timedelta(minutes=1),
            from_store=True,
            where="app = = 'x'",
        )


async def test_a_filter_cannot_undo_the_range(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """A --where that closes its own parenthesis (`1) OR (1`) stays one expression: the range and paging still hold."""
    live = make_settings(judge="lexical")
    await _live(broker, live, async_store, 4, "w")
    other = make_settings(
        judge="lexical", judge_max_input_chars=5000
    )  # another judge_id: the live rows are not its own

    outcome = await replay(other, async_store, minutes_ago(60), minutes_ago(0), from_store=True, where="1) OR (1")

    assert outcome.status == "finished"
    assert outcome.tally.scored == 4
