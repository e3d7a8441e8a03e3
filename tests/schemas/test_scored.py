"""The scored row and its table: columns match, dedup collapses redelivery but keeps other judges' rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from monitor.store.connection import ClickHouseStore
from monitor.store.migrations import Migrations
from schemas.ddl import render_ddl
from schemas.scored import SCORED_COLUMNS, ScoredRow

T0 = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)


def row(
    event_id: str = "e1",
    judge_id: str = "j1",
    status: str = "ok",
    score: float | None = 0.5,
    at: datetime = T0,
    **kw: Any,
) -> ScoredRow:
    """A scored row for `event_id` and `judge_id`, scored at `at`, with the other fields fixed."""
    return ScoredRow(
        event_id=event_id,
        conversation_id="c",
        event_time=T0,
        app="a",
        model="m",
        prompt_version="v1",
        judge="lexical",
        judge_model="h",
        judge_id=judge_id,
        status=status,
        score=score,
        scored_at=at,
        **kw,
    )  # type: ignore[arg-type]


def test_table_columns_match_the_model(store: ClickHouseStore) -> None:
    """The created table has the model's columns, in order."""
    described = store.query(f"DESCRIBE TABLE {store.qualified_table}")
    assert tuple(r[0] for r in described.rows) == SCORED_COLUMNS


def test_ddl_is_idempotent_and_names_are_checked(store: ClickHouseStore) -> None:
    """Creating the schema again is harmless, and an unsafe database name is refused."""
    Migrations(store).ensure()
    Migrations(store).ensure()
    with pytest.raises(ValueError):
        render_ddl("db; DROP TABLE x", "t")


def test_ok_row_outranks_error_row_and_later_outranks_earlier() -> None:
    """An ok row outranks a later error row, and a later ok row outranks an earlier one."""
    err_late = row(status="error", score=None, error="unavailable", at=T0 + timedelta(hours=1))
    ok_early = row(at=T0)
    ok_late = row(at=T0 + timedelta(seconds=1))
    assert ok_early.version > err_late.version
    assert ok_late.version > ok_early.version


def test_row_contract() -> None:
    """An ok row needs a score, an error row must not have one, and a score above 1 is refused."""
    with pytest.raises(ValueError):
        row(status="ok", score=None)
    with pytest.raises(ValueError):
        row(status="error", score=0.0)
    with pytest.raises(ValueError):
        row(score=1.5)


def test_redelivery_collapses_and_other_judges_keep_their_rows(store: ClickHouseStore) -> None:
    """Under FINAL a re-scored event keeps its latest row, ok beats a later error, other judges keep theirs."""
    store.insert_rows([row(score=0.2, at=T0), row("e2")], "tok-a")
    store.insert_rows([row(score=0.9, at=T0 + timedelta(seconds=5))], "tok-b")  # the same event, re-scored
    store.insert_rows([row(judge_id="j2", score=0.1)], "tok-c")  # another judge version
    store.insert_rows([row("e3", status="error", score=None, error="x", at=T0 + timedelta(minutes=9))], "tok-d")
    store.insert_rows([row("e3", score=0.7, at=T0)], "tok-e")  # ok wins over a later error
    t = store.qualified_table
    assert store.query(f"SELECT count() FROM {t}").rows[0][0] == 6
    final = dict(
        ((r[0], r[1]), (r[2], r[3]))
        for r in store.query(f"SELECT event_id, judge_id, score, status FROM {t} FINAL").rows
    )
    assert final == {
        ("e1", "j1"): (0.9, "ok"),
        ("e2", "j1"): (0.5, "ok"),
        ("e1", "j2"): (0.1, "ok"),
        ("e3", "j1"): (0.7, "ok"),
    }
    arg = store.query(
        f"SELECT event_id, argMax(score, version) FROM {t} WHERE judge_id = 'j1' GROUP BY event_id ORDER BY event_id"
    ).rows
    assert arg == [("e1", 0.9), ("e2", 0.5), ("e3", 0.7)]


def test_retried_insert_with_same_token_is_a_no_op(store: ClickHouseStore) -> None:
    """A retried insert with the same token writes the batch once."""
    batch = [row("e1"), row("e2")]
    store.insert_rows(batch, "same-token")
    store.insert_rows(batch, "same-token")
    assert store.query(f"SELECT count() FROM {store.qualified_table}").rows[0][0] == 2
