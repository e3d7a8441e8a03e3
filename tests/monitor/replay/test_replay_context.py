"""`replay --from-store` with the conversation: events rebuilt from stored rows carry their stored turn, earlier turns
and system instructions (when the text was stored), and the replay cuts them to the judge's window as live does."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from datetime import timedelta

from consumers.time_range import TimeRange
from monitor.config import Settings
from monitor.replay.sources import StoreHistory, stored_context
from monitor.store.async_store import AsyncStore
from schemas.events import ConversationEvent, Turn
from schemas.scored import ScoredRow
from tests.fake_messages_api import FakeMessagesAPI
from tests.monitor.replay.conftest import minutes_ago, replay

CONTEXT = (
    Turn("user", "Which kettles ship to Spain? (old-turn-walrus)"),
    Turn("assistant", "The blue and the steel kettle (kept-turn-heron)."),
)
SYSTEM = "You sell kettles (brief-osprey)."


def _stored(event_id: str, *, with_text: bool) -> ScoredRow:
    at = minutes_ago(20)
    context = json.dumps([{"role": t.role, "text": t.text} for t in CONTEXT]) if with_text else ""
    return ScoredRow(
        event_id=event_id,
        conversation_id="conv-1",
        event_time=at,
        app="shop",
        model="m",
        prompt_version="v1",
        judge="lexical",
        judge_model="",
        judge_id="lexical-1",
        status="ok",
        score=0.5,
        question="How long does the second one take?" if with_text else "",
        response="About four days." if with_text else "",
        scored_at=at + timedelta(seconds=1),
        turn=1,
        context_turns=2,
        context=context,
        system_instructions=SYSTEM if with_text else "",
        context_digest="ab" * 32,
    )


async def _events(store: AsyncStore) -> list[ConversationEvent]:
    history = StoreHistory(store, TimeRange(minutes_ago(60), minutes_ago(0)), None)
    out: list[ConversationEvent] = []
    async for page in history.pages(asyncio.Event()):
        out += [e for e in page if isinstance(e, ConversationEvent)]
    return out


async def test_a_stored_event_comes_back_with_its_turn_context_and_system(async_store: AsyncStore) -> None:
    """The rebuilt event has the stored turn index, the earlier turns in order with their roles, and the system text;
    an event stored without text is not read back at all (it has nothing to judge)."""
    await asyncio.to_thread(
        async_store.store.insert_rows, [_stored("e1", with_text=True), _stored("e2", with_text=False)], uuid.uuid4().hex
    )
    (event,) = await _events(async_store)
    assert (event.event_id, event.turn, event.context, event.system) == ("e1", 1, CONTEXT, SYSTEM)


def test_an_unreadable_stored_context_reads_as_none() -> None:
    """A context column that is not a JSON array of {role, text} gives no turns (the pair is still judged)."""
    assert stored_context("") == () and stored_context("not json") == () and stored_context('[{"role": "user"}]') == ()
    assert stored_context('[{"role": "user", "text": "hi"}]') == (Turn("user", "hi"),)


async def test_the_replay_cuts_the_stored_context_to_the_window_before_judging_and_storing(
    make_settings: Callable[..., Settings], async_store: AsyncStore, fake_messages_api: FakeMessagesAPI
) -> None:
    """With MONITOR_JUDGE_CONTEXT_TURNS=1 the replayed row keeps the newest stored turn only (context_turns 1) and
    the stored turn index, and the judge's request carries that turn and the brief but not the older turn."""
    await asyncio.to_thread(async_store.store.insert_rows, [_stored("e1", with_text=True)], uuid.uuid4().hex)
    settings = make_settings(
        judge="rubric",
        kafka_bootstrap_servers="127.0.0.1:9",
        judge_context_turns=1,
        **fake_messages_api.settings_overrides(),
    )
    outcome = await replay(settings, async_store, minutes_ago(60), minutes_ago(0), from_store=True, yes=True)
    assert outcome.status == "finished" and outcome.tally.scored == 1
    table = async_store.store.qualified_table
    (row,) = (
        await async_store.query(
            f"SELECT turn, context_turns, context, system_instructions FROM {table} FINAL WHERE judge = 'rubric'"
        )
    ).rows
    assert (row[0], row[1], row[3]) == (1, 1, SYSTEM)
    assert json.loads(row[2]) == [{"role": "assistant", "text": CONTEXT[1].text}]
    bodies = [r.raw.decode("utf-8", "replace") for r in fake_messages_api.requests]
    assert len(bodies) == 1 and "kept-turn-heron" in bodies[0] and "brief-osprey" in bodies[0]
    assert "old-turn-walrus" not in bodies[0]
