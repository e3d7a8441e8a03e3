"""A replay's limits: the spending cap, the confirmation threshold, interrupts, erased ids and the retention."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from consumers.time_range import TimeRange
from monitor.config import Settings
from monitor.devtools.localbroker import LocalBroker
from monitor.judges.factory import build_judge
from monitor.replay.records import RUNS_TABLE
from monitor.replay.run import Replay, ReplayOptions, Snapshot
from monitor.replay.triage import Skip
from monitor.store.async_store import AsyncStore
from monitor.store.connection import ClickHouseStore
from monitor.store.erased_ids import record_erased
from schemas.errors import ReplayRefused
from tests.fake_messages_api import FakeMessagesAPI, Reply
from tests.harness import count_rows, produce_values
from tests.monitor.replay.conftest import RecordedView, events, minutes_ago, ms, replay

# $0.10 a call on the default model (claude-haiku-5-5: $0.10 per million input tokens): round figures for the cap.
TENTH_OF_A_DOLLAR = Reply(
    usage={
        "input_tokens": 1_000_000,
        "output_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
)


async def _runs(store: AsyncStore) -> list[tuple[object, ...]]:
    sql = f"SELECT run_id, status, scored, spent_usd FROM {store.store.database}.{RUNS_TABLE} FINAL ORDER BY started_at"
    return (await store.query(sql)).rows


async def test_max_usd_stops_before_the_cap_and_resume_finishes_the_rest(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """At $0.10 a call and a $0.55 cap, the replay scores 5 events, spends $0.50, records the run as capped; a resumed
    run scores only the other events."""
    fake_messages_api.always(TENTH_OF_A_DOLLAR)
    settings = make_settings(judge="rubric", judge_concurrency=1, **fake_messages_api.settings_overrides())
    at = minutes_ago(20)
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(8, "m", at), timestamp_ms=ms(at))
    since, until = at - timedelta(minutes=1), at + timedelta(minutes=1)

    capped = await replay(settings, async_store, since, until, yes=True, max_usd=0.55)

    assert capped.status == "capped"
    assert capped.tally.scored == 5
    assert capped.tally.spent_usd == pytest.approx(0.50)
    assert [(r[1], r[2]) for r in await _runs(async_store)] == [("capped", 5)]

    resumed = await replay(settings, async_store, since, until, yes=True, resume=True)

    assert resumed.status == "finished"
    assert resumed.counted.tally.skipped[Skip.ALREADY_SCORED] == 5
    assert resumed.tally.scored == 3
    assert await count_rows(async_store) == 8


async def test_an_estimate_above_the_threshold_needs_yes(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """Above MONITOR_REPLAY_CONFIRM_USD the replay stops after the estimate without a call or a row; --yes goes
    ahead."""
    settings = make_settings(judge="rubric", replay_confirm_usd=0.0, **fake_messages_api.settings_overrides())
    at = minutes_ago(20)
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(4, "y", at), timestamp_ms=ms(at))
    since, until = at - timedelta(minutes=1), at + timedelta(minutes=1)

    with pytest.raises(ReplayRefused, match=r"above MONITOR_REPLAY_CONFIRM_USD \(\$0.00\): run again with --yes"):
        await replay(settings, async_store, since, until)

    assert fake_messages_api.message_requests == []
    assert await count_rows(async_store) == 0
    assert await _runs(async_store) == []
    done = await replay(settings, async_store, since, until, yes=True)
    assert done.tally.scored == 4


async def test_a_dry_run_estimates_and_judges_nothing(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """A dry run prints the count and a positive estimate for an LLM judge, and sends no request."""
    settings = make_settings(judge="statements", **fake_messages_api.settings_overrides())
    at = minutes_ago(20)
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(10, "d", at), timestamp_ms=ms(at))

    # A fresh client, as the command opens: a dry run's session is read-only (the engine's readonly = 1).
    reader = AsyncStore(ClickHouseStore(async_store.store.url, async_store.store.database, async_store.store.table))
    try:
        outcome = await replay(settings, reader, at - timedelta(minutes=1), at + timedelta(minutes=1), dry_run=True)
        assert (await reader.query("SELECT getSetting('readonly')")).rows == [(1,)]
    finally:
        await reader.close()

    assert outcome.status == "estimated"
    assert outcome.counted.estimate.events == 10
    assert outcome.counted.estimate.usd is not None and outcome.counted.estimate.usd > 0
    assert fake_messages_api.message_requests == []


async def test_an_interrupted_replay_keeps_its_rows_and_resumes(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """Stopped while scoring, the replay lets the calls out finish, writes their rows, records itself as interrupted;
    a resumed run scores the rest and no event twice."""
    fake_messages_api.always(Reply(delay_s=0.2))
    settings = make_settings(judge="rubric", judge_concurrency=2, **fake_messages_api.settings_overrides())
    at = minutes_ago(20)
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(20, "i", at), timestamp_ms=ms(at))
    since, until = at - timedelta(minutes=1), at + timedelta(minutes=1)
    judge = build_judge(settings.judge)

    class StopWhenScoring(RecordedView):
        def progress(self, snapshot: Snapshot) -> None:
            super().progress(snapshot)
            if snapshot.phase == "score" and snapshot.in_flight:
                run.stop.set()

    run = Replay(settings, ReplayOptions(span=TimeRange(since, until), yes=True), judge, async_store, StopWhenScoring())
    try:
        interrupted = await run.run()
    finally:
        await judge.aclose()

    assert interrupted.status == "interrupted"
    assert 0 < interrupted.tally.scored < 20
    assert interrupted.cancelled == 0
    assert await count_rows(async_store) == interrupted.tally.scored
    assert [r[1] for r in await _runs(async_store)] == ["interrupted"]

    resumed = await replay(settings, async_store, since, until, yes=True, resume=True)

    assert resumed.tally.scored == 20 - interrupted.tally.scored
    assert await count_rows(async_store) == 20
    assert len(fake_messages_api.message_requests) == 20


async def test_erased_conversations_are_never_scored_again(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """Events of a conversation `forget` erased (and an erased event id) are skipped as erased."""
    settings = make_settings(judge="lexical")
    at = minutes_ago(20)
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(6, "x", at), timestamp_ms=ms(at))
    record_erased(async_store.store, ["xc1"], ["x4"], datetime.now(UTC))

    outcome = await replay(settings, async_store, at - timedelta(minutes=1), at + timedelta(minutes=1))

    assert outcome.counted.tally.skipped[Skip.ERASED] == 2
    rows = (await async_store.query(f"SELECT event_id FROM {async_store.store.qualified_table} ORDER BY event_id")).rows
    assert [r[0] for r in rows] == ["x0", "x2", "x3", "x5"]


async def test_events_older_than_the_retention_are_left_out(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """With a retention of 1 day, a range that ended before it is refused, and events older than it are skipped as
    expired (the TTL would delete their rows at once) while the newer ones are scored."""
    settings = make_settings(judge="lexical", retention_days=1)
    old, recent = datetime.now(UTC) - timedelta(days=2), minutes_ago(30)
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(3, "old", old), timestamp_ms=ms(recent))
    await produce_values(broker.bootstrap, settings.kafka.topics[0], events(2, "new", recent), timestamp_ms=ms(recent))

    with pytest.raises(ReplayRefused, match="MONITOR_RETENTION_DAYS"):
        await replay(settings, async_store, old - timedelta(hours=1), old + timedelta(hours=1))
    outcome = await replay(settings, async_store, recent - timedelta(minutes=1), recent + timedelta(minutes=1))

    assert outcome.counted.tally.skipped[Skip.EXPIRED] == 3
    assert outcome.tally.scored == 2
