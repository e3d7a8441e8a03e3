"""The reads of `compare`, through `ClickHouseStore.query`: the judges with rows in a range, the events two of them
both scored ok (always FINAL: ReplacingMergeTree keeps duplicates until it merges), and the detail of a few.

Both rows of an event carry its event time, so the range is on `event_time` for both; times and judge ids are
bound as query parameters."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from monitor.compare.agreement import SharedEvent
from monitor.store.connection import ClickHouseStore

QUESTION_CHARS = 300  # a snippet: the disagreement list shows one line of it
_TS = "DateTime64(3, 'UTC')"
_RANGE = f"event_time >= {{since:{_TS}}} AND event_time < {{until:{_TS}}}"


@dataclass(frozen=True, slots=True)
class JudgeRows:
    """A judge with rows in the range: its id, method, model, rows and ok rows."""

    judge_id: str
    judge: str
    judge_model: str
    rows: int
    ok_rows: int


def judges_in_range(store: ClickHouseStore, since: datetime, until: datetime) -> list[JudgeRows]:
    """Every judge_id with rows in [since, until), most rows first."""
    result = store.query(
        f"SELECT judge_id, any(judge), any(judge_model), count(), countIf(status = 'ok') FROM {store.qualified_table} "
        "FINAL "
        f"WHERE {_RANGE} GROUP BY judge_id ORDER BY count() DESC, judge_id",
        {"since": since, "until": until},
    )
    return [JudgeRows(str(r[0]), str(r[1]), str(r[2]), int(r[3]), int(r[4])) for r in result.rows]


def shared_scores(
    store: ClickHouseStore, judge_a: str, judge_b: str, since: datetime, until: datetime
) -> list[SharedEvent]:
    """The events in the range both judges scored ok (same app and event_id), scores only, by app and event id."""

    def side(param: str) -> str:
        return (
            f"SELECT app, event_id, score FROM {store.qualified_table} FINAL WHERE judge_id = {{{param}:String}} AND "
            f"status = 'ok' AND {_RANGE}"
        )

    result = store.query(
        f"SELECT a.app, a.event_id, a.score, b.score FROM ({side('a')}) AS a "
        f"INNER JOIN ({side('b')}) AS b ON a.app = b.app AND a.event_id = b.event_id ORDER BY a.app, a.event_id",
        {"a": judge_a, "b": judge_b, "since": since, "until": until},
    )
    return [SharedEvent(str(r[0]), str(r[1]), float(r[2]), float(r[3])) for r in result.rows]


def with_detail(
    store: ClickHouseStore, events: Sequence[SharedEvent], judge_a: str, judge_b: str, since: datetime, until: datetime
) -> list[SharedEvent]:
    """`events` with their question snippet (judge a's text, else judge b's: a row may keep none) and both verdict
    lists."""
    if not events:
        return []
    result = store.query(
        f"SELECT judge_id, app, event_id, leftUTF8(question, {QUESTION_CHARS}), verdicts FROM {store.qualified_table} "
        "FINAL "
        f"WHERE judge_id IN ({{a:String}}, {{b:String}}) AND event_id IN {{ids:Array(String)}} AND {_RANGE}",
        {"a": judge_a, "b": judge_b, "ids": sorted({e.event_id for e in events}), "since": since, "until": until},
    )
    found = {(str(r[0]), str(r[1]), str(r[2])): (str(r[3]), tuple(str(v) for v in r[4])) for r in result.rows}
    out = []
    for e in events:
        qa, va = found.get((judge_a, e.app, e.event_id), ("", ()))
        qb, vb = found.get((judge_b, e.app, e.event_id), ("", ()))
        out.append(SharedEvent(e.app, e.event_id, e.score_a, e.score_b, qa or qb, va, vb))
    return out
