"""`relevancy-monitor forget` end to end, each command in its own process on its own embedded store: the report
(one line per table, users' feedback included, and a total, or JSON for an audit trail), exit 0; no id is a usage
error (exit 2, one line); a missing store is one line (exit 1) and creates nothing."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# Run in a fresh process (chDB allows one store per process): migrate the store at argv[1] and write the rows of
# conversations alice (events a1, a2) and bob (b1), each event scored by two judges, and a user's thumbs down with a
# comment on a1 and on b1 (each naming its answer by event id).
_SEED = """
import sys
from datetime import UTC, datetime, timedelta
from monitor.store.connection import ClickHouseStore
from monitor.store.migrations import Migrations
from tests.monitor.alerts.conftest import insert, make_row
from tests.monitor.alerts.feedback_rows import insert_feedback
store = ClickHouseStore(sys.argv[1], "relevancy", "relevancy_scores")
Migrations(store).migrate()
t = datetime.now(UTC) - timedelta(hours=1)
rows = []
for conversation, events in (("alice", ["a1", "a2"]), ("bob", ["b1"])):
    for event in events:
        row = make_row(t, event_id=event).model_copy(update={"conversation_id": conversation})
        rows += [row, row.model_copy(update={"judge_id": "j2"})]
insert(store, rows)
insert_feedback(store, [(t, "support", True, "a1"), (t, "support", True, "b1")], comment="my email is [EMAIL]")
store.close()
"""


def _env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MONITOR_", "ALERTS_", "ANTHROPIC_"))}
    return {**base, "PYTHONPATH": str(ROOT), **extra}


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor.cli.main", *args],
        env=_env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def seeded(tmp_path: Path) -> str:
    """The URL of an embedded store in its own directory holding alice's 4 rows and bob's 2."""
    url = f"chdb://{tmp_path / 'store'}"
    done = subprocess.run(
        [sys.executable, "-c", _SEED, url], env=_env(), cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return url


def _conversations(url: str, cwd: Path) -> list[str]:
    return _column(url, cwd, "SELECT conversation_id FROM {table} ORDER BY conversation_id")


def _feedback_answers(url: str, cwd: Path) -> list[str]:
    return _column(url, cwd, "SELECT event_id FROM relevancy.feedback ORDER BY event_id")


def _column(url: str, cwd: Path, sql: str) -> list[str]:
    done = _cli("sql", "--clickhouse-url", url, "--format", "csv", sql, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[1:]


def test_forget_prints_one_line_per_table_and_a_total(seeded: str, tmp_path: Path) -> None:
    """Forgetting alice and event b1 deletes all 6 scores rows and both feedback rows, records the 3 ids' hashes,
    prints the scores table's line, the feedback table's, the aggregate tables' lines (nothing deleted), the hashes'
    line and the total, and exits 0."""
    done = _cli(
        "forget",
        "--clickhouse-url",
        seeded,
        "--conversation-id",
        "alice",
        "--event-id",
        "b1",
        "--event-id",
        "nope",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert (
        lines[0]
        == "relevancy.relevancy_scores: 6 row(s) deleted (1 of 1 conversation id(s) found, 1 of 2 event id(s) found)"
    )
    assert (
        lines[1] == "relevancy.feedback: 2 row(s) deleted (0 of 1 conversation id(s) found, 1 of 2 event id(s) found)"
    )
    assert lines[2:6] == [
        f"relevancy.{t}: 0 rows deleted (aggregates only: no ids or text)"
        for t in ("traffic_counts", "relevancy_rollup_1m", "relevancy_rollup_1h", "feedback_rollup_1m")
    ]
    assert lines[6] == "relevancy.erased_ids: 3 id hash(es) recorded (a replay skips those ids)"
    assert len(lines) == 8 and lines[7].startswith("total: 8 row(s) deleted from 2 table(s) of relevancy ("), lines
    assert _conversations(seeded, tmp_path) == [] and _feedback_answers(seeded, tmp_path) == []
    done = _cli(
        "sql",
        "--clickhouse-url",
        seeded,
        "--format",
        "csv",
        "SELECT kind, toString(id_sha256) FROM relevancy.erased_ids ORDER BY ALL",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    hashed = [
        f"conversation,{hashlib.sha256(b'alice').hexdigest()}",
        *sorted(f"event,{hashlib.sha256(i).hexdigest()}" for i in (b"b1", b"nope")),
    ]
    assert done.stdout.splitlines()[1:] == hashed


def test_forget_json_is_an_audit_record_and_a_dry_run_deletes_nothing(seeded: str, tmp_path: Path) -> None:
    """--format json --dry-run prints the time, the ids and the counts (bob's feedback on b1 included), and leaves
    every row in place."""
    done = _cli(
        "forget", "--clickhouse-url", seeded, "--conversation-id", "bob", "--dry-run", "--format", "json", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert datetime.fromisoformat(record["at"]).tzinfo is not None
    assert (record["dry_run"], record["conversation_ids"], record["event_ids"]) == (True, ["bob"], [])
    assert (record["rows_matched"], record["rows_deleted"], record["ids_recorded"]) == (3, 0, 0)
    assert record["tables"][0] == {
        "table": "relevancy.relevancy_scores",
        "rows_matched": 2,
        "rows_deleted": 0,
        "rows_remaining": 2,
        "conversation_ids_found": ["bob"],
        "event_ids_found": [],
    }
    assert record["tables"][1] == {
        "table": "relevancy.feedback",
        "rows_matched": 1,
        "rows_deleted": 0,
        "rows_remaining": 1,
        "conversation_ids_found": [],
        "event_ids_found": [],
    }
    assert _conversations(seeded, tmp_path) == ["alice"] * 4 + ["bob"] * 2
    assert _feedback_answers(seeded, tmp_path) == ["a1", "b1"]


def test_forget_without_an_id_is_a_usage_error_in_one_line(tmp_path: Path) -> None:
    """No --conversation-id or --event-id: exit 2 with one line saying to give one, before opening any store."""
    done = _cli("forget", "--clickhouse-url", f"chdb://{tmp_path / 'store'}", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == "relevancy-monitor: error: give at least one --conversation-id ID or --event-id ID\n"
    assert done.stdout == "" and list(tmp_path.iterdir()) == []


def test_forget_on_a_missing_store_is_one_line_and_creates_nothing(tmp_path: Path) -> None:
    """A store that does not exist: exit 1, one line naming it and how to create it; no directory is left."""
    done = _cli("forget", "--clickhouse-url", f"chdb://{tmp_path / 'store'}", "--event-id", "e1", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(
        f"relevancy-monitor: error: no embedded ClickHouse store at {tmp_path / 'store'}"
    )
    assert list(tmp_path.iterdir()) == []
