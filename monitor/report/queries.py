"""The report's reads: the scores table (always FINAL: ReplacingMergeTree keeps duplicates until it merges; the live
consumer's rows only unless replays are included), the traffic counts (SummingMergeTree: sum() ... GROUP BY) and
the alert state, through `ClickHouseStore.query`.

Times and limits are bound as query parameters; table names are the store's, checked as plain identifiers."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

from monitor.alerts.queries import SHADOW_ROW
from monitor.alerts.state import STATE_TABLE, StateStore
from monitor.alerts.windows import utc
from monitor.feedback.agreement_queries import JudgeUserAgreement, judge_user_agreement
from monitor.report.buckets import bucket_seconds
from monitor.report.focus import SegmentFilter, change_of, example_sources, focus_window, segment_filter
from monitor.report.model import (
    LOW_SCORE_BELOW,
    CanaryPoint,
    Change,
    Conversation,
    CostDay,
    ErrorReason,
    Example,
    Figures,
    Firing,
    FirstSeen,
    HealthBucket,
    JudgeTotals,
    Replays,
    ReportData,
    Segment,
    SegmentBucket,
    ShadowPoint,
    TableStatus,
    TrafficBucket,
    Zoom,
)
from monitor.report.totals import segment_totals
from monitor.store.connection import ClickHouseStore
from schemas.canary import CANARY_TABLE
from schemas.feedback import FEEDBACK_TABLE

DEFAULT_TRAFFIC_TABLE = "traffic_counts"
DEFAULT_DAYS = 7  # the default range: all the data in the store, up to this many days back
FIRST_SEEN_LOOKBACK = timedelta(days=30)  # a version is new in the range when no row of it is in the 30 days before
WORST_EXAMPLES = 20
WORST_CONVERSATIONS = 10
EXAMPLE_CHARS = 1200  # per text: enough to judge a verdict by, small enough for a page of twenty
EXAMPLE_STATEMENTS = 25

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TS = "DateTime64(3, 'UTC')"
_RANGE = f"event_time >= {{since:{_TS}}} AND event_time < {{until:{_TS}}}"
# Rows of `relevancy-monitor replay` carry its run id (migration 036); the live consumer writes ''.
_LIVE = " AND replay_run = ''"
_BUCKET = "toStartOfInterval({column}, toIntervalSecond({{bucket:UInt32}}))"
# A 429 reaches a row only when the provider kept refusing past the retries: the judge's error then names the kind
# (`unavailable: rate_limited: HTTP 429 ...`). Most rate limiting makes events wait instead of failing.
_RATE_LIMITED = "(positionCaseInsensitive(error, 'rate_limited') > 0 OR position(error, 'HTTP 429') > 0)"
_WHOLE_MINUTES = f"toStartOfMinute(event_time) >= {{since:{_TS}}} AND toStartOfMinute(event_time) < {{until:{_TS}}}"
_LAG_S = "dateDiff('millisecond', event_time, scored_at) / 1000.0"


def identifier(name: str) -> str:
    """`name`, refused unless a plain identifier (it is formatted into SQL, not bound)."""
    if not _IDENT.match(name):
        raise ValueError(f"{name!r} is not a plain identifier")
    return name


def finite(value: Any) -> float | None:
    """A number as a float, None for NULL, NaN or an infinity (what the pages show as a dash)."""
    if value is None:
        return None
    f = float(value)
    return f if math.isfinite(f) else None


@dataclass(frozen=True, slots=True)
class _Scope:
    """What every read of one report shares: the scores table, the bound range, which rows and how they weigh."""

    db: str
    scores: str  # database.table of the scores
    params: dict[str, Any]  # since, until, bucket, low
    weighted: bool  # the table has sample_rate: a row weighs 1/sample_rate
    replays: Replays | None  # None: a table from before migration 036, with no replayed rows to leave out or count
    live: str  # `_LIVE` when only the live consumer's rows are read, else ""

    @property
    def weight(self) -> str:
        """A row's weight, as SQL."""
        return "1 / greatest(sample_rate, 1e-6)" if self.weighted else "1"

    @property
    def where(self) -> str:
        """The rows of the range the report reads."""
        return _RANGE + self.live

    @property
    def primary(self) -> str:
        """Those rows without the shadow judge's."""
        return f"{self.where} AND NOT {SHADOW_ROW}"


