"""Replays of a time range of a real topic (tansu) into the real store (chDB): what is scored, what is left alone."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from monitor.config import Settings
from monitor.devtools.localbroker import LocalBroker
from monitor.replay.triage import Skip
from monitor.store.async_store import AsyncStore
from tests.harness import RunningPipeline, committed_offsets, count_rows, produce_values, wait_for
from tests.monitor.replay.conftest import events, minutes_ago, ms, replay


async def _rows(store: AsyncStore, where: str = "1") -> list[tuple[object, ...]]:
    result = await store.query(
        f"SELECT event_id, judge_id, replay_run, version FROM {store.store.qualified_table} FINAL WHERE {where} ORDER "
        "BY event_id"
    )
    return result.rows


async def test_a_range_replay_scores_exactly_its_events_and_leaves_the_live_group_alone(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """Of two batches produced at different times, a replay of the second's range scores exactly its events (rows
    marked with the run), the live group's committed offsets stay as they were, and no traffic is counted."""
    settings = make_settings(judge="lexical")
    topic = settings.kafka.topics[0]
    first, second = minutes_ago(20), minutes_ago(10)
    await produce_values(broker.bootstrap, topic, events(12, "a", first), timestamp_ms=ms(first))
    async with RunningPipeline(settings, async_store):
        await wait_for(lambda: _committed(broker, settings, 12), 60, "the live group to commit the first batch")
    before = await committed_offsets(broker.bootstrap, settings.kafka.group_id, topic)
    traffic_before = (
        await async_store.query(f"SELECT sum(consumed) FROM {async_store.store.database}.traffic_counts")
    ).rows[0][0]
    await produce_values(broker.bootstrap, topic, events(9, "b", second), timestamp_ms=ms(second))

    outcome = await replay(
        settings, async_store, second - timedelta(minutes=1), second + timedelta(minutes=1), yes=True
    )

    assert outcome.status == "finished"
    assert outcome.counted.tally.read == 9
    replayed = await _rows(async_store, "replay_run != ''")
    assert [r[0] for r in replayed] == [f"b{i}" for i in range(9)]
    assert {r[2] for r in replayed} == {outcome.run_id}
    assert await count_rows(async_store, "replay_run = '' AND startsWith(event_id, 'a')") == 12
    assert await committed_offsets(broker.bootstrap, settings.kafka.group_id, topic) == before
    traffic_after = (
        await async_store.query(f"SELECT sum(consumed) FROM {async_store.store.database}.traffic_counts")
    ).rows[0][0]
    assert traffic_after == traffic_before


async def _committed(broker: LocalBroker, settings: Settings, n: int) -> bool:
    c = await committed_offsets(broker.bootstrap, settings.kafka.group_id, settings.kafka.topics[0])
    return sum(v or 0 for v in c.values()) == n


async def test_a_replay_never_replaces_a_live_score(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """Events the live consumer scored with the same judge are skipped: their live rows stay exactly as they were."""
    settings = make_settings(judge="lexical")
    topic = settings.kafka.topics[0]
    at = minutes_ago(15)
    await produce_values(broker.bootstrap, topic, events(6, "live", at), timestamp_ms=ms(at))
    async with RunningPipeline(settings, async_store):
        await wait_for(lambda: _committed(broker, settings, 6), 60, "the live group to commit")
    live = await _rows(async_store)

    outcome = await replay(settings, async_store, at - timedelta(minutes=1), at + timedelta(minutes=1))

    assert outcome.counted.tally.skipped[Skip.ALREADY_SCORED] == 6
    assert outcome.tally.judged == 0
    assert await _rows(async_store) == live


async def test_the_same_judge_twice_collapses_and_another_judge_writes_beside(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore, fake_messages_api: object
) -> None:
    """A second replay with the same judge adds no row under FINAL; a replay with another judge writes its own rows
    and leaves the first judge's rows untouched."""
    from tests.fake_messages_api import FakeMessagesAPI

    assert isinstance(fake_messages_api, FakeMessagesAPI)
    settings = make_settings(judge="lexical")
    at = minutes_ago(30)
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(8, "e", at), timestamp_ms=ms(at))
    since, until = at - timedelta(minutes=1), at + timedelta(minutes=1)

    first = await replay(settings, async_store, since, until)
    lexical_rows = await _rows(async_store)
    second = await replay(settings, async_store, since, until)

    assert first.tally.scored == second.tally.scored == 8
    assert await count_rows(async_store) == 8
    assert {r[2] for r in await _rows(async_store)} == {second.run_id}  # the later run's rows won, as on redelivery

    rubric = make_settings(judge="rubric", **fake_messages_api.settings_overrides())
    third = await replay(rubric, async_store, since, until, yes=True)

    assert third.tally.scored == 8
    assert await count_rows(async_store) == 16
    lexical_id = lexical_rows[0][1]
    assert len(await _rows(async_store, f"judge_id = '{lexical_id}'")) == 8
    assert {r[2] for r in await _rows(async_store, f"judge_id != '{lexical_id}'")} == {third.run_id}


