"""Erasure for data-subject requests (privacy issue): `forget` deletes every row of the conversations and events
asked from every scores table of the database and users' feedback on those answers, leaves the others, reports the
counts, counts only on a dry run, and matches ids literally whatever they contain; before deleting, it records the
ids' hashes (never the ids) in erased_ids."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from monitor.feedback.rows import FEEDBACK_COLUMNS, FeedbackRow, feedback_values
from monitor.store.connection import ClickHouseStore
from monitor.store.erased_ids import ERASED_TABLE
from monitor.store.erasure import AGGREGATE_TABLES, forget, scores_tables, source
from monitor.store.migrations import Migrations
from schemas.errors import StoreError
from schemas.events import KafkaPosition
from schemas.feedback import AnswerRef, FeedbackEvent, Segment
from schemas.scored import ScoredRow
from tests.monitor.alerts.conftest import insert, make_row

T = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
AT = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)


def _rows(conversation: str, events: list[str]) -> list[ScoredRow]:
    """Two judges' rows for each event of a conversation."""
    rows = []
    for i, event in enumerate(events):
        row = make_row(T + timedelta(minutes=i), event_id=event).model_copy(update={"conversation_id": conversation})
        rows += [row, row.model_copy(update={"judge_id": "j2"})]
    return rows


@pytest.fixture
def people(store: ClickHouseStore) -> ClickHouseStore:
    """Conversation alice (events a1, a2, a3) and bob (b1, b2), each event scored by two judges: 10 rows."""
    insert(store, _rows("alice", ["a1", "a2", "a3"]) + _rows("bob", ["b1", "b2"]))
    return store


def _left(store: ClickHouseStore, table: str = "relevancy_scores") -> list[tuple[str, str]]:
    rows = store.query(
        f"SELECT conversation_id, event_id FROM {store.database}.{table} ORDER BY conversation_id, event_id, judge_id"
    ).rows
    return [(str(c), str(e)) for c, e in rows]


def _rollup_rows(store: ClickHouseStore) -> list[int]:
    return [int(store.query(f"SELECT count() FROM {store.database}.{t}").rows[0][0]) for t in AGGREGATE_TABLES]


def test_forget_by_conversation_and_by_event_deletes_those_rows_only(people: ClickHouseStore) -> None:
    """Forgetting conversation alice and event b1 deletes their 8 rows (both judges); bob's b2 stays; the report
    says so per table and in total, with the ids found; the aggregate tables are listed and left alone."""
    rollups = _rollup_rows(people)
    report = forget(people, ["alice"], ["b1"], clock=lambda: AT)
    assert _left(people) == [("bob", "b2"), ("bob", "b2")]
    table, feedback = report.tables
    assert table.table == f"{people.database}.relevancy_scores"
    assert (feedback.table, feedback.rows_matched, feedback.rows_deleted) == (f"{people.database}.feedback", 0, 0)
    assert (table.rows_matched, table.rows_deleted, table.rows_remaining) == (8, 8, 0)
    assert (table.conversation_ids_found, table.event_ids_found) == (("alice",), ("b1",))
    assert (report.rows_deleted, report.conversation_ids, report.event_ids, report.at, report.dry_run) == (
        8,
        ("alice",),
        ("b1",),
        AT,
        False,
    )
    assert report.aggregate_tables == tuple(f"{people.database}.{t}" for t in AGGREGATE_TABLES)
    assert _rollup_rows(people) == rollups
    audit = report.as_json()
    assert (
        audit["at"] == "2026-12-01T09:30:00+00:00"
        and audit["rows_deleted"] == 8
        and audit["tables"][0]["rows_deleted"] == 8
    )
    assert [a["rows_deleted"] for a in audit["aggregate_tables"]] == [0, 0, 0, 0] and "no ids or text" in audit[
        "aggregate_tables"
    ][0]["note"]


def test_the_rows_are_gone_from_final_reads_too(people: ClickHouseStore) -> None:
    """The replacing table read with FINAL (as the alert rules read it) shows no forgotten row either."""
    forget(people, ["bob"])
    assert people.query(
        f"SELECT count() FROM {people.database}.relevancy_scores FINAL WHERE conversation_id = 'bob'"
    ).rows == [(0,)]
    assert people.query(f"SELECT count() FROM {people.database}.relevancy_scores FINAL").rows == [(6,)]


def test_a_dry_run_counts_and_deletes_nothing(people: ClickHouseStore) -> None:
    """--dry-run reports the rows that match and leaves all 10 rows in place."""
    report = forget(people, ["alice", "nobody"], ["b2"], dry_run=True)
    assert len(_left(people)) == 10
    table, _ = report.tables
    assert (table.rows_matched, table.rows_deleted, table.rows_remaining, report.dry_run) == (8, 0, 8, True)
    assert (table.conversation_ids_found, table.event_ids_found) == (("alice",), ("b2",))