@dataclass(frozen=True, slots=True)
class _Optional:
    """What the tables the store may lack (traffic counts, alert state, canary runs) hold, and whether each is there."""

    traffic: tuple[TrafficBucket, ...] = ()
    traffic_status: TableStatus = "missing"
    firings: tuple[Firing, ...] = ()
    alert_status: TableStatus = "missing"
    canaries: tuple[CanaryPoint, ...] = ()
    canary_status: TableStatus = "missing"
    judge_users: tuple[JudgeUserAgreement, ...] = ()
    feedback_status: TableStatus = "missing"


@dataclass(frozen=True, slots=True)
class _Story:
    """The lead change, its figures and zoom, and the worst examples of the segments it concerns."""

    change: Change | None
    figures: Figures | None
    zoom: Zoom | None
    examples: tuple[Example, ...]


def fetch_report_data(
    store: ClickHouseStore,
    since: datetime,
    until: datetime,
    bucket_s: int,
    *,
    traffic_table: str = DEFAULT_TRAFFIC_TABLE,
    worst: int = WORST_EXAMPLES,
    store_label: str = "",
    now: datetime | None = None,
    include_replays: bool = False,
    default_range: bool = False,
) -> ReportData:
    """Every query of the report over [since, until) in buckets of `bucket_s`, over the live consumer's rows unless
    `include_replays`; raises `StoreError`."""
    scope = _scope(store, since, until, bucket_s, include_replays)
    extra = _optional_tables(store, scope, identifier(traffic_table))
    segments = tuple(_segment_buckets(store, scope.scores, scope.where, scope.weight, scope.params))
    first_seen = tuple(_first_seen(store, scope.scores, scope.live, since, until))
    story = _story(store, scope, segments, extra.firings, first_seen, worst)
    where, params = scope.where, scope.params
    return ReportData(
        store=store_label or store.safe_url,
        table=scope.scores,
        since=since,
        until=until,
        generated_at=now or datetime.now(UTC),
        bucket_s=bucket_s,
        weighted=scope.weighted,
        segments=segments,
        health=tuple(_health(store, scope.scores, where, params)),
        judges=tuple(_judges(store, scope.scores, where, params)),
        error_reasons=tuple(_error_reasons(store, scope.scores, where, params)),
        costs=tuple(_costs(store, scope.scores, where, params)),
        traffic=extra.traffic,
        traffic_status=extra.traffic_status,
        firings=extra.firings,
        alert_status=extra.alert_status,
        canaries=extra.canaries,
        canary_status=extra.canary_status,
        judge_users=extra.judge_users,
        feedback_status=extra.feedback_status,
        replays=scope.replays,
        include_replays=include_replays,
        first_seen=first_seen,
        shadow=tuple(_shadow(store, scope.scores, where, params)),
        default_range=default_range,
        change=story.change,
        figures=story.figures,
        zoom=story.zoom,
        examples=story.examples,
        conversations=_conversations(store, scope, WORST_CONVERSATIONS),
    )


def _scope(store: ClickHouseStore, since: datetime, until: datetime, bucket_s: int, include_replays: bool) -> _Scope:
    """The scores table checked as identifiers, the range bound, and the columns it has that decide the reads."""
    db, table = identifier(store.database), identifier(store.table)
    scores = f"{db}.{table}"
    params: dict[str, Any] = {"since": since, "until": until, "bucket": bucket_s, "low": LOW_SCORE_BELOW}
    weighted = _has_column(store, db, table, "sample_rate")
    replays = _replays(store, scores, params) if _has_column(store, db, table, "replay_run") else None
    live = "" if include_replays or replays is None else _LIVE
    return _Scope(db, scores, params, weighted, replays, live)


