"""Reviewers' labels as rows of `{database}.labels` (migration 045): writing one, and reading them back.

`LabelWriter` holds a connection whose only write is an insert into `labels`: it never runs DDL (a store whose
schema lacks the table is refused in one line naming `relevancy-monitor migrate`), so on a server it can run as a
ClickHouse user granted SELECT and INSERT on that table alone. Reads take FINAL: a reviewer's latest label of an
item replaces their earlier one (ReplacingMergeTree by labelled_at, keyed on (event_id, reviewer))."""

from __future__ import annotations

from dataclasses import astuple, dataclass
from datetime import UTC, datetime
from typing import Any

from monitor.review.routing import ROUTES, Route
from monitor.store.connection import EXISTING_TABLES, ClickHouseStore
from monitor.store.migrations import Migrations
from schemas.errors import StoreError, UsageError

LABELS_TABLE = "labels"
MAX_LABEL = 4  # the rubric's 0..4
MAX_COMMENT_CHARS = 2000
LABEL_COLUMNS = (
    "event_id", "app", "model", "prompt_version", "turn", "judge_id", "judge_score", "reviewer", "label", "comment",
    "route", "inclusion_probability", "event_time", "labelled_at",
)  # fmt: skip
SHADOW_ROW = "startsWith(sample_rule, 'shadow:')"  # a shadow judge's row (consumers.sampling: `shadow:<rule>`)


@dataclass(frozen=True, slots=True)
class NewLabel:
    """What a reviewer gave an item the queue served: the label 0..4, a comment, and the item's route and inclusion
    probability as the queue drew it."""

    event_id: str
    reviewer: str
    label: int
    comment: str
    route: Route
    inclusion_probability: float


@dataclass(frozen=True, slots=True)
class StoredLabel:
    """A row of `labels`: the label with the item's app, model, prompt version, turn and time, and the routing
    (primary) judge's id and score when the label was written."""

    event_id: str
    app: str
    model: str
    prompt_version: str
    turn: int
    judge_id: str
    judge_score: float | None
    reviewer: str
    label: int
    comment: str
    route: str
    inclusion_probability: float
    event_time: datetime
    labelled_at: datetime


def check_new_label(new: NewLabel) -> None:
    """Refuse, in one line (`UsageError`), a label that is not an integer 0..4, an overlong comment, an unknown
    route, a probability outside (0, 1] or an empty event id or reviewer (pure)."""
    if isinstance(new.label, bool) or not isinstance(new.label, int) or not 0 <= new.label <= MAX_LABEL:
        raise UsageError(f"label must be an integer from 0 to {MAX_LABEL} (the rubric's scale), not {new.label!r}")
    if len(new.comment) > MAX_COMMENT_CHARS:
        raise UsageError(f"comment is {len(new.comment):,} characters; at most {MAX_COMMENT_CHARS:,}")
    if new.route not in ROUTES:
        raise UsageError(f"route must be one of {', '.join(ROUTES)}, not {new.route!r}")
    if not 0 < new.inclusion_probability <= 1:
        raise UsageError(f"inclusion probability must be in (0, 1], not {new.inclusion_probability!r}")
    if not new.event_id.strip():
        raise UsageError("event id is empty")
    if not new.reviewer.strip():
        raise UsageError("reviewer is empty")


