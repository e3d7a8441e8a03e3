"""The view relevancy_conversations (migration 044) on chDB: one row per conversation and judge, each event counted
once as its latest scoring over re-deliveries, and a conversation without a valid verdict scoring nothing."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from monitor.store.connection import ClickHouseStore
from schemas.scored import ScoredRow

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _row(
    conversation: str, turn: int, score: float | None, *, scored_after_s: float = 1.0, judge_id: str = "rubric-1"
) -> ScoredRow:
    """The row of turn `turn` of `conversation` (event `conversation-turn`), an error row when `score` is None."""
    t = T0 + timedelta(minutes=turn)
    return ScoredRow(
        event_id=f"{conversation}-{turn}",
        conversation_id=conversation,
        event_time=t,
        app="shop",
        model="m",
        prompt_version="v1",
        judge="rubric",
        judge_model="jm",
        judge_id=judge_id,
        status="ok" if score is not None else "error",
        error="" if score is not None else "unavailable: test",
        score=score,
        scored_at=t + timedelta(seconds=scored_after_s),
        turn=turn,
        context_turns=min(turn * 2, 6),
    )


def _view(store: ClickHouseStore) -> dict[tuple[str, str], dict[str, Any]]:
    result = store.query(f"SELECT * FROM {store.database}.relevancy_conversations")
    rows = [dict(zip(result.columns, r, strict=True)) for r in result.rows]
    return {(r["conversation_id"], r["judge_id"]): r for r in rows}


def test_a_redelivered_turn_counts_once_as_its_latest_scoring(store: ClickHouseStore) -> None:
    """Turn 1 written at 0.2, then again later at 0.8 (a redelivery judged anew): 3 judged turns, not 4, all
    relevant, and the lowest turn is turn 2 at 0.7, not the superseded 0.2; another judge keeps its own row."""
    store.insert_rows([_row("c1", 0, 0.9), _row("c1", 1, 0.2), _row("c1", 2, 0.7)], uuid.uuid4().hex)
    store.insert_rows([_row("c1", 1, 0.8, scored_after_s=60)], uuid.uuid4().hex)
    store.insert_rows([_row("c1", 0, 0.1, judge_id="statements-1")], uuid.uuid4().hex)
    view = _view(store)
    c1 = view[("c1", "rubric-1")]
    assert (c1["rows"], c1["judged_turns"], c1["relevant_turns"], c1["error_rows"]) == (3, 3, 3, 0)
    assert c1["relevant_share"] == 1.0
    assert (c1["lowest_turn"], c1["lowest_score"]) == (2, 0.7)
    assert c1["lowest_event_time"].replace(tzinfo=UTC) == T0 + timedelta(minutes=2)
    assert c1["first_event_time"].replace(tzinfo=UTC) == T0
    assert c1["last_event_time"].replace(tzinfo=UTC) == T0 + timedelta(minutes=2)
    other = view[("c1", "statements-1")]
    assert (other["judged_turns"], other["relevant_share"], other["lowest_turn"]) == (1, 0.0, 0)


def test_an_ok_redelivery_replaces_an_error_and_the_share_follows(store: ClickHouseStore) -> None:
    """Turn 1 failed, then scored 0.3 on redelivery: 3 judged turns, 1 relevant (0.5 is the threshold), lowest turn
    1; equal scores pick the earliest turn."""
    store.insert_rows([_row("c3", 0, 0.5), _row("c3", 1, None)], uuid.uuid4().hex)
    store.insert_rows([_row("c3", 1, 0.3, scored_after_s=30), _row("c3", 2, 0.3)], uuid.uuid4().hex)
    c3 = _view(store)[("c3", "rubric-1")]
    assert (c3["rows"], c3["judged_turns"], c3["relevant_turns"], c3["error_rows"]) == (3, 3, 1, 0)
    assert c3["relevant_share"] == 1 / 3 and (c3["lowest_turn"], c3["lowest_score"]) == (1, 0.3)


def test_a_conversation_with_only_error_rows_scores_nothing(store: ClickHouseStore) -> None:
    """Every judge call failed: judged_turns = 0 and the share, lowest score, turn and time are NULL (never 1.0),
    while rows and error_rows say what was there."""
    store.insert_rows([_row("c2", 0, None), _row("c2", 1, None)], uuid.uuid4().hex)
    store.insert_rows([_row("c2", 1, None, scored_after_s=9)], uuid.uuid4().hex)  # a failed redelivery: still one
    c2 = _view(store)[("c2", "rubric-1")]
    assert (c2["rows"], c2["error_rows"], c2["judged_turns"], c2["relevant_turns"]) == (2, 2, 0, 0)
    assert (c2["relevant_share"], c2["lowest_score"], c2["lowest_turn"], c2["lowest_event_time"]) == (
        None,
        None,
        None,
        None,
    )


def test_rows_from_before_turns_read_as_turn_zero_without_context(store: ClickHouseStore) -> None:
    """A row inserted without the new columns (as a writer from before migration 043 does) reads as turn 0 with
    no context turns, context or digest."""
    store.command(
        f"INSERT INTO {store.qualified_table} (event_id, conversation_id, event_time, app, judge_id, status, score, "
        "scored_at, version) VALUES ('old-1', 'c-old', '2026-11-01 10:00:00', 'shop', 'rubric-1', 'ok', 0.4, "
        "'2026-11-01 10:00:01', 1)"
    )
    got = store.query(
        f"SELECT turn, context_turns, context, system_instructions, context_digest FROM {store.qualified_table} "
        "WHERE event_id = 'old-1'"
    ).rows
    assert [tuple(r) for r in got] == [(0, 0, "", "", "")]
    old = _view(store)[("c-old", "rubric-1")]
    assert (old["judged_turns"], old["lowest_turn"], old["relevant_share"]) == (1, 0, 0.0)