def _optional_tables(store: ClickHouseStore, scope: _Scope, traffic_table: str) -> _Optional:
    """The traffic counts, the alert state and the canary runs, from those of the tables the database has."""
    tables = _existing_tables(store, scope.db, [traffic_table, STATE_TABLE, CANARY_TABLE, FEEDBACK_TABLE])
    out = _Optional()
    if traffic_table in tables:
        traffic = tuple(_traffic(store, scope.scores, scope.where, f"{scope.db}.{traffic_table}", scope.params))
        status: TableStatus = "present" if any(b.consumed or b.no_content for b in traffic) else "empty"
        out = replace(out, traffic=traffic, traffic_status=status)
    if STATE_TABLE in tables:
        alert_status, firings = _firings(store, scope.params["since"], scope.params["until"])
        out = replace(out, firings=firings, alert_status=alert_status)
    if CANARY_TABLE in tables:
        canaries = tuple(_canaries(store, f"{scope.db}.{CANARY_TABLE}", scope.params))
        out = replace(out, canaries=canaries, canary_status="present" if canaries else "empty")
    if FEEDBACK_TABLE in tables:
        agreement = tuple(judge_user_agreement(store, scope.params["since"], scope.params["until"]))
        out = replace(out, judge_users=agreement, feedback_status="present" if agreement else "empty")
    return out


def _story(
    store: ClickHouseStore,
    scope: _Scope,
    segments: Sequence[SegmentBucket],
    firings: Sequence[Firing],
    first_seen: Sequence[FirstSeen],
    worst: int,
) -> _Story:
    """The lead change of the firings, its figures and zoom, and the worst examples of the segments that fired (else
    of the lowest-scoring ones)."""
    change = change_of(firings, first_seen)
    sources = example_sources(firings, segment_totals(segments))
    params = {**scope.params, "limit": worst, "chars": EXAMPLE_CHARS + 1, "n": EXAMPLE_STATEMENTS}
    examples = tuple(_worst(store, scope.scores, f"{scope.primary} AND {_matching(sources, params)}", params))
    if change is None:
        return _Story(None, None, None, examples)
    figures = _figures(store, scope.scores, scope.primary, scope.weight, scope.params, change)
    zoom = _zoom(store, scope.scores, scope.primary, scope.weight, scope.params, change)
    return _Story(change, figures, zoom, examples)


def data_span(
    store: ClickHouseStore, until: datetime, *, include_replays: bool = False, days: int = DEFAULT_DAYS
) -> datetime | None:
    """The start of the default range: the first scored row in the `days` before `until` (None: no rows there)."""
    db, table = identifier(store.database), identifier(store.table)
    live = "" if include_replays or not _has_column(store, db, table, "replay_run") else _LIVE
    sql = f"SELECT min(event_time), count() FROM {db}.{table} WHERE {_RANGE}{live}"
    first, n = store.query(sql, {"since": until - timedelta(days=days), "until": until}).rows[0]
    return utc(first) if int(n) else None


def _first_seen(store: ClickHouseStore, scores: str, live: str, since: datetime, until: datetime) -> list[FirstSeen]:
    """Prompt versions and models of an app whose first row since `FIRST_SEEN_LOOKBACK` before the range (not only
    in it) falls in the range, after the app's own first row: a rollout, not the start of the data."""
    # min() needs no FINAL: a duplicate row has the same event time. The lookback bounds the scan of a big table.
    rows_of = f"event_time >= {{lookback:{_TS}}} AND event_time < {{until:{_TS}}} AND NOT {SHADOW_ROW}{live}"
    sql = (
        "SELECT app, kind, value, first FROM (\n"
        f"  SELECT app, 'prompt_version' AS kind, prompt_version AS value, min(event_time) AS first FROM {scores}\n"
        f"  WHERE prompt_version != '' AND {rows_of} GROUP BY app, prompt_version\n"
        "  UNION ALL\n"
        f"  SELECT app, 'model' AS kind, model AS value, min(event_time) AS first FROM {scores}\n"
        f"  WHERE model != '' AND {rows_of} GROUP BY app, model)\n"
        "ORDER BY first, app, kind, value"
    )
    params = {"lookback": since - FIRST_SEEN_LOOKBACK, "until": until}
    rows = [(str(app), str(kind), str(value), utc(first)) for app, kind, value, first in store.query(sql, params).rows]
    app_first: dict[str, datetime] = {}
    for app, _kind, _value, first in rows:
        app_first[app] = min(first, app_first.get(app, first))
    return [
        FirstSeen(first, app, "model" if kind == "model" else "prompt_version", value)
        for app, kind, value, first in rows
        if since <= first < until and first > app_first[app]
    ]