def test_ids_that_match_nothing_are_no_error_and_issue_no_delete(people: ClickHouseStore) -> None:
    """Unknown ids report 0 rows, delete nothing and leave no mutation (no DELETE is sent for a table without
    matches)."""
    report = forget(people, ["carol"], ["zz"])
    assert (report.rows_matched, report.rows_deleted, report.tables[0].conversation_ids_found) == (0, 0, ())
    assert len(_left(people)) == 10
    assert people.query(
        "SELECT count() FROM system.mutations WHERE database = {d:String}", {"d": people.database}
    ).rows == [(0,)]


@pytest.mark.parametrize(
    "evil",
    [
        "x' OR '1'='1",
        "') OR 1=1 --",
        "alice' OR conversation_id != '",
        "\\'; DROP TABLE relevancy_scores; --",
        '"}; DELETE FROM relevancy_scores WHERE 1 --',
        "{conversation_ids:Array(String)}",
        "a\\b\nc\t\x00",
    ],
)
def test_ids_with_quotes_or_sql_are_matched_literally(store: ClickHouseStore, evil: str) -> None:
    """An id holding quotes, SQL, parameter syntax, backslashes or control characters deletes exactly the rows with
    that id (here one event of a conversation named by it) and nothing else; the tables are intact."""
    insert(store, _rows(evil, ["e-evil"]) + _rows("alice", ["a1"]) + _rows("x", ["1"]))
    report = forget(store, [evil], [evil])
    assert report.rows_deleted == 2 and report.tables[0].conversation_ids_found == (evil,)
    assert _left(store) == [("alice", "a1"), ("alice", "a1"), ("x", "1"), ("x", "1")]
    assert forget(store, [], [evil]).rows_matched == 0


def test_every_scores_table_recorded_in_the_database_is_erased(people: ClickHouseStore) -> None:
    """A second scores table migrated into the same database (recorded in schema_migrations) is erased as well."""
    other = ClickHouseStore(people.url, people.database, "other_scores")
    Migrations(other).migrate()
    insert(other, _rows("alice", ["a9"]) + _rows("dave", ["d1"]))
    assert scores_tables(people) == ["relevancy_scores", "other_scores"]
    assert scores_tables(other) == ["other_scores", "relevancy_scores"]
    report = forget(people, ["alice"])
    assert [(t.table.split(".")[1], t.rows_deleted) for t in report.tables] == [
        ("relevancy_scores", 6),
        ("other_scores", 2),
        ("feedback", 0),
    ]
    assert report.rows_deleted == 8
    assert _left(people, "other_scores") == [("dave", "d1"), ("dave", "d1")]


def test_blank_or_missing_ids_are_refused(people: ClickHouseStore) -> None:
    """No id, or an empty one (it would match every row without an id), is a ValueError and deletes nothing."""
    with pytest.raises(ValueError, match="no conversation id or event id"):
        forget(people, [], [])
    with pytest.raises(ValueError, match="empty"):
        forget(people, ["alice", " "])
    assert len(_left(people)) == 10


def test_with_a_cluster_the_delete_is_on_cluster_and_counts_read_every_shard(people: ClickHouseStore) -> None:
    """With a cluster the DELETE goes ON CLUSTER (chDB parses it, then refuses distributed DDL) and the counts read
    `cluster('c', db.t)`."""
    clustered = ClickHouseStore(people.url, people.database, people.table, cluster="prod")
    clustered.schema_ready = True  # chDB cannot run the cluster's DDL: take the (clusterless) schema as checked
    with pytest.raises(StoreError, match="Replicated DDL queries are disabled"):
        clustered.erase_rows("relevancy_scores", "event_id IN {e:Array(String)}", {"e": ["a1"]})
    assert len(_left(people)) == 10
    assert source("db", "t", "prod") == "cluster('prod', db.t)" and source("db", "t") == "db.t"


def test_forget_among_many_rows_deletes_only_its_own_and_reports_its_time(store: ClickHouseStore) -> None:
    """A forget among 20,000 rows deletes exactly its 42 and reports how long it took (elapsed_s)."""
    rows = []
    for c in range(500):
        rows += _rows(f"c{c}", [f"c{c}-e{i}" for i in range(20)])
    insert(store, rows)
    started = time.monotonic()
    report = forget(store, ["c7"], ["c9-e3"])
    took = time.monotonic() - started
    assert report.rows_deleted == 42 and len(_left(store)) == 20_000 - 42
    assert 0 < report.elapsed_s <= took


@pytest.fixture
def never_empty(people: ClickHouseStore, monkeypatch: pytest.MonkeyPatch) -> Iterator[ClickHouseStore]:
    """The store, with a DELETE that does nothing (as if the server deleted asynchronously and never got there)."""
    monkeypatch.setattr(people, "erase_rows", lambda *a, **k: None)
    yield people


