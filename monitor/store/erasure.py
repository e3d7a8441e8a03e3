"""Erasure for data-subject requests (`relevancy-monitor forget`): every row of a person's conversations or events,
from every scores table of the database and from users' feedback on those answers, with a report of what was deleted.

The scores tables are the configured one and every other `scores_table` recorded in `{database}.schema_migrations`
(a database may hold several) that still exists. For each: count the rows matching the conversation ids or event
ids, run a lightweight `DELETE FROM ... WHERE conversation_id IN ... OR event_id IN ...` (ON CLUSTER with a cluster)
where any matched, then count again: the rows must be gone from reads (the DELETE waits for that by default; a
server set to delete asynchronously gets `verify_timeout_s` to get there). The ids are bound as server-side
parameters (`{name:Array(String)}`), never formatted into the SQL, so any id (quotes, SQL) is matched literally.

The `feedback` table (users' thumbs and ratings, whose comments may hold personal data) is erased the same way, when
the store has it (from migration 046): the rows whose `conversation_id` or `event_id` is asked, and the rows whose
`event_id` is one of the asked conversations' answers found in the scores tables (feedback that named its answer by
event id carries no conversation id). It goes first, so that an erasure stopped midway and run again still finds
those answers. Feedback naming by event id an answer of the conversation that was never scored cannot be told
apart: erase it by that event id. The report lists it after the scores tables.

The traffic and rollup tables hold aggregates per minute or hour and segment (counts, sums, quantile sketches and an
approximate distinct count of event ids, kept as hashes; the feedback rollup counts and sums), no ids or text:
nothing is deleted there. Nor in
`canary_runs`: its rows are the judge's scores of the labelled set's pairs (pair ids from the labels file), never a
person's conversation or event.

Before deleting anything, a real erasure records the SHA-256 of every id asked (matched or not: the topics' history
may hold events never scored) in `{database}.erased_ids` (`monitor.store.erased_ids`), so that a replay of the
topics never scores them again, even when the erasure stops between the two; a store without that table (before
migration 039) is refused before any DELETE. A dry run records nothing.

Nothing here parses arguments or prints: `monitor.cli.forget` does."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from monitor.store.connection import ClickHouseStore
from monitor.store.erased_ids import record_erased
from monitor.store.retention import TRAFFIC_TABLE
from schemas.ddl import MIGRATIONS_TABLE, ROLLUP_GRAINS
from schemas.errors import StoreError
from schemas.feedback import FEEDBACK_ROLLUP_TABLE, FEEDBACK_TABLE

AGGREGATE_TABLES = (TRAFFIC_TABLE, *(grain.rollup for grain in ROLLUP_GRAINS), FEEDBACK_ROLLUP_TABLE)
AGGREGATES_NOTE = (
    "aggregates per minute or hour and segment only (counts, sums, quantile sketches, an approximate distinct count of "
    "event id hashes): no ids or text, nothing deleted"
)
# The ids are server-side parameters: ClickHouse binds the arrays, whatever characters the ids hold.
MATCH = "conversation_id IN {conversation_ids:Array(String)} OR event_id IN {event_ids:Array(String)}"
# Feedback rows also match by the event ids of the asked conversations' scored answers.
FEEDBACK_MATCH = f"{MATCH} OR event_id IN {{answer_ids:Array(String)}}"
_FOUND = (
    "SELECT count(), groupUniqArrayIf(conversation_id, conversation_id IN {conversation_ids:Array(String)}),"
    " groupUniqArrayIf(event_id, event_id IN {event_ids:Array(String)})"
)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EXISTING = "SELECT name FROM system.tables WHERE database = {database:String} AND has({tables:Array(String)}, name)"


@dataclass(frozen=True, slots=True)
class TableErasure:
    """What one scores table (or the feedback table) held of the ids asked, and what was deleted: rows matching
    before the DELETE, rows deleted, rows still matching after it (0 unless rows arrived meanwhile), and which asked
    ids had rows there."""

    table: str  # database.table
    rows_matched: int
    rows_deleted: int
    rows_remaining: int
    conversation_ids_found: tuple[str, ...] = ()
    event_ids_found: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ErasureReport:
    """The outcome of one erasure (or dry run) for the audit trail: when, which ids, per table what was found and
    deleted (the scores tables, then the feedback table when the store has it), and how many ids' hashes went into
    `erased_ids` (0 on a dry run); `aggregate_tables` hold no ids."""

    database: str
    conversation_ids: tuple[str, ...]
    event_ids: tuple[str, ...]
    dry_run: bool
    at: datetime
    tables: tuple[TableErasure, ...]
    aggregate_tables: tuple[str, ...] = ()
    elapsed_s: float = 0.0
    ids_recorded: int = 0
    note: str = field(default=AGGREGATES_NOTE)

    @property
    def rows_matched(self) -> int:
        """Rows matching the ids, over every table erased, before the DELETE."""
        return sum(t.rows_matched for t in self.tables)

    @property
    def rows_deleted(self) -> int:
        """Rows deleted, over every table erased (0 on a dry run)."""
        return sum(t.rows_deleted for t in self.tables)

    @property
    def rows_remaining(self) -> int:
        """Rows still matching after the DELETE (0 when the erasure is complete; the matched rows on a dry run)."""
        return sum(t.rows_remaining for t in self.tables)

    def as_json(self) -> dict[str, Any]:
        """The report as a JSON-ready dict, for an audit trail."""
        return {
            "at": self.at.isoformat(),
            "database": self.database,
            "dry_run": self.dry_run,
            "conversation_ids": list(self.conversation_ids),
            "event_ids": list(self.event_ids),
            "tables": [
                {
                    "table": t.table,
                    "rows_matched": t.rows_matched,
                    "rows_deleted": t.rows_deleted,
                    "rows_remaining": t.rows_remaining,
                    "conversation_ids_found": list(t.conversation_ids_found),
                    "event_ids_found": list(t.event_ids_found),
                }
                for t in self.tables
            ],
            "rows_matched": self.rows_matched,
            "rows_deleted": self.rows_deleted,
            "rows_remaining": self.rows_remaining,
            "ids_recorded": self.ids_recorded,
            "aggregate_tables": [
                {"table": name, "rows_deleted": 0, "note": self.note} for name in self.aggregate_tables
            ],
            "elapsed_s": round(self.elapsed_s, 3),
        }


def scores_tables(store: ClickHouseStore) -> list[str]:
    """The scores tables of the store's database that exist: the configured one first, then every other
    `scores_table` recorded in `schema_migrations`, sorted. Raises `StoreError` for a recorded name that is not a
    plain identifier (it is put into SQL)."""
    database = store.database
    names = [store.table]
    if store.query(_EXISTING, {"database": database, "tables": [MIGRATIONS_TABLE]}).rows:
        recorded = store.query(f"SELECT DISTINCT scores_table FROM {database}.{MIGRATIONS_TABLE}").rows
        names += sorted({str(r[0]) for r in recorded} - {store.table})
    for name in names:
        if not _IDENT.match(name):
            raise StoreError(
                f"scores table {name!r} recorded in {database}.{MIGRATIONS_TABLE} is not a plain identifier"
            )
    found = {str(r[0]) for r in store.query(_EXISTING, {"database": database, "tables": names}).rows}
    return [name for name in names if name in found]


def source(database: str, table: str, cluster: str | None = None) -> str:
    """What a count reads: the table, or with a cluster every shard of it (`cluster('c', db.t)`), since the DELETE
    is ON CLUSTER and a node holds only its own shard's rows."""
    if cluster is None:
        return f"{database}.{table}"
    if not _IDENT.match(cluster):
        raise ValueError(f"cluster name {cluster!r} is not a plain identifier")
    return f"cluster('{cluster}', {database}.{table})"