def _figures(
    store: ClickHouseStore, scores: str, primary: str, weight: str, params: dict[str, Any], change: Change
) -> Figures:
    """The lead segment's weighted mean since the change, and its app's before it, for the judge that scored
    most of the segment's rows since."""
    p = {**params, "at": change.at, "app": dict(change.lead.segment).get("app", "")}
    segment = _matching((segment_filter(change.lead),), p)
    at = f"event_time >= {{at:{_TS}}}"
    app = "app = {app:String}" if "app" in dict(change.lead.segment) else "1"
    sql = (
        "SELECT judge_id, sumIf(w * score, cur), sumIf(w, cur), countIf(cur), sumIf(w * score, base), sumIf(w, base), "
        "countIf(base)\n"
        f"FROM (SELECT judge_id, score, {weight} AS w, {segment} AND {at} AS cur, {app} AND NOT ({at}) AS base\n"
        f"      FROM {scores} FINAL WHERE {primary} AND status = 'ok')\n"
        "GROUP BY judge_id ORDER BY countIf(cur) DESC, judge_id LIMIT 1"
    )
    rows = store.query(sql, p).rows
    if not rows:
        return Figures("", None, 0, None, 0)
    jid, cur_s, cur_w, cur_n, base_s, base_w, base_n = rows[0]
    return Figures(str(jid), _mean(cur_s, cur_w), int(cur_n), _mean(base_s, base_w), int(base_n))


def _mean(total: Any, weight: Any) -> float | None:
    w = finite(weight)
    return (finite(total) or 0.0) / w if w else None


def _zoom(
    store: ClickHouseStore, scores: str, primary: str, weight: str, params: dict[str, Any], change: Change
) -> Zoom | None:
    """The lead change's app from well before the change to the end, in buckets as fine as 10 s."""
    app = dict(change.lead.segment).get("app")
    if app is None:
        return None
    since, until = focus_window(change.at, params["since"], params["until"])
    width = bucket_seconds(since, until, narrowest=10)
    p = {**params, "since": since, "until": until, "bucket": width, "zoom_app": app}
    buckets = _segment_buckets(store, scores, f"{primary} AND app = {{zoom_app:String}}", weight, p)
    return Zoom(app, since, until, width, tuple(buckets))


def _shadow(store: ClickHouseStore, scores: str, where: str, params: dict[str, Any]) -> list[ShadowPoint]:
    """Per bucket and app, the shadow judge's and the primary's mean over the events both scored ok."""
    sql = (
        "SELECT t, app, judge_id, count(), avg(primary_score), avg(shadow_score)\n"
        f"FROM (SELECT {_BUCKET.format(column='event_time')} AS t, app, event_id, judge_id, score AS shadow_score\n"
        f"      FROM {scores} FINAL WHERE status = 'ok' AND {SHADOW_ROW} AND {where}) AS s\n"
        "INNER JOIN (SELECT app AS p_app, event_id AS p_event_id, score AS primary_score\n"
        f"      FROM {scores} FINAL WHERE status = 'ok' AND NOT {SHADOW_ROW} AND {where}\n"
        # Only the events a shadow scored: the join's right side is built in memory, and most events have no shadow.
        f"        AND event_id IN (SELECT event_id FROM {scores} WHERE {SHADOW_ROW} AND {where})) AS p\n"
        "ON app = p_app AND event_id = p_event_id\n"
        "GROUP BY t, app, judge_id ORDER BY t, app, judge_id"
    )
    return [
        ShadowPoint(utc(t), str(app), str(jid), int(n), float(primary), float(shadow))
        for t, app, jid, n, primary, shadow in store.query(sql, params).rows
    ]