def test_rows_still_matching_after_the_delete_are_reported(never_empty: ClickHouseStore) -> None:
    """When rows still match after the DELETE (and the wait), the report says how many remain instead of 0."""
    report = forget(never_empty, ["alice"], verify_timeout_s=0.6)
    assert (report.rows_matched, report.rows_deleted, report.rows_remaining) == (6, 0, 6)


def _erased(store: ClickHouseStore) -> list[tuple[str, str, datetime]]:
    rows = store.query(
        f"SELECT kind, toString(id_sha256), erased_at FROM {store.database}.{ERASED_TABLE} FINAL ORDER BY ALL"
    ).rows
    return [(str(k), str(h), e.replace(tzinfo=UTC) if e.tzinfo is None else e) for k, h, e in rows]


def test_forget_records_the_hashes_of_every_id_asked_and_never_the_ids(people: ClickHouseStore) -> None:
    """Every id asked, matched or not, is recorded as its SHA-256 with the erasure's time and counted; no raw id is
    stored."""
    report = forget(people, ["alice", "zoë"], ["b1", "never-scored"], clock=lambda: AT)
    assert report.ids_recorded == 4 and report.as_json()["ids_recorded"] == 4
    expected = [("conversation", hashlib.sha256(i.encode()).hexdigest(), AT) for i in ("alice", "zoë")]
    expected += [("event", hashlib.sha256(i.encode()).hexdigest(), AT) for i in ("b1", "never-scored")]
    assert _erased(people) == sorted(expected)
    every_cell = people.query(
        f"SELECT arrayStringConcat([kind, toString(id_sha256), toString(erased_at)], '|') FROM "
        f"{people.database}.{ERASED_TABLE}"
    )
    for raw in ("alice", "zoë", "never-scored"):  # not "b1": two hex digits, found in some hash by chance
        assert not any(raw in str(cell) for (cell,) in every_cell.rows), raw


def test_a_dry_run_records_nothing(people: ClickHouseStore) -> None:
    """--dry-run puts no hash in erased_ids and reports 0 ids recorded."""
    report = forget(people, ["alice"], ["b1"], dry_run=True)
    assert report.ids_recorded == 0 and report.as_json()["ids_recorded"] == 0
    assert _erased(people) == []