def _count(store: ClickHouseStore, table: str, match: str, parameters: dict[str, Any]) -> int:
    sql = f"SELECT count() FROM {source(store.database, table, store.cluster)} WHERE {match}"
    return int(store.query(sql, parameters).rows[0][0])


def _erase(
    store: ClickHouseStore,
    table: str,
    match: str,
    parameters: dict[str, Any],
    *,
    dry_run: bool,
    verify_timeout_s: float,
) -> TableErasure:
    """Count the rows of `table` matching `match`, delete them unless `dry_run` (no DELETE when none matched), and
    count again, waiting up to `verify_timeout_s` for a server that deletes asynchronously."""
    row = store.query(f"{_FOUND} FROM {source(store.database, table, store.cluster)} WHERE {match}", parameters).rows[0]
    matched, found_conversations, found_events = int(row[0]), tuple(sorted(row[1])), tuple(sorted(row[2]))
    remaining = matched
    if matched and not dry_run:
        store.erase_rows(table, match, parameters)
        remaining = _count(store, table, match, parameters)
        deadline = time.monotonic() + verify_timeout_s
        while remaining and time.monotonic() < deadline:  # only when the server deletes asynchronously
            time.sleep(0.5)
            remaining = _count(store, table, match, parameters)
    deleted = 0 if dry_run else max(matched - remaining, 0)
    return TableErasure(f"{store.database}.{table}", matched, deleted, remaining, found_conversations, found_events)