def _replays(store: ClickHouseStore, scores: str, params: dict[str, Any]) -> Replays:
    sql = f"SELECT count(), uniqExact(replay_run) FROM {scores} FINAL WHERE {_RANGE} AND replay_run != ''"
    rows, runs = store.query(sql, params).rows[0]
    return Replays(int(rows), int(runs))


def _existing_tables(store: ClickHouseStore, db: str, names: list[str]) -> set[str]:
    sql = "SELECT name FROM system.tables WHERE database = {db:String} AND has({names:Array(String)}, name)"
    return {str(r[0]) for r in store.query(sql, {"db": db, "names": names}).rows}


def _has_column(store: ClickHouseStore, db: str, table: str, column: str) -> bool:
    sql = "SELECT count() FROM system.columns WHERE database = {db:String} AND table = {t:String} AND name = {c:String}"
    return bool(store.query(sql, {"db": db, "t": table, "c": column}).rows[0][0])


def _segment_buckets(
    store: ClickHouseStore, scores: str, where: str, weight: str, params: dict[str, Any]
) -> list[SegmentBucket]:
    ok = "status = 'ok'"
    sql = (
        f"SELECT {_BUCKET.format(column='event_time')} AS t, app, prompt_version, judge_id, any(judge), "
        "any(judge_model),\n"
        f"       count(), countIf({ok}), countIf(status = 'error'),\n"
        f"       sumIf(w, {ok}), sumIf(w * score, {ok}), sumIf(w, {ok} AND score < {{low:Float64}}),\n"
        f"       sumIf(w * w, {ok}), sumIf(w * score * score, {ok})\n"
        "FROM (SELECT event_time, app, prompt_version, judge_id, judge, judge_model, status, score, "
        f"{weight} AS w FROM {scores} FINAL WHERE {where})\n"
        "GROUP BY t, app, prompt_version, judge_id ORDER BY t, app, prompt_version, judge_id"
    )
    out = []
    for row in store.query(sql, params).rows:
        t, app, pv, jid, judge, jmodel, rows, ok_rows, errors, *sums = row
        w_ok, w_score, w_low, w_sq, w_score_sq = (finite(v) or 0.0 for v in sums)
        segment = Segment(str(app), str(pv), str(jid), str(judge), str(jmodel))
        out.append(
            SegmentBucket(utc(t), segment, int(rows), int(ok_rows), int(errors), w_ok, w_score, w_low, w_sq, w_score_sq)
        )
    return out


def _matching(filters: Sequence[SegmentFilter], params: dict[str, Any]) -> str:
    """A WHERE clause true for rows of any of `filters` (each a conjunction of column = value); binds the values."""
    if not filters:
        return "0"
    alternatives = []
    for i, f in enumerate(filters):
        terms = []
        for j, (column, value) in enumerate(f):
            name = f"seg_{i}_{j}"
            params[name] = value
            terms.append(f"{identifier(column)} = {{{name}:String}}")
        alternatives.append("(" + " AND ".join(terms or ["1"]) + ")")
    return "(" + " OR ".join(alternatives) + ")"