async def test_resume_skips_what_an_earlier_replay_scored(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """With resume, events an earlier replay of this judge scored are skipped, not judged again."""
    settings = make_settings(judge="lexical")
    at = minutes_ago(25)
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(5, "r", at), timestamp_ms=ms(at))
    since, until = at - timedelta(minutes=1), at + timedelta(minutes=1)
    await replay(settings, async_store, since, until)

    resumed = await replay(settings, async_store, since, until, resume=True)

    assert resumed.counted.tally.skipped[Skip.ALREADY_SCORED] == 5
    assert resumed.tally.judged == 0


async def test_malformed_records_are_counted_by_reason_and_not_dead_lettered_again(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """Records that are not events are counted by decode reason; the replay publishes nothing to the dead-letter
    topic."""
    settings = make_settings(judge="lexical")
    at = minutes_ago(12)
    values = [*events(3, "ok", at), b"{not json", b'{"event_id": "x"}', b""]
    await produce_values(broker.bootstrap, settings.kafka.topics[0], values, timestamp_ms=ms(at))

    outcome = await replay(settings, async_store, at - timedelta(minutes=1), at + timedelta(minutes=1))

    tally = outcome.counted.tally
    assert tally.skipped[Skip.MALFORMED] == 3
    assert dict(tally.malformed) == {"invalid_json": 1, "invalid_event": 1, "empty_value": 1}
    assert outcome.tally.scored == 3
    topics = await _topics(broker)
    assert settings.kafka.dlq_topic not in topics


async def _topics(broker: LocalBroker) -> set[str]:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap)
    await consumer.start()
    try:
        return set(await consumer.topics())
    finally:
        await consumer.stop()


async def test_a_range_past_the_end_reads_nothing(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """A range after the newest record reads no record (tansu's timestamp -1 answer is not taken as offset 0)."""
    settings = make_settings(judge="lexical")
    at = minutes_ago(40)
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(4, "old", at), timestamp_ms=ms(at))

    outcome = await replay(settings, async_store, minutes_ago(5), minutes_ago(1))

    assert outcome.counted.tally.read == 0
    assert await count_rows(async_store) == 0


async def test_replayed_text_is_redacted_as_live_text_is(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """Personal data in replayed events is replaced before the judge and the store see it, and counted on the row."""
    settings = make_settings(judge="lexical")
    at = minutes_ago(14)
    values = events(
        2,
        "p",
        at,
        question="Where is my order? Mail me at jane.doe@example.com",
        response="Order A17 ships today, Jane: see jane.doe@example.com",
    )
    await produce_values(broker.bootstrap, settings.kafka.topics[0], values, timestamp_ms=ms(at))

    await replay(settings, async_store, at - timedelta(minutes=1), at + timedelta(minutes=1))

    rows = (
        await async_store.query(f"SELECT question, response, redactions FROM {async_store.store.qualified_table} FINAL")
    ).rows
    assert len(rows) == 2
    assert all("jane.doe@example.com" not in q + r for q, r, _ in rows)
    assert [dict(red) for _, _, red in rows] == [{"EMAIL": 2}, {"EMAIL": 2}], rows


async def test_a_live_error_row_is_not_replaced_by_a_replay(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore, fake_messages_api: object
) -> None:
    """An event the live judge failed on keeps its live error row: the same judge's replay skips it."""
    from tests.fake_messages_api import FakeMessagesAPI, bad_request

    assert isinstance(fake_messages_api, FakeMessagesAPI)
    settings = make_settings(judge="rubric", **fake_messages_api.settings_overrides())
    at = minutes_ago(16)
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(3, "err", at), timestamp_ms=ms(at))
    fake_messages_api.always(bad_request())
    async with RunningPipeline(settings, async_store):
        await wait_for(lambda: _committed(broker, settings, 3), 60, "the live group to commit the error rows")
    live = await _rows(async_store)
    fake_messages_api.reset()

    outcome = await replay(settings, async_store, at - timedelta(minutes=1), at + timedelta(minutes=1), yes=True)

    assert outcome.counted.tally.skipped[Skip.ALREADY_SCORED] == 3
    assert await _rows(async_store) == live
    assert await count_rows(async_store, "status = 'error' AND replay_run = ''") == 3


async def test_two_batches_seconds_apart_replay_only_the_second(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """Batches produced two seconds apart with the producers' own clock: a range starting between them reads the
    second batch only, found by offsets_for_times rather than by reading the partitions from the start."""
    import asyncio
    from datetime import UTC, datetime

    settings = make_settings(judge="lexical")
    topic = settings.kafka.topics[0]
    await produce_values(broker.bootstrap, topic, events(7, "first", minutes_ago(0)))
    await asyncio.sleep(1.0)
    between = datetime.now(UTC)
    await asyncio.sleep(1.0)
    await produce_values(broker.bootstrap, topic, events(5, "second", minutes_ago(0)))

    outcome = await replay(settings, async_store, between, datetime.now(UTC) + timedelta(seconds=1))

    assert outcome.counted.tally.read == 5
    assert outcome.counted.tally.before_start == 0
    assert [r[0] for r in await _rows(async_store)] == [f"second{i}" for i in range(5)]
