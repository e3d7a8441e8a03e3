"""The replay's own tables: a row per run (`replay_runs`, rewritten as it goes) and per Message Batch it sent
(`replay_batches`), so a run can be audited and an interrupted one resumed (schemas/sql/037 and 038)."""

from __future__ import annotations

import secrets
from dataclasses import astuple, dataclass, fields
from datetime import UTC, datetime
from typing import Literal

from monitor.store.async_store import AsyncStore

RUNS_TABLE = "replay_runs"
BATCHES_TABLE = "replay_batches"

RunStatus = Literal["running", "finished", "capped", "interrupted", "failed"]
BatchState = Literal["submitted", "written"]


def new_run_id(now: datetime) -> str:
    """A run id that sorts by start time and cannot collide: `replay-20261201T160728Z-3f9a1c`."""
    return f"replay-{now.astimezone(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One row of `replay_runs`; field order is the column order."""

    run_id: str
    scores_table: str
    source: str
    since: datetime
    until: datetime
    filter: str
    topics: list[str]
    judge: str
    judge_id: str
    batch_api: bool
    status: RunStatus
    estimate_usd: float | None
    max_usd: float | None
    spent_usd: float
    events: int
    scored: int
    skipped: int
    failed: int
    started_at: datetime
    updated_at: datetime


RUN_COLUMNS = tuple(f.name for f in fields(RunRecord))


@dataclass(frozen=True, slots=True)
class BatchRecord:
    """One row of `replay_batches`; field order is the column order."""

    judge_id: str
    batch_id: str
    run_id: str
    scores_table: str
    requests: int
    state: BatchState
    submitted_at: datetime
    updated_at: datetime


BATCH_COLUMNS = tuple(f.name for f in fields(BatchRecord))


async def write_run(store: AsyncStore, record: RunRecord) -> None:
    """Insert the run's current state (the newest `updated_at` wins under FINAL)."""
    await store.insert_table(RUNS_TABLE, RUN_COLUMNS, [astuple(record)])


async def write_batch(store: AsyncStore, record: BatchRecord) -> None:
    """Insert a batch's current state."""
    await store.insert_table(BATCHES_TABLE, BATCH_COLUMNS, [astuple(record)])


async def unwritten_batches(store: AsyncStore, judge_id: str, scores_table: str) -> list[BatchRecord]:
    """Batches of `judge_id` for `scores_table` sent by any run whose rows were never written, oldest first."""
    sql = (
        f"SELECT {', '.join(BATCH_COLUMNS)} FROM {store.store.database}.{BATCHES_TABLE} FINAL"
        " WHERE judge_id = {judge_id:String} AND scores_table = {table:String} AND state = 'submitted' ORDER BY "
        "submitted_at"
    )
    rows = (await store.query(sql, {"judge_id": judge_id, "table": scores_table})).rows
    return [BatchRecord(*row) for row in rows]