def _health(store: ClickHouseStore, scores: str, where: str, params: dict[str, Any]) -> list[HealthBucket]:
    sql = (
        "SELECT t, judge_id, any(judge), count(), countIf(status = 'error'), countIf(status = 'error' AND limited),\n"
        "       quantileExact(0.5)(lag_s), quantileExact(0.9)(lag_s), max(lag_s)\n"
        f"FROM (SELECT {_BUCKET.format(column='event_time')} AS t, judge_id, judge, status, {_RATE_LIMITED} AS "
        "limited,\n"
        f"             {_LAG_S} AS lag_s FROM {scores} FINAL WHERE {where})\n"
        "GROUP BY t, judge_id ORDER BY t, judge_id"
    )
    return [
        HealthBucket(
            utc(t),
            str(jid),
            str(judge),
            int(rows),
            int(errors),
            int(limited),
            finite(p50),
            finite(p90),
            finite(top),
        )
        for t, jid, judge, rows, errors, limited, p50, p90, top in store.query(sql, params).rows
    ]


def _judges(store: ClickHouseStore, scores: str, where: str, params: dict[str, Any]) -> list[JudgeTotals]:
    sql = (
        "SELECT judge_id, any(judge), any(judge_model), count(), countIf(status = 'error'), countIf(status = 'error' "
        "AND limited),\n"
        "       quantileExact(0.5)(lag_s), quantileExact(0.9)(lag_s), max(lag_s), sum(ifNull(cost_usd, 0)), "
        "countIf(cost_usd IS NOT NULL)\n"
        f"FROM (SELECT judge_id, judge, judge_model, status, cost_usd, {_RATE_LIMITED} AS limited, {_LAG_S} AS lag_s\n"
        f"      FROM {scores} FINAL WHERE {where})\n"
        "GROUP BY judge_id ORDER BY count() DESC, judge_id"
    )
    return [
        JudgeTotals(
            str(jid),
            str(judge),
            str(jmodel),
            int(rows),
            int(errors),
            int(limited),
            finite(p50),
            finite(p90),
            finite(top),
            finite(cost) or 0.0,
            int(priced),
        )
        for jid, judge, jmodel, rows, errors, limited, p50, p90, top, cost, priced in store.query(sql, params).rows
    ]


def _error_reasons(store: ClickHouseStore, scores: str, where: str, params: dict[str, Any]) -> list[ErrorReason]:
    # The row's error is `reason: detail`; for `unavailable` the detail starts with the kind (timeout, overloaded, ...).
    sql = (
        "SELECT judge_id, multiIf(limited, 'rate limited (429)', head = 'unavailable', concat(head, ': ', kind),\n"
        "                         head = '', '(no reason given)', head) AS reason, count() AS n\n"
        "FROM (SELECT judge_id, error, trimBoth(splitByChar(':', error)[1]) AS head, trimBoth(splitByChar(':', "
        "error)[2]) AS kind,\n"
        f"             {_RATE_LIMITED} AS limited FROM {scores} FINAL WHERE {where} AND status = 'error')\n"
        "GROUP BY judge_id, reason ORDER BY n DESC, judge_id, reason LIMIT 100"
    )
    return [ErrorReason(str(jid), str(reason), int(n)) for jid, reason, n in store.query(sql, params).rows]


def _costs(store: ClickHouseStore, scores: str, where: str, params: dict[str, Any]) -> list[CostDay]:
    sql = (
        "SELECT toDate(event_time) AS day, judge_id, any(judge), any(judge_model), count(), countIf(cost_usd IS NOT "
        "NULL),\n"
        "       countIf(cached), sum(ifNull(cost_usd, 0))\n"
        f"FROM {scores} FINAL WHERE {where}\n"
        "GROUP BY day, judge_id ORDER BY day, judge_id"
    )
    out = []
    for day, jid, judge, jmodel, rows, priced, cached, cost in store.query(sql, params).rows:
        d = day if isinstance(day, date) else date.fromisoformat(str(day))
        out.append(
            CostDay(d, str(jid), str(judge), str(jmodel), int(rows), int(priced), int(cached), finite(cost) or 0.0)
        )
    return out


