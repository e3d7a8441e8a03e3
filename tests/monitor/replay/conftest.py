"""Helpers of the replay tests: events with chosen ids and times, and a replay run in-process with its view recorded."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from consumers.time_range import TimeRange
from monitor.config import Settings
from monitor.judges.factory import build_judge
from monitor.replay.run import Counted, Replay, ReplayOptions, ReplayOutcome, Snapshot
from monitor.store.async_store import AsyncStore

QUESTION = "When did order A17 ship?"
PADDED = "Thanks for getting in touch. We also sell gift cards. Order A17 shipped on 3 March."


def events(n: int, prefix: str, at: datetime, question: str = QUESTION, response: str = PADDED) -> list[bytes]:
    """`n` flat event values with ids `prefix`0.., each in its own conversation, with event time `at`."""
    stamp = at.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return [
        json.dumps(
            {
                "event_id": f"{prefix}{i}",
                "conversation_id": f"{prefix}c{i}",
                "app": "support-bot",
                "prompt_version": "v1",
                "user_message": question,
                "response": response,
                "timestamp": stamp,
            }
        ).encode()
        for i in range(n)
    ]


def ms(at: datetime) -> int:
    """`at` in epoch milliseconds (a Kafka record timestamp)."""
    return int(at.timestamp() * 1000)


def minutes_ago(n: float) -> datetime:
    """The wall clock `n` minutes ago, in UTC."""
    return datetime.now(UTC) - timedelta(minutes=n)


@dataclass
class RecordedView:
    """A replay view that keeps what it was shown."""

    snapshots: list[Snapshot] = field(default_factory=list)
    counted: Counted | None = None

    def progress(self, snapshot: Snapshot) -> None:
        """Keep a progress snapshot."""
        self.snapshots.append(snapshot)

    def estimated(self, counted: Counted) -> None:
        """Keep the count and estimate."""
        self.counted = counted


async def replay(
    settings: Settings, store: AsyncStore, since: datetime, until: datetime, **options: Any
) -> ReplayOutcome:
    """Run one replay of [since, until) with the configured judge; returns its outcome."""
    judge = build_judge(settings.judge)
    try:
        run = Replay(settings, ReplayOptions(span=TimeRange(since, until), **options), judge, store, RecordedView())
        return await run.run()
    finally:
        await judge.aclose()
