"""Every example query in queries/ runs on chDB against a populated table and answers sensibly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from monitor.store.connection import ClickHouseStore
from schemas.scored import ScoredRow
from tests.monitor.alerts.conftest import insert, make_row

QUERIES = sorted((Path(__file__).resolve().parents[3] / "queries").glob("*.sql"))


def populated_rows(now: datetime) -> list[ScoredRow]:
    """Rows of the last hours: two apps, two prompt versions, errors, sampling rates, statements and a duplicate."""
    rows = []
    for i in range(60):
        t = now - timedelta(minutes=i * 2 + 1)
        rows.append(
            make_row(
                t,
                app="a",
                prompt_version="v1",
                score=0.9 - i * 0.01,
                sample_rate=1.0,
                statements=["s1", "s2", "s3"],
                verdicts=["yes", "no", "no"] if i % 3 == 0 else ["yes", "yes", "idk"],
            )
        )
        v2 = make_row(t, app="a", prompt_version="v2", score=0.3, sample_rate=0.1)
        rows.append(v2.model_copy(update={"conversation_id": f"conv-v2-{i // 3}", "turn": 2 - i % 3}))
        rows.append(
            make_row(
                t,
                app="b",
                prompt_version="v1",
                score=0.6,
                cost=None,
                judge="statements",
                statements=["x"],
                verdicts=["yes"],
            )
        )
        if i % 10 == 0:
            rows.append(make_row(t, app="b", status="error", cost=None))
    return rows


@pytest.mark.parametrize("path", QUERIES, ids=[p.name for p in QUERIES])
def test_query_runs_and_returns_rows(store: ClickHouseStore, path: Path) -> None:
    """Each example query starts with a comment, runs on a populated table and answers sensibly."""
    rows = populated_rows(datetime.now(UTC))
    insert(store, rows)
    insert(store, rows[:3])  # a redelivery
    text = path.read_text(encoding="utf-8")
    assert text.startswith("--"), "each example starts with a comment saying what it answers"
    result = store.query(
        text.replace("{table}", store.qualified_table)
    )  # exactly what `relevancy-monitor sql --file` does
    assert result.rows, path.name
    got = [dict(zip(result.columns, r, strict=True)) for r in result.rows]
    if path.name == "traffic_weighted_mean.sql":
        a = next(r for r in got if r["app"] == "a")
        # v1 (weight 1, mean ~0.6) and v2 (weight 10, 0.3): the weighted mean leans to v2.
        assert a["traffic_weighted_mean"] < a["plain_mean"]
        assert a["estimated_events"] == 60 + 600
    elif path.name == "worst_answers_last_hour.sql":
        assert {r["app"] for r in got} == {"a", "b"} and len(got) == 10
        assert [r["score"] for r in got if r["app"] == "a"] == [0.3] * 5
    elif path.name == "statement_padding.sql":
        a = next(r for r in got if r["app"] == "a")
        assert a["answers"] == 60 and a["statements_per_answer"] == 3
        assert a["padded_answer_share"] == pytest.approx(20 / 60, abs=1e-4)
    elif path.name == "duplicates.sql":
        assert sum(r["duplicate_rows"] for r in got) == 3
    elif path.name == "worst_conversations.sql":
        # app a's v2 answers are conversations of 3 turns, every one scoring 0.3: the least relevant.
        assert len(got) == 10 and all(r["judged_turns"] == 3 and r["relevant_share"] == 0 for r in got)
        assert {r["app"] for r in got} == {"a"} and all(r["lowest_turn"] == 0 for r in got)
    elif path.name == "error_rate.sql":
        b = [r for r in got if r["app"] == "b" and r["errors"]]
        assert b and all(r["top_reason"] == ["unavailable"] for r in b)


def test_the_folder_has_the_documented_examples() -> None:
    """The queries folder holds the documented examples, and its README names every file."""
    names = {p.name for p in QUERIES}
    assert {
        "worst_answers_last_hour.sql",
        "relevancy_by_prompt_version.sql",
        "traffic_weighted_mean.sql",
        "judge_cost_per_day.sql",
        "error_rate.sql",
        "statement_padding.sql",
    } <= names
    readme = (QUERIES[0].parent / "README.md").read_text(encoding="utf-8")
    assert all(n in readme for n in names)


_SQL_FILES = """
import json, sys, uuid
from datetime import UTC, datetime
from monitor.cli.main import main
from monitor.store.connection import ClickHouseStore
from monitor.store.migrations import Migrations
from monitor.config import load_settings
from tests.monitor.alerts.test_queries import populated_rows
s = load_settings()
store = ClickHouseStore(s.store.url, s.store.database, s.store.table)
Migrations(store).ensure()
store.insert_rows(populated_rows(datetime.now(UTC)), uuid.uuid4().hex)
store.close()
codes = [main(["sql", "--format", "json", "--file", f]) for f in sys.argv[1:]]
sys.exit(max(codes))
"""


def test_each_file_runs_through_relevancy_monitor_sql_file(tmp_path: Path) -> None:
    """Every example runs through `relevancy-monitor sql --file` in a fresh process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MONITOR_")}
    env["MONITOR_CLICKHOUSE_URL"] = f"chdb://{tmp_path / 'chdb'}"
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, "-c", _SQL_FILES, *map(str, QUERIES)],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(x) for x in done.stdout.splitlines()]
    assert len(lines) > len(QUERIES)