def _traffic(
    store: ClickHouseStore, scores: str, where: str, traffic: str, params: dict[str, Any]
) -> list[TrafficBucket]:
    counted = (
        f"SELECT {_BUCKET.format(column='minute')} AS t, app, prompt_version, sum(consumed), sum(sampled), "
        f"sum(no_content) FROM {traffic}\n"
        f"WHERE minute >= {{since:{_TS}}} AND minute < {{until:{_TS}}} GROUP BY t, app, prompt_version"
    )
    # Events, not rows: with two judges an event has two rows but was consumed once. Only events of the minutes the
    # traffic counts cover: a range starting mid-minute would otherwise count judged events of a minute it leaves out.
    judged = (
        f"SELECT {_BUCKET.format(column='event_time')} AS t, app, prompt_version, uniqExact(event_id) FROM {scores} "
        "FINAL\n"
        f"WHERE {where} AND {_WHOLE_MINUTES} GROUP BY t, app, prompt_version"
    )
    merged: dict[tuple[datetime, str, str], list[int]] = {}
    for t, app, pv, consumed, sampled, no_content in store.query(counted, params).rows:
        merged.setdefault((utc(t), str(app), str(pv)), [0, 0, 0, 0])[:2] = [int(consumed), int(sampled)]
        merged[(utc(t), str(app), str(pv))][3] = int(no_content)
    for t, app, pv, n in store.query(judged, params).rows:
        merged.setdefault((utc(t), str(app), str(pv)), [0, 0, 0, 0])[2] = int(n)
    return [TrafficBucket(t, app, pv, c, s, j, nc) for (t, app, pv), (c, s, j, nc) in sorted(merged.items())]


def _worst(store: ClickHouseStore, scores: str, where: str, params: dict[str, Any]) -> list[Example]:
    cut = "substringUTF8({col}, 1, {{chars:UInt32}})"
    per_statement = "arrayMap(s -> substringUTF8(s, 1, {{chars:UInt32}}), arraySlice({col}, 1, {{n:UInt32}}))"
    sql = (
        "SELECT event_time, event_id, app, prompt_version, judge_id, judge, score, raw_score,\n"
        f"       {cut.format(col='question')}, {cut.format(col='response')}, {cut.format(col='reasoning')},\n"
        f"       {per_statement.format(col='statements')}, arraySlice(verdicts, 1, {{n:UInt32}}),\n"
        f"       {per_statement.format(col='verdict_reasons')}, n_statements\n"
        f"FROM {scores} FINAL WHERE {where} AND status = 'ok'\n"
        # The same answer says nothing new however often it was given, to this question or another: one row per
        # answer (so per question and answer too) leaves room for the other ways the segment fails.
        "ORDER BY score ASC, event_time DESC, event_id LIMIT 1 BY response LIMIT {limit:UInt32}"
    )
    out = []
    for row in store.query(sql, params).rows:
        at, eid, app, pv, jid, judge, score, raw, question, response, reasoning, statements, verdicts, reasons, n = row
        out.append(
            Example(
                event_time=utc(at),
                event_id=str(eid),
                app=str(app),
                prompt_version=str(pv),
                judge_id=str(jid),
                judge=str(judge),
                score=float(score),
                raw_score=finite(raw),
                question=_clip(question),
                response=_clip(response),
                reasoning=_clip(reasoning),
                statements=tuple(_clip(s) for s in statements),
                verdicts=tuple(str(v) for v in verdicts),
                verdict_reasons=tuple(_clip(s) for s in reasons),
                n_statements=int(n),
            )
        )
    return out


# The lowest-scoring turn of a conversation: the earliest of equal scores (then the lowest turn index).
_LOWEST = "(assumeNotNull(score), event_time, turn, event_id), status = 'ok'"


