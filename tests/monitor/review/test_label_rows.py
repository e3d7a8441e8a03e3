"""Labels as rows of `labels` on chDB: validation in one line, the item looked up from its primary judged row, a
reviewer's relabel replacing their label, and a writer that refuses a store without the table (running no DDL)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from monitor.review.label_rows import LabelWriter, NewLabel, labels_of, read_labels
from monitor.store.connection import EXISTING_TABLES, ClickHouseStore
from schemas.errors import StoreError, UsageError
from tests.monitor.review.scored import NOW, PRIMARY, SHADOW, row, write


def writer_of(store: ClickHouseStore) -> LabelWriter:
    """A LabelWriter on a connection of its own to the test's store."""
    return LabelWriter(ClickHouseStore(store.url, store.database, store.table))


def new(label: object = 3, comment: str = "", reviewer: str = "ann", event_id: str = "e1") -> NewLabel:
    """A label of `event_id` from the control route."""
    return NewLabel(event_id, reviewer, label, comment, "control", 0.25)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (new(label=5), "label must be an integer from 0 to 4 (the rubric's scale), not 5"),
        (new(label=-1), "label must be an integer from 0 to 4"),
        (new(label=2.5), "label must be an integer from 0 to 4 (the rubric's scale), not 2.5"),
        (new(label=True), "label must be an integer from 0 to 4"),
        (new(comment="x" * 2001), "comment is 2,001 characters; at most 2,000"),
        (new(reviewer=" "), "reviewer is empty"),
        (NewLabel("e1", "ann", 3, "", "random", 0.25), "route must be one of control, disagree, borderline, firing"),  # type: ignore[arg-type]
        (NewLabel("e1", "ann", 3, "", "control", 0.0), "inclusion probability must be in (0, 1]"),
        (new(event_id="nope"), "no judged row of event 'nope'"),
    ],
)
def test_a_bad_label_is_refused_in_one_line_and_nothing_written(
    store: ClickHouseStore, bad: NewLabel, message: str
) -> None:
    """Each bad label (or an unknown event) raises a one-line UsageError and writes no row."""
    write(store, [row("e1", 0.5)])
    with pytest.raises(UsageError) as e:
        writer_of(store).record(store, bad, NOW)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)
    assert read_labels(store, NOW - timedelta(days=1), NOW + timedelta(days=1)) == []


def test_a_label_carries_its_primary_judged_row_and_a_relabel_replaces_it(store: ClickHouseStore) -> None:
    """The row copies the primary's (not the shadow's) judge_id, score, app, model, version, turn and time; the
    same reviewer's later label replaces the earlier one, another reviewer's stays beside it."""
    write(store, [row("e1", 0.75, app="bank", model="m2", prompt_version="v9")])
    write(store, [row("e1", 0.1, judge_id=SHADOW, shadow=True, app="bank", model="m2", prompt_version="v9")])
    writer = writer_of(store)
    stored = writer.record(store, new(label=1, comment="<b>off topic</b>"), NOW)
    assert (stored.app, stored.model, stored.prompt_version, stored.turn) == ("bank", "m2", "v9", 0)
    assert (stored.judge_id, stored.judge_score, stored.label, stored.route) == (PRIMARY, 0.75, 1, "control")
    assert stored.event_time == NOW - timedelta(minutes=60) and stored.labelled_at == NOW
    assert labels_of(store, "e1") == [stored]
    later = writer.record(store, new(label=4), NOW + timedelta(minutes=1))
    other = writer.record(store, new(label=2, reviewer="bob"), NOW + timedelta(minutes=2))
    assert labels_of(store, "e1") == [later, other]
    assert read_labels(store, NOW, NOW + timedelta(hours=1)) == [later, other]
    assert read_labels(store, NOW + timedelta(minutes=2), NOW + timedelta(hours=1)) == [other]


def test_the_writer_refuses_a_store_without_the_labels_table_and_creates_nothing(store: ClickHouseStore) -> None:
    """A store whose schema predates migration 045: one line naming `relevancy-monitor migrate`; no DDL is run, so
    the table is still missing afterwards."""
    store.command(f"DROP TABLE {store.database}.labels SYNC")
    with pytest.raises(StoreError) as e:
        writer_of(store)
    assert "relevancy-monitor migrate" in str(e.value) and "\n" not in str(e.value)
    assert f"{store.database}.labels not found" in str(e.value)
    assert not store.query(EXISTING_TABLES, {"database": store.database, "tables": ["labels"]}).rows


def test_the_writer_writes_nothing_but_labels(store: ClickHouseStore) -> None:
    """The writer's connection is marked ready by the schema check alone, and it has no other write than labels:
    the only table whose row count changes after a label is `labels`."""
    write(store, [row("e1", 0.5)])
    counts = "SELECT name, total_rows FROM system.tables WHERE database = {d:String} AND total_rows IS NOT NULL"
    before = dict(store.query(counts, {"d": store.database}).rows)
    writer_of(store).record(store, new(), NOW)
    after = dict(store.query(counts, {"d": store.database}).rows)
    assert {k for k in after if after[k] != before.get(k)} == {"labels"}