def _answer_ids(store: ClickHouseStore, table: str, conversations: tuple[str, ...]) -> set[str]:
    """The event ids of the answers of `conversations` in the scores table `table` (before they are deleted)."""
    if not conversations:
        return set()
    sql = (
        f"SELECT DISTINCT event_id FROM {source(store.database, table, store.cluster)}"
        " WHERE conversation_id IN {conversation_ids:Array(String)} AND event_id != ''"
    )
    return {str(r[0]) for r in store.query(sql, {"conversation_ids": list(conversations)}).rows}


def forget(
    store: ClickHouseStore,
    conversation_ids: Iterable[str] = (),
    event_ids: Iterable[str] = (),
    *,
    dry_run: bool = False,
    verify_timeout_s: float = 30.0,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> ErasureReport:
    """Record the hashes of `conversation_ids` and `event_ids`, then erase their rows from every scores table of an
    open store and from its feedback table (see the module's docstring), or only count them (`dry_run`); returns the
    report. Ids that match nothing are no error (0 rows). Raises ValueError when no id, or a blank one, is given;
    `StoreError` when ClickHouse fails."""
    conversations = tuple(dict.fromkeys(conversation_ids))
    events = tuple(dict.fromkeys(event_ids))
    if not conversations and not events:
        raise ValueError("no conversation id or event id given")
    if any(not i.strip() for i in (*conversations, *events)):
        raise ValueError("an id is empty: an empty id would match every row without one")
    at = clock()
    started = time.monotonic()
    parameters: dict[str, Any] = {"conversation_ids": list(conversations), "event_ids": list(events)}
    # Recorded first: an erasure that stops before or between its DELETEs still keeps a replay from scoring the ids.
    recorded = 0 if dry_run else record_erased(store, conversations, events, at)
    existing = {
        str(r[0])
        for r in store.query(
            _EXISTING, {"database": store.database, "tables": [FEEDBACK_TABLE, *AGGREGATE_TABLES]}
        ).rows
    }
    has_feedback = FEEDBACK_TABLE in existing
    tables = scores_tables(store)
    feedback: list[TableErasure] = []
    if has_feedback:
        # The conversations' answers are read, and their feedback erased, before the scores rows go: a rerun after an
        # erasure stopped midway still finds them.
        answers = set().union(*(_answer_ids(store, table, conversations) for table in tables))
        feedback_parameters = {**parameters, "answer_ids": sorted(answers - set(events))}
        feedback.append(
            _erase(
                store,
                FEEDBACK_TABLE,
                FEEDBACK_MATCH,
                feedback_parameters,
                dry_run=dry_run,
                verify_timeout_s=verify_timeout_s,
            )
        )
    results = [
        _erase(store, table, MATCH, parameters, dry_run=dry_run, verify_timeout_s=verify_timeout_s) for table in tables
    ]
    return ErasureReport(
        database=store.database,
        conversation_ids=conversations,
        event_ids=events,
        dry_run=dry_run,
        at=at,
        tables=(*results, *feedback),
        aggregate_tables=tuple(f"{store.database}.{name}" for name in AGGREGATE_TABLES if name in existing),
        elapsed_s=time.monotonic() - started,
        ids_recorded=recorded,
    )