def _conversations(store: ClickHouseStore, scope: _Scope, limit: int) -> tuple[Conversation, ...] | None:
    """The conversations of the range with at least 2 judged turns whose turns were least often relevant (a score of
    at least `LOW_SCORE_BELOW`), with their lowest turn; None for a table without turns (before migration 043). A
    conversation whose rows are all errors has no verdict to rank it by and is left out, never counted as relevant."""
    if not _has_column(store, scope.db, identifier(store.table), "turn"):
        return None
    cut = "substringUTF8(argMinIf({col}, " + _LOWEST + "), 1, {{chars:UInt32}})"
    sql = (
        "SELECT app, conversation_id, judge_id, countIf(status = 'ok') AS judged,\n"
        "       countIf(status = 'ok' AND score >= {low:Float64}) AS relevant,\n"
        f"       argMinIf(turn, {_LOWEST}), minIf(score, status = 'ok') AS lowest, argMinIf(event_time, {_LOWEST}),\n"
        f"       argMinIf(event_id, {_LOWEST}), {cut.format(col='question')}, {cut.format(col='response')},\n"
        "       min(event_time), max(event_time)\n"
        f"FROM {scope.scores} FINAL WHERE {scope.primary}\n"
        "GROUP BY app, conversation_id, judge_id HAVING judged >= 2\n"
        "ORDER BY relevant / judged ASC, lowest ASC, max(event_time) DESC, conversation_id LIMIT {limit:UInt32}"
    )
    params = {**scope.params, "limit": limit, "chars": EXAMPLE_CHARS + 1}
    return tuple(
        Conversation(
            app=str(app),
            conversation_id=str(cid),
            judge_id=str(jid),
            judged_turns=int(judged),
            relevant_turns=int(relevant),
            lowest_turn=int(turn),
            lowest_score=float(lowest),
            lowest_event_time=utc(at),
            lowest_event_id=str(eid),
            question=_clip(question),
            response=_clip(response),
            first_event_time=utc(first),
            last_event_time=utc(last),
        )
        for app, cid, jid, judged, relevant, turn, lowest, at, eid, question, response, first, last in store.query(
            sql, params
        ).rows
    )


def _clip(text: Any) -> str:
    # The query returns one character more than it shows, so a cut text can say so.
    s = str(text)
    return s if len(s) <= EXAMPLE_CHARS else s[:EXAMPLE_CHARS] + "…"


def _canaries(store: ClickHouseStore, table: str, params: dict[str, Any]) -> list[CanaryPoint]:
    # One row per run: its figures are on each of its pair rows.
    sql = (
        "SELECT run_id, any(run_at), any(judge_id), any(judge), any(labels), count(), countIf(status = 'error'),\n"
        "       any(run_spearman), any(run_kappa), any(run_mean_shift), any(run_cost_usd)\n"
        f"FROM {table} FINAL WHERE run_at >= {{since:{_TS}}} AND run_at < {{until:{_TS}}}\n"
        "GROUP BY run_id ORDER BY any(run_at), run_id"
    )
    return [
        CanaryPoint(
            utc(t),
            str(rid),
            str(jid),
            str(judge),
            str(labels),
            int(n),
            int(errors),
            finite(rho),
            finite(kappa),
            finite(shift),
            finite(cost),
        )
        for rid, t, jid, judge, labels, n, errors, rho, kappa, shift, cost in store.query(sql, params).rows
    ]


def _firings(store: ClickHouseStore, since: datetime, until: datetime) -> tuple[TableStatus, tuple[Firing, ...]]:
    """The latest episode (pending or fired) of each rule and segment overlapping the range. The state table keeps
    one row per rule and segment (ReplacingMergeTree, read with FINAL), so an earlier episode of the segment is gone."""
    states = StateStore(store).load()
    if not states:
        return "empty", ()
    out = []
    for s in states.values():
        pending = s.since if s.state in ("pending", "firing", "resolved") else None
        if s.fired_at is None and pending is None:
            continue  # inactive, or resolved long ago with nothing kept of when
        start = pending or s.fired_at
        if start is None or start >= until:
            continue
        fired = s.fired_at if s.state != "pending" else None  # a pending state's fired_at is an earlier episode's
        resolved = s.resolved_at if s.state != "firing" and fired is not None else None
        if resolved is not None and resolved < since:
            continue
        out.append(
            Firing(s.rule, s.severity, s.segment, s.state, fired, resolved, s.value, s.baseline, s.note, pending)
        )
    return "present", tuple(sorted(out, key=lambda f: (f.started, f.rule, f.segment)))
