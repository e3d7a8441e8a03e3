"""The pipeline with the LLM judges, the real anthropic client and the fake Messages API server."""

from __future__ import annotations

import json
from collections.abc import Callable

from monitor.config import Settings
from monitor.devtools.localbroker import LocalBroker
from monitor.store.async_store import AsyncStore
from tests.conftest import EXAMPLES
from tests.fake_messages_api import FakeMessagesAPI, bad_request, malformed
from tests.harness import RunningPipeline, committed_offsets, produce_values, wait_for

FLAT = (EXAMPLES / "events-flat.jsonl").read_bytes().splitlines()
EMPTY = json.dumps(
    {
        "event_id": "empty-1",
        "user_message": "When did order A17 ship?",
        "response": "  ",
        "timestamp": "2026-11-29T09:00:00Z",
    }
).encode()


async def run_until_committed(settings: Settings, store: AsyncStore, bootstrap: str, n: int) -> RunningPipeline:
    """Run a pipeline until the group has committed `n` offsets, then stop it and return it."""
    async with RunningPipeline(settings, store) as run:

        async def done() -> bool:
            c = await committed_offsets(bootstrap, settings.kafka.group_id, settings.kafka.topics[0])
            return sum(v or 0 for v in c.values()) == n

        await wait_for(done, 60, f"{n} offsets committed")
    return run


async def test_statements_judge_rows(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """Statements rows hold share, verdicts, judge id, tokens and cost; an empty response makes no call."""
    settings = make_settings(judge="statements", **fake_messages_api.settings_overrides())
    await produce_values(broker.bootstrap, settings.kafka.topics[0], [*FLAT, EMPTY])
    run = await run_until_committed(settings, async_store, broker.bootstrap, len(FLAT) + 1)
    rows = {
        r[0]: r[1:]
        for r in (
            await async_store.query(
                f"SELECT event_id, status, score, raw_score, n_statements, verdicts, judge, judge_model, judge_id, "
                "input_tokens, output_tokens, "
                f"cache_read_tokens + cache_write_tokens, cost_usd FROM {async_store.store.qualified_table} FINAL"
            )
        ).rows
    }
    padded, tight = rows["9f1c2a70-0002-4c1e-9a53-000000000002"], rows["9f1c2a70-0001-4c1e-9a53-000000000001"]
    assert padded[0] == "ok" and abs(padded[1] - 1 / 3) < 1e-9 and padded[3] == 3 and padded[4] == ["no", "no", "yes"]
    assert tight[1] == 1.0 and tight[3] == 1
    assert padded[5:7] == ("statements", "claude-haiku-5-5") and padded[7] == run.pipeline.guard.judge.info.judge_id
    assert padded[8] > 0 and padded[9] > 0 and padded[10] > 0 and padded[11] > 0  # tokens, cache and a priced cost
    assert rows["empty-1"][:4] == ("ok", 0.0, 0.0, 0)
    sent = fake_messages_api.message_requests
    assert len(sent) == len(FLAT)  # the empty response was scored without a call
    assert all(r.section("assistant_response") is not None for r in sent)


async def test_rubric_judge_rows(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """Rubric rows are ok with a raw score of 0..4, a score of raw/4 and reasoning."""
    settings = make_settings(judge="rubric", **fake_messages_api.settings_overrides())
    await produce_values(broker.bootstrap, settings.kafka.topics[0], FLAT)
    await run_until_committed(settings, async_store, broker.bootstrap, len(FLAT))
    rows = (
        await async_store.query(
            f"SELECT status, raw_score, score, reasoning, judge FROM {async_store.store.qualified_table} FINAL"
        )
    ).rows
    assert len(rows) == len(FLAT)
    for status, raw, score, reasoning, judge in rows:
        assert status == "ok" and judge == "rubric" and raw in (0, 1, 2, 3, 4) and score == raw / 4 and reasoning


async def test_persistent_invalid_replies_and_refusals_become_error_rows(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """Persistently invalid replies and 400 errors become error rows with their reason, after the retries."""
    settings = make_settings(judge="rubric", judge_max_retries=1, **fake_messages_api.settings_overrides())
    fake_messages_api.always(malformed())
    await produce_values(broker.bootstrap, settings.kafka.topics[0], FLAT[:2])
    await run_until_committed(settings, async_store, broker.bootstrap, 2)
    rows = (await async_store.query(f"SELECT status, score, error FROM {async_store.store.qualified_table} FINAL")).rows
    assert [(r[0], r[1]) for r in rows] == [("error", None)] * 2
    assert all(r[2].startswith("invalid_reply") for r in rows)
    assert len(fake_messages_api.message_requests) == 2 * 2  # one retry each, then the error row

    fake_messages_api.always(bad_request("model not found"))
    settings2 = make_settings(
        judge="rubric",
        kafka_group_id=settings.kafka.group_id + "-2",
        clickhouse_table="bad_requests",
        **fake_messages_api.settings_overrides(),
    )
    store2 = AsyncStore(type(async_store.store)(async_store.store.url, async_store.store.database, "bad_requests"))
    await store2.open()
    try:
        await run_until_committed(settings2, store2, broker.bootstrap, 2)
        rows = (await store2.query(f"SELECT status, error FROM {store2.store.qualified_table} FINAL")).rows
    finally:
        await store2.close()
    assert len(rows) == 2 and all(
        r[0] == "error" and r[1].startswith("api_error") and "model not found" in r[1] for r in rows
    )
