"""`replay --dry-run` counts the context's tokens: follow-ups read with their earlier turns and system instructions
cost more than the same pairs alone (issue 43)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from monitor.config import Settings
from monitor.devtools.localbroker import LocalBroker
from monitor.store.async_store import AsyncStore
from monitor.store.connection import ClickHouseStore
from tests.fake_messages_api import FakeMessagesAPI
from tests.harness import produce_values
from tests.monitor.replay.conftest import minutes_ago, ms, replay

SYSTEM = "You are the support assistant of a kettle shop. Only answer questions about kettles and their delivery."
EARLIER = [
    {"role": "user", "content": "Which kettles ship to Spain? I need one before the end of the month for my mother."},
    {"role": "assistant", "content": "The blue kettle and the steel kettle both ship to Spain from our warehouse."},
]
PAIR = [
    {"role": "user", "content": "How long does the second one take?"},
    {"role": "assistant", "content": "The steel kettle takes about four days to reach Spain."},
]


def chats(n: int, prefix: str, at: datetime, *, history: bool) -> list[bytes]:
    """`n` chat events judging the same pair, with or without the system message and earlier turns before it."""
    stamp = at.astimezone(UTC).isoformat().replace("+00:00", "Z")
    before = [{"role": "system", "content": SYSTEM}, *EARLIER] if history else []
    return [
        json.dumps(
            {
                "event_id": f"{prefix}{i}",
                "conversation_id": f"{prefix}c{i}",
                "timestamp": stamp,
                "messages": [*before, *PAIR],
            }
        ).encode()
        for i in range(n)
    ]


async def test_a_dry_run_counts_the_context_tokens(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """The same pairs as follow-ups (system instructions and two earlier turns) estimate more input tokens and more
    USD than alone, and nothing is sent."""
    settings = make_settings(judge="rubric", **fake_messages_api.settings_overrides())
    alone_at, follow_at = minutes_ago(30), minutes_ago(20)
    topic = settings.kafka.topics[0]
    await produce_values(broker.bootstrap, topic, chats(5, "a", alone_at, history=False), timestamp_ms=ms(alone_at))
    await produce_values(broker.bootstrap, topic, chats(5, "f", follow_at, history=True), timestamp_ms=ms(follow_at))

    def span(at: datetime) -> tuple[datetime, datetime]:
        return at - timedelta(minutes=1), at + timedelta(minutes=1)

    # A fresh client each, as the command opens: a dry run's session is read-only.
    estimates = []
    for at in (alone_at, follow_at):
        store = async_store.store
        reader = AsyncStore(ClickHouseStore(store.url, store.database, store.table))
        try:
            estimates.append((await replay(settings, reader, *span(at), dry_run=True)).counted.estimate)
        finally:
            await reader.close()
    alone, follow = estimates

    assert alone.events == follow.events == 5
    context = len(SYSTEM) + sum(len(m["content"]) for m in EARLIER)
    assert follow.input_tokens - alone.input_tokens >= 5 * context // 4
    assert alone.usd is not None and follow.usd is not None and follow.usd > alone.usd
    assert fake_messages_api.message_requests == []