class LabelWriter:
    """A connection whose only write is an insert into `labels`. The store must not be open yet (or be open for
    writes): it is checked, never migrated."""

    def __init__(self, store: ClickHouseStore) -> None:
        self.store = store
        store.existing_directory()
        store.open()
        found = store.query(EXISTING_TABLES, {"database": store.database, "tables": [LABELS_TABLE]}).rows
        if not found:
            raise StoreError(
                f"table {store.database}.{LABELS_TABLE} not found at {store.safe_url}: run `relevancy-monitor migrate` "
                "first (labels need migration 045)"
            )
        # The check-only path of the migrations: it compares the schema with this release's and marks the connection
        # ready for writes, issuing no DDL (a store that is behind is refused naming `migrate`).
        Migrations(store, auto_migrate=False).check()

    def record(self, reads: ClickHouseStore, new: NewLabel, now: datetime) -> StoredLabel:
        """Validate `new`, look its item up in the scores table (through `reads`), insert the row; returns it.
        Raises `UsageError` for a bad label or an unknown event, `StoreError` when the store fails."""
        check_new_label(new)
        item = primary_row(reads, new.event_id)
        if item is None:
            raise UsageError(f"no judged row of event {new.event_id!r} in {reads.qualified_table}: nothing to label")
        app, model, prompt_version, turn, judge_id, score, event_time = item
        row = StoredLabel(
            new.event_id, app, model, prompt_version, turn, judge_id, score, new.reviewer, new.label, new.comment,
            new.route, new.inclusion_probability, _utc(event_time), _utc(now),
        )  # fmt: skip
        self.store.insert_table(LABELS_TABLE, LABEL_COLUMNS, [astuple(row)])
        return row


def primary_row(store: ClickHouseStore, event_id: str) -> tuple[str, str, str, int, str, float | None, datetime] | None:
    """(app, model, prompt_version, turn, judge_id, score, event_time) of the event's primary judged row: not a
    shadow judge's row, ok rows first, then the live row (not a replay's), then the latest scoring; None when the
    store has no row of the event."""
    sql = (
        f"SELECT app, model, prompt_version, turn, judge_id, score, event_time FROM {store.qualified_table} FINAL\n"
        "WHERE event_id = {event_id:String}\n"
        f"ORDER BY {SHADOW_ROW}, status != 'ok', replay_run != '', scored_at DESC, judge_id LIMIT 1"
    )
    rows = store.query(sql, {"event_id": event_id}).rows
    if not rows:
        return None
    app, model, prompt_version, turn, judge_id, score, event_time = rows[0]
    return (
        str(app), str(model), str(prompt_version), int(turn), str(judge_id),
        None if score is None else float(score), _utc(event_time),
    )  # fmt: skip


_SELECT = "SELECT " + ", ".join(LABEL_COLUMNS) + " FROM {table} FINAL"


def labels_of(store: ClickHouseStore, event_id: str) -> list[StoredLabel]:
    """The labels of one item, one per reviewer (their latest), by reviewer."""
    sql = _SELECT.format(table=f"{store.database}.{LABELS_TABLE}") + (
        " WHERE event_id = {event_id:String} ORDER BY reviewer"
    )
    return [_stored(r) for r in store.query(sql, {"event_id": event_id}).rows]


def read_labels(store: ClickHouseStore, since: datetime, until: datetime) -> list[StoredLabel]:
    """The labels written in [since, until) (by labelled_at), one per item and reviewer, ordered by (event_id,
    reviewer) so every figure computed from them repeats."""
    sql = _SELECT.format(table=f"{store.database}.{LABELS_TABLE}") + (
        " WHERE labelled_at >= {since:DateTime64(3, 'UTC')} AND labelled_at < {until:DateTime64(3, 'UTC')}"
        " ORDER BY event_id, reviewer"
    )
    return [_stored(r) for r in store.query(sql, {"since": since, "until": until}).rows]


def _stored(r: tuple[Any, ...]) -> StoredLabel:
    (event_id, app, model, prompt_version, turn, judge_id, score, reviewer, label, comment, route, p, event_time,
     labelled_at) = r  # fmt: skip
    return StoredLabel(
        str(event_id), str(app), str(model), str(prompt_version), int(turn), str(judge_id),
        None if score is None else float(score), str(reviewer), int(label), str(comment), str(route), float(p),
        _utc(event_time), _utc(labelled_at),
    )  # fmt: skip


def _utc(t: datetime) -> datetime:
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
