"""The UI's reads (synchronous: the app runs them on its one store thread). The overview and alert pages read the
minute and hour rollups (`relevancy_minutely`, `relevancy_hourly` and, for a first or last minute, the rollup tables
under them) and `alert_state` FINAL, never the scores table; only one answer, one page of rows, or the worst few
answers of a segment (each with a LIMIT) come from the scores table.

Every value is bound as a query parameter; table names are the store's, checked as plain identifiers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from monitor.alerts.queries import SHADOW_ROW
from monitor.alerts.windows import utc
from monitor.report.model import Segment, SegmentBucket
from monitor.report.queries import finite, identifier
from monitor.store.connection import ClickHouseStore

_TS = "DateTime64(3, 'UTC')"
MINUTE_ROLLUP = "relevancy_rollup_1m"
MINUTELY = "relevancy_minutely"
HOURLY = "relevancy_hourly"
SEGMENT_COLUMNS = ("app", "model", "prompt_version", "judge_id", "judge")
ANSWER_CHARS = 20_000  # one answer's texts, cut past this (the page says so)
WORST_ANSWERS = 10


def _db(store: ClickHouseStore) -> str:
    return identifier(store.database)


def scores_table(store: ClickHouseStore) -> str:
    """`database.table` of the scores, checked."""
    return f"{_db(store)}.{identifier(store.table)}"


def latest_minute(store: ClickHouseStore) -> datetime | None:
    """The last minute with judged rows (from the minute rollup's sort key: no scan of the scores), None when empty."""
    rows = store.query(f"SELECT max(minute), count() FROM {_db(store)}.{MINUTE_ROLLUP}").rows
    last, n = rows[0]
    return utc(last) if int(n) else None


@dataclass(frozen=True, slots=True)
class SegmentWindow:
    """One segment's ok rows and mean score in a window (None: no ok rows)."""

    app: str
    model: str
    prompt_version: str
    judge_id: str
    ok_rows: int
    rows: int
    mean: float | None


@dataclass(frozen=True, slots=True)
class SegmentHour:
    """One segment's hour: its ok rows and mean score."""

    app: str
    model: str
    prompt_version: str
    judge_id: str
    hour: datetime
    ok_rows: int
    score_sum: float


def current_window(store: ClickHouseStore, since: datetime, until: datetime) -> list[SegmentWindow]:
    """Every segment's rows in [since, until), from the minute rollup."""
    sql = (
        "SELECT app, model, prompt_version, judge_id, sum(ok_rows), sum(rows), "
        "sum(mean_score * ok_rows) / nullIf(sum(ok_rows), 0)\n"
        f"FROM {_db(store)}.{MINUTELY} WHERE minute >= {{since:{_TS}}} AND minute < {{until:{_TS}}}\n"
        "GROUP BY app, model, prompt_version, judge_id ORDER BY app, model, prompt_version, judge_id"
    )
    return [
        SegmentWindow(str(a), str(m), str(pv), str(j), int(ok), int(n), finite(mean))
        for a, m, pv, j, ok, n, mean in store.query(sql, {"since": since, "until": until}).rows
    ]


def hourly(store: ClickHouseStore, since: datetime, until: datetime) -> list[SegmentHour]:
    """Every segment's hours in [since, until), from the hour rollup."""
    sql = (
        "SELECT app, model, prompt_version, judge_id, hour, sum(ok_rows), sum(mean_score * ok_rows)\n"
        f"FROM {_db(store)}.{HOURLY} WHERE hour >= {{since:{_TS}}} AND hour < {{until:{_TS}}}\n"
        "GROUP BY app, model, prompt_version, judge_id, hour ORDER BY hour"
    )
    return [
        SegmentHour(str(a), str(m), str(pv), str(j), utc(h), int(ok), finite(s) or 0.0)
        for a, m, pv, j, h, ok, s in store.query(sql, {"since": since, "until": until}).rows
    ]


def zoom_buckets(
    store: ClickHouseStore, app: str, since: datetime, until: datetime, bucket_s: int
) -> list[SegmentBucket]:
    """The app's segments in buckets of `bucket_s` (a whole number of minutes) over [since, until), from the minute
    rollup, unweighted (each ok row weighs 1), as the report's charts take them."""
    sql = (
        "SELECT toStartOfInterval(minute, toIntervalSecond({bucket:UInt32})) AS t, prompt_version, judge_id,\n"
        "       any(judge), sum(rows), sum(ok_rows), sum(error_rows), sum(mean_score * ok_rows), sum(low_score_rows),\n"
        "       sum(ok_rows * (pow(score_stddev, 2) + pow(mean_score, 2)))\n"
        f"FROM {_db(store)}.{MINUTELY}\n"
        f"WHERE app = {{app:String}} AND minute >= {{since:{_TS}}} AND minute < {{until:{_TS}}}\n"
        "GROUP BY t, prompt_version, judge_id ORDER BY t, prompt_version, judge_id"
    )
    params = {"app": app, "since": since, "until": until, "bucket": bucket_s}
    out = []
    for t, pv, jid, judge, rows, ok, errors, s, low, sq in store.query(sql, params).rows:
        segment = Segment(app, str(pv), str(jid), str(judge))
        ok_rows = int(ok)
        out.append(
            SegmentBucket(
                utc(t), segment, int(rows), ok_rows, int(errors), float(ok_rows), finite(s) or 0.0, float(low),
                float(ok_rows), finite(sq) or 0.0,
            )
        )  # fmt: skip
    return out


def first_minutes(store: ClickHouseStore, app: str, since: datetime) -> list[tuple[str, str, datetime]]:
    """(kind, value, first minute) of the app's prompt versions and models since `since`, from the minute rollup."""
    rollup = f"{_db(store)}.{MINUTE_ROLLUP}"
    sql = (
        f"SELECT 'prompt_version', prompt_version, min(minute) FROM {rollup} WHERE app = {{app:String}} AND "
        f"minute >= {{since:{_TS}}} AND prompt_version != '' GROUP BY prompt_version\n"
        f"UNION ALL SELECT 'model', model, min(minute) FROM {rollup} WHERE app = {{app:String}} AND "
        f"minute >= {{since:{_TS}}} AND model != '' GROUP BY model"
    )
    return [(str(k), str(v), utc(t)) for k, v, t in store.query(sql, {"app": app, "since": since}).rows]


@dataclass(frozen=True, slots=True)
class RowFilter:
    """Which scored rows a page lists: a time range and exact values of segment columns, a score range, and
    alternatives of segment filters (a rule's segments: a row matches any one of them)."""

    since: datetime
    until: datetime
    equal: tuple[tuple[str, str], ...] = ()
    score_min: float | None = None
    score_max: float | None = None
    any_of: tuple[tuple[tuple[str, str], ...], ...] | None = None  # None: no rule; () : a rule with no segment


def _where(f: RowFilter, params: dict[str, Any]) -> str:
    terms = [f"event_time >= {{since:{_TS}}}", f"event_time < {{until:{_TS}}}"]
    params.update(since=f.since, until=f.until)
    for i, (column, value) in enumerate(f.equal):
        if column not in SEGMENT_COLUMNS:
            raise ValueError(f"{column!r} is no segment column")
        params[f"eq_{i}"] = value
        terms.append(f"{column} = {{eq_{i}:String}}")
    if f.score_min is not None:
        params["score_min"] = f.score_min
        terms.append("score >= {score_min:Float64}")
    if f.score_max is not None:
        params["score_max"] = f.score_max
        terms.append("score <= {score_max:Float64}")
    if f.any_of is not None:
        alternatives = []
        for i, segment in enumerate(f.any_of):
            parts = []
            for j, (column, value) in enumerate(segment):
                if column in SEGMENT_COLUMNS:
                    params[f"seg_{i}_{j}"] = value
                    parts.append(f"{column} = {{seg_{i}_{j}:String}}")
            alternatives.append("(" + (" AND ".join(parts) or "1") + ")")
        terms.append("(" + (" OR ".join(alternatives) or "0") + ")")
    return " AND ".join(terms)


@dataclass(frozen=True, slots=True)
class ListedRow:
    """One scored row as a list shows it."""

    event_time: datetime
    event_id: str
    app: str
    model: str
    prompt_version: str
    judge_id: str
    status: str
    score: float | None
    shadow: bool
    question: str  # its first QUESTION_CLIP characters, as stored ('' under MONITOR_STORE_TEXT=none)
    statements: int
    off_topic: int  # statements the judge found not relevant (verdict `no`)


QUESTION_CLIP = 140
_LISTED = (
    "event_time, event_id, app, model, prompt_version, judge_id, toString(status), score, "
    f"{SHADOW_ROW}, leftUTF8(question, {QUESTION_CLIP}), length(verdicts), countEqual(verdicts, 'no')"
)


def _listed(rows: Sequence[tuple[Any, ...]]) -> list[ListedRow]:
    return [
        ListedRow(
            utc(t),
            str(e),
            str(a),
            str(m),
            str(pv),
            str(j),
            str(st),
            finite(s),
            bool(sh),
            str(q),
            int(n),
            int(no),
        )
        for t, e, a, m, pv, j, st, s, sh, q, n, no in rows
    ]


def rows_page(store: ClickHouseStore, f: RowFilter, limit: int, offset: int) -> list[ListedRow]:
    """One page of the rows `f` selects, newest first (`limit` rows from `offset`)."""
    params: dict[str, Any] = {"limit": limit, "offset": offset}
    sql = (
        f"SELECT {_LISTED} FROM {scores_table(store)} FINAL WHERE {_where(f, params)}\n"
        "ORDER BY event_time DESC, event_id, judge_id LIMIT {limit:UInt32} OFFSET {offset:UInt64}"
    )
    return _listed(store.query(sql, params).rows)


def worst_rows(store: ClickHouseStore, f: RowFilter, limit: int = WORST_ANSWERS) -> list[ListedRow]:
    """The lowest-scoring ok primary rows `f` selects, worst first, one per answer text."""
    params: dict[str, Any] = {"limit": limit}
    sql = (
        f"SELECT {_LISTED} FROM {scores_table(store)} FINAL\n"
        f"WHERE {_where(f, params)} AND status = 'ok' AND NOT {SHADOW_ROW}\n"
        "ORDER BY score ASC, event_time DESC, event_id LIMIT 1 BY response LIMIT {limit:UInt32}"
    )
    return _listed(store.query(sql, params).rows)


@dataclass(frozen=True, slots=True)
class AnswerRow:
    """Every stored column of one judged row that the answer page shows."""

    event_time: datetime
    event_id: str
    conversation_id: str
    app: str
    model: str
    prompt_version: str
    metadata: tuple[tuple[str, str], ...]
    judge: str
    judge_model: str
    judge_id: str
    status: str
    error: str
    score: float | None
    raw_score: float | None
    reasoning: str
    statements: tuple[str, ...]
    verdicts: tuple[str, ...]
    verdict_reasons: tuple[str, ...]
    question: str
    response: str
    turn: int
    context: str
    system_instructions: str
    sample_rule: str
    shadow: bool


def answer_rows(store: ClickHouseStore, event_id: str, judge_id: str | None) -> list[AnswerRow]:
    """Every judge's row of one event (or `judge_id`'s), the primary judge's first."""
    cut = "substringUTF8({c}, 1, {{chars:UInt32}})"
    params: dict[str, Any] = {"event_id": event_id, "chars": ANSWER_CHARS + 1}
    judge = ""
    if judge_id:
        params["judge_id"] = judge_id
        judge = " AND judge_id = {judge_id:String}"
    sql = (
        "SELECT event_time, event_id, conversation_id, app, model, prompt_version, metadata, judge, judge_model,\n"
        "       judge_id, toString(status), error, score, raw_score, "
        f"{cut.format(c='reasoning')}, statements, verdicts, verdict_reasons,\n"
        f"       {cut.format(c='question')}, {cut.format(c='response')}, turn, {cut.format(c='context')},\n"
        f"       {cut.format(c='system_instructions')}, sample_rule, {SHADOW_ROW}\n"
        f"FROM {scores_table(store)} FINAL WHERE event_id = {{event_id:String}}{judge}\n"
        f"ORDER BY {SHADOW_ROW}, status != 'ok', judge_id LIMIT 20"
    )
    out = []
    for r in store.query(sql, params).rows:
        (t, eid, cid, app, model, pv, meta, judge_name, jmodel, jid, status, error, score, raw, reasoning, statements,
         verdicts, reasons, question, response, turn, context, system, rule, shadow) = r  # fmt: skip
        out.append(
            AnswerRow(
                utc(t), str(eid), str(cid), str(app), str(model), str(pv),
                tuple(sorted((str(k), str(v)) for k, v in dict(meta).items())), str(judge_name), str(jmodel), str(jid),
                str(status), str(error), finite(score), finite(raw), str(reasoning), tuple(str(s) for s in statements),
                tuple(str(v) for v in verdicts), tuple(str(s) for s in reasons), str(question), str(response),
                int(turn), str(context), str(system), str(rule), bool(shadow),
            )
        )  # fmt: skip
    return out