def test_the_hashes_are_recorded_before_the_delete(people: ClickHouseStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """A DELETE that fails (a crash between the two) leaves the ids' hashes recorded: a replay still skips them."""

    def fail(*args: object, **kwargs: object) -> None:
        raise StoreError("connection lost")

    monkeypatch.setattr(people, "erase_rows", fail)
    with pytest.raises(StoreError, match="connection lost"):
        forget(people, ["alice"], clock=lambda: AT)
    assert _erased(people) == [("conversation", hashlib.sha256(b"alice").hexdigest(), AT)]
    assert len(_left(people)) == 10


def test_a_store_without_erased_ids_is_refused_before_any_delete(people: ClickHouseStore) -> None:
    """Without erased_ids (before migration 039) forget refuses, naming `migrate`, and deletes nothing; a dry run
    counts."""
    people.command(f"DROP TABLE {people.database}.{ERASED_TABLE}")
    with pytest.raises(StoreError, match=r"erased_ids not found .*relevancy-monitor migrate.*nothing was deleted"):
        forget(people, ["alice"])
    assert len(_left(people)) == 10
    assert forget(people, ["alice"], dry_run=True).rows_matched == 6


# ---- users' feedback ---------------------------------------------------------------------------------------------


def _feedback(feedback_id: str, event_id: str = "", conversation_id: str = "", turn: int | None = None) -> FeedbackRow:
    """A thumbs down with a comment naming its answer by event id, or by conversation and turn (`event_id` then being
    the answer found for it, '' when none was)."""
    answer = AnswerRef(event_id=event_id if turn is None else "", conversation_id=conversation_id, turn=turn)
    event = FeedbackEvent(feedback_id, answer, T, "thumbs", 0.0, 1, True, "json", comment=f"{feedback_id}: my [EMAIL]")
    position = KafkaPosition(topic="fb", partition=0, offset=len(feedback_id))
    return FeedbackRow(event, Segment("support", "m1", "v1"), "feedback", position, T, answer_event_id=event_id)


@pytest.fixture
def opinions(people: ClickHouseStore) -> ClickHouseStore:
    """alice's and bob's rows, with feedback: on a1 by event id (no conversation id), on alice's turn 1 (answer a2
    found), on alice's turn 7 (no answer found), on b1 and on b2 by event id, and on e-unscored, an answer never
    scored."""
    rows = [
        _feedback("f-a1", "a1"),
        _feedback("f-a2", "a2", "alice", 1),
        _feedback("f-a-lost", "", "alice", 7),
        _feedback("f-b1", "b1"),
        _feedback("f-b2", "b2"),
        _feedback("f-unscored", "e-unscored"),
    ]
    people.insert_table("feedback", FEEDBACK_COLUMNS, [feedback_values(r) for r in rows])
    return people


def _feedback_left(store: ClickHouseStore) -> list[str]:
    return [str(r[0]) for r in store.query(f"SELECT feedback_id FROM {store.database}.feedback ORDER BY 1").rows]


def test_forget_by_conversation_deletes_its_feedback_even_when_named_by_event_id(opinions: ClickHouseStore) -> None:
    """Forgetting conversation alice deletes the feedback with her conversation id (turn 1, and turn 7 whose answer
    was never found) and the feedback naming her scored answer a1 by event id only; bob's feedback stays; the feedback
    table's line counts them and names the asked conversation as found; the feedback rollup is listed and kept."""
    rollup = opinions.query(f"SELECT sum(n_feedback) FROM {opinions.database}.feedback_rollup_1m").rows
    report = forget(opinions, ["alice"], clock=lambda: AT)
    assert _feedback_left(opinions) == ["f-b1", "f-b2", "f-unscored"]
    scores, feedback = report.tables
    assert (scores.rows_deleted, feedback.table) == (6, f"{opinions.database}.feedback")
    assert (feedback.rows_matched, feedback.rows_deleted, feedback.rows_remaining) == (3, 3, 0)
    assert (feedback.conversation_ids_found, feedback.event_ids_found) == (("alice",), ())
    assert report.rows_deleted == 9 and report.as_json()["tables"][1]["rows_deleted"] == 3
    assert f"{opinions.database}.feedback_rollup_1m" in report.aggregate_tables
    assert opinions.query(f"SELECT sum(n_feedback) FROM {opinions.database}.feedback_rollup_1m").rows == rollup


def test_forget_by_event_id_deletes_the_feedback_on_that_answer(opinions: ClickHouseStore) -> None:
    """Forgetting events b1 and e-unscored (never scored) deletes the feedback on each, and only that."""
    report = forget(opinions, [], ["b1", "e-unscored"])
    assert _feedback_left(opinions) == ["f-a-lost", "f-a1", "f-a2", "f-b2"]
    scores, feedback = report.tables
    assert (scores.rows_deleted, feedback.rows_deleted, feedback.event_ids_found) == (2, 2, ("b1", "e-unscored"))
    assert report.rows_deleted == 4


def test_a_dry_run_counts_the_feedback_and_deletes_none(opinions: ClickHouseStore) -> None:
    """--dry-run counts alice's three feedback rows and b2's one, and leaves every feedback row in place."""
    report = forget(opinions, ["alice"], ["b2"], dry_run=True)
    assert len(_feedback_left(opinions)) == 6
    _, feedback = report.tables
    assert (feedback.rows_matched, feedback.rows_deleted, feedback.rows_remaining) == (4, 0, 4)
    assert report.rows_matched == 8 + 4


def test_a_store_without_the_feedback_table_is_erased_as_before(people: ClickHouseStore) -> None:
    """A store of an older schema (no feedback table, no feedback rollup) is no error: the scores rows go and the
    report lists the scores table and the aggregates it has only."""
    db = people.database
    for name in ("feedback_rollup_1m_mv", "feedback", "feedback_rollup_1m"):
        people.command(f"DROP TABLE {db}.{name} SYNC")
    report = forget(people, ["alice"])
    assert [t.table for t in report.tables] == [f"{db}.relevancy_scores"] and report.rows_deleted == 6
    assert report.aggregate_tables == tuple(f"{db}.{t}" for t in AGGREGATE_TABLES if t != "feedback_rollup_1m")


def test_an_erasure_stopped_before_the_feedback_delete_finds_it_when_run_again(
    opinions: ClickHouseStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A DELETE of the feedback that fails leaves the scores rows in place, so forgetting alice again still finds
    the feedback naming her answer a1 by event id only, and deletes it."""
    real = opinions.erase_rows

    def fail_on_feedback(table: str, where: str, parameters: dict[str, Any]) -> None:
        if table == "feedback":
            raise StoreError("connection lost")
        real(table, where, parameters)

    monkeypatch.setattr(opinions, "erase_rows", fail_on_feedback)
    with pytest.raises(StoreError, match="connection lost"):
        forget(opinions, ["alice"])
    monkeypatch.setattr(opinions, "erase_rows", real)
    report = forget(opinions, ["alice"])
    assert _feedback_left(opinions) == ["f-b1", "f-b2", "f-unscored"] and report.rows_deleted == 6 + 3
