"""SQL for rule evaluation: the current and baseline windows of a rule, aggregated per segment (for rollout rules,
per segment and version, with each version's first event).

Rules read the scores table with FINAL, so a redelivered event counts once (the rollups count it twice), and
the live consumer's rows only unless a rule says `include_replays` (rows of `relevancy-monitor replay` carry
their run id in `replay_run`).
Times and segment values are bound as query parameters; column and table names come from fixed lists and
validated identifiers only."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from monitor.alerts.history import (
    CANARY_SUMS,
    FEEDBACK_SUMS,
    SCORE_SUMS,
    SHADOW_SUMS,
    TRAFFIC_SUMS,
    Grid,
    History,
    ValuesOf,
    build_history,
    values_for,
)
from monitor.alerts.label_agreement import CONTROL_ROUTE, LABELS_TABLE, control_kappa
from monitor.alerts.rules import Rule
from monitor.alerts.stats import paired_spearman
from monitor.alerts.windows import (
    BIN_SUMS,
    SegmentData,
    SegmentKey,
    TailCounts,
    TrafficCounts,
    VersionStats,
    Windows,
    WindowStats,
    baseline_exposure,
    utc,
    window_stats,
)
from monitor.feedback.agreement import auc_of
from monitor.store.connection import ClickHouseStore
from schemas.canary import CANARY_TABLE
from schemas.errors import QueryError, StoreError
from schemas.feedback import FEEDBACK_ROLLUP_TABLE, FEEDBACK_SAMPLE_RULE, FEEDBACK_TABLE

DEFAULT_TRAFFIC_TABLE = "traffic_counts"

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TS = "DateTime64(3, 'UTC')"
SHADOW_ROW = (
    "startsWith(sample_rule, 'shadow:')"  # a shadow judge's row (consumers.sampling: `shadow:<primary's rule>`)
)
# A feedback-triggered judgement (an answer sampling skipped, judged because a user disliked it: issue 45), or a shadow
# judge's row of one: picked for being disliked, so never part of a relevancy score, detector, coverage or volume.
SAMPLED_ROW = f"sample_rule NOT IN ('{FEEDBACK_SAMPLE_RULE}', 'shadow:{FEEDBACK_SAMPLE_RULE}')"
# A row the live consumer wrote (`relevancy-monitor replay` writes its run id; migration 036) by its sampling.
LIVE_ROW = f"replay_run = '' AND {SAMPLED_ROW}"


# A row's turn (migration 043): 0 for a conversation's opening question and for every flat event.
TURN_ROWS = {"all": "", "first": "turn = 0", "follow_up": "turn > 0"}


def live_rows(rule: Rule) -> str:
    """The row filter (` AND ...`) of a rule's reads of the scores table: the live consumer's sampled rows only (never a
    feedback-triggered judgement), replays too when the rule includes them."""
    return f" AND {SAMPLED_ROW}" if rule.include_replays else f" AND {LIVE_ROW}"


def rows_read(rule: Rule) -> str:
    """The row filter (` AND ...`, or empty) of a rule's reads of the scores table: the live consumer's rows only
    unless the rule includes replays, and the turns it watches."""
    return live_rows(rule) + (f" AND {TURN_ROWS[rule.turns]}" if TURN_ROWS[rule.turns] else "")


def _rows_of(rule: Rule) -> str:
    """The extra row filter of a rule's score queries: the rows it reads (see `rows_read`), and the primary's rows
    only for a traffic metric."""
    return rows_read(rule) + (f" AND NOT {SHADOW_ROW}" if rule.spec.primary_only else "")


def _ident(name: str) -> str:
    if not _IDENT.match(name):
        raise ValueError(f"{name!r} is not a plain identifier")
    return name


def _window_predicate(column: str, names: list[tuple[str, str]]) -> str:
    if not names:
        return "0"
    return " OR ".join(f"({column} >= {{{s}:{_TS}}} AND {column} < {{{e}:{_TS}}})" for s, e in names)


def _window_params(windows: Windows) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    params: dict[str, Any] = {
        "cur_start": windows.current[0],
        "cur_end": windows.current[1],
        "span_start": windows.span[0],
        "span_end": windows.span[1],
    }
    base_names = []
    for i, (s, e) in enumerate(windows.baseline):
        params[f"b{i}s"], params[f"b{i}e"] = s, e
        base_names.append((f"b{i}s", f"b{i}e"))
    return params, base_names


# Per row: the scoring lag, and the weight 1/sample_rate. Rows always carry a rate in (0, 1]; the floor only
# keeps a hand-written 0 from turning every sum infinite.
_ROW_COLUMNS = (
    "dateDiff('millisecond', event_time, scored_at) / 1000.0 AS lag_s, 1 / greatest(sample_rate, 1e-6) AS weight"
)


# Score sums are weighted by 1/sample_rate (`weight`), so means are traffic means whatever the sampling did
# (rules, budget, freshness factor); plain sums, not means, so that segments pool by adding. An ok row whose score
# is NaN (the column takes one; the writer's schema does not) is no score: one would make every sum it joins NaN,
# a window's mean 0 and a detector's statistic NaN for the whole window.
_RAW_SCORE_AGGS = (
    ("rows", "countIf({w})"),
    ("ok", "countIf({w} AND {ok})"),
    ("errors", "countIf({w} AND status = 'error')"),
    # invalid_reply_rate: error rows whose reason is a reply that did not validate (the schema was not enforced).
    ("invalid", "countIf({w} AND status = 'error' AND startsWith(error, 'invalid_reply'))"),
    ("weight", "sumIf(weight, {w} AND {ok})"),
    ("weight_sq", "sumIf(weight * weight, {w} AND {ok})"),
    ("w_score", "sumIf(weight * score, {w} AND {ok})"),
    ("w_score_sq", "sumIf(weight * score * score, {w} AND {ok})"),
    ("w_low", "sumIf(weight, {w} AND {ok} AND score < {{low:Float64}})"),
    *((name, f"sumIf(weight, {{w}} AND {{ok}} AND floor(score * 20 + 0.5) = {i})") for i, name in enumerate(BIN_SUMS)),
    ("p10", "quantileExactIf(0.1)(score, {w} AND {ok})"),
    ("lag_p90", "quantileExactIf(0.9)(lag_s, {w})"),
    ("cost", "sumIf(ifNull(cost_usd, 0), {w})"),
    ("events", "uniqExactIf(event_id, {w})"),
    # cache_read_share: the prompt's three parts as the API reported them; a row that sent a prompt is one call.
    ("cache_read", "sumIf(cache_read_tokens, {w})"),
    ("prompt_tokens", "sumIf(toUInt64(input_tokens) + cache_read_tokens + cache_write_tokens, {w})"),
    ("calls", "countIf({w} AND toUInt64(input_tokens) + cache_read_tokens + cache_write_tokens > 0)"),
)
_OK_SCORE = "status = 'ok' AND isFinite(score)"
_SCORE_AGGS = tuple((name, expr.replace("{ok}", _OK_SCORE)) for name, expr in _RAW_SCORE_AGGS)


def scores_sql(rule: Rule, database: str, table: str, windows: Windows) -> tuple[str, dict[str, Any]]:
    """SQL and parameters aggregating the scores table per segment over the current and baseline windows."""
    params, base_names = _window_params(windows)
    params["low"] = rule.low_score_below
    col = rule.spec.time_column
    keys = list(rule.key_fields)
    select = [*keys]
    if "judge_id" in keys:
        select.append("any(judge) AS judge_name")
    for prefix, flag in (("c", "in_cur"), ("b", "in_base")):
        select += [f"{expr.format(w=flag)} AS {prefix}_{name}" for name, expr in _SCORE_AGGS]
    select += _exposure_columns(col, base_names)
    sql = (
        f"SELECT {', '.join(select)}\n"
        f"FROM (\n"
        f"  SELECT *, {_ROW_COLUMNS},\n"
        f"         {col} >= {{cur_start:{_TS}}} AND {col} < {{cur_end:{_TS}}} AS in_cur,\n"
        f"         {_window_predicate(col, base_names)} AS in_base\n"
        f"  FROM {_ident(database)}.{_ident(table)} FINAL\n"
        f"  WHERE {col} >= {{span_start:{_TS}}} AND {col} < {{span_end:{_TS}}}{_rows_of(rule)}\n"
        f")"
    )
    if keys:
        sql += f"\nGROUP BY {', '.join(keys)}"
    return sql, params


def versions_sql(
    rule: Rule, database: str, table: str, windows: Windows, lookback_start: datetime
) -> tuple[str, dict[str, Any]]:
    """SQL and parameters of a rollout rule: per segment and version (rule.rollout.of) with rows in the current
    window, the window's aggregates and the version's first event since `lookback_start`."""
    params, _ = _window_params(windows)
    params.update(low=rule.low_score_below, lookback_start=lookback_start)
    col = rule.spec.time_column
    keys = list(rule.key_fields)
    select = [*keys, "any(judge) AS judge_name"]
    select += [f"{expr.format(w='in_cur')} AS c_{name}" for name, expr in _SCORE_AGGS]
    select.append(f"min({col}) AS first_seen")
    sql = (
        f"SELECT {', '.join(select)}\n"
        f"FROM (\n"
        f"  SELECT *, {_ROW_COLUMNS},\n"
        f"         {col} >= {{cur_start:{_TS}}} AND {col} < {{cur_end:{_TS}}} AS in_cur\n"
        f"  FROM {_ident(database)}.{_ident(table)} FINAL\n"
        f"  WHERE {col} >= {{lookback_start:{_TS}}} AND {col} < {{cur_end:{_TS}}}{_rows_of(rule)}\n"
        f")\n"
        f"GROUP BY {', '.join(keys)}\n"
        f"HAVING countIf(in_cur) > 0"
    )
    return sql, params


def _exposure_columns(column: str, base_names: list[tuple[str, str]]) -> list[str]:
    # When the segment's baseline starts (first row) and how many baseline windows have rows at all.
    days = (
        " + ".join(f"(countIf({column} >= {{{s}:{_TS}}} AND {column} < {{{e}:{_TS}}}) > 0)" for s, e in base_names)
        or "0"
    )
    return [f"minIf({column}, in_base) AS b_first", f"toUInt32({days}) AS b_windows"]


def traffic_sql(rule: Rule, database: str, traffic_table: str, windows: Windows) -> tuple[str, dict[str, Any]]:
    """SQL and parameters summing the traffic table (sampled, consumed) per segment over both windows."""
    params, base_names = _window_params(windows)
    keys = [k for k in rule.key_fields if k != "judge_id"]
    select = [
        *keys,
        "sumIf(sampled, in_cur) AS c_sampled",
        "sumIf(consumed, in_cur) AS c_consumed",
        "sumIf(sampled, in_base) AS b_sampled",
        "sumIf(consumed, in_base) AS b_consumed",
        *_exposure_columns("minute", base_names),
    ]
    sql = (
        f"SELECT {', '.join(select)}\n"
        f"FROM (\n"
        f"  SELECT *, minute >= {{cur_start:{_TS}}} AND minute < {{cur_end:{_TS}}} AS in_cur,\n"
        f"         {_window_predicate('minute', base_names)} AS in_base\n"
        f"  FROM {_ident(database)}.{_ident(traffic_table)}\n"
        f"  WHERE minute >= {{span_start:{_TS}}} AND minute < {{span_end:{_TS}}}\n"
        f")"
    )
    if keys:
        sql += f"\nGROUP BY {', '.join(keys)}"
    return sql, params


def _run(store: ClickHouseStore, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    try:
        return store.query(sql, params).rows
    except StoreError as e:
        raise QueryError(str(e)) from e


def fetch_scores(store: ClickHouseStore, rule: Rule, windows: Windows) -> dict[SegmentKey, SegmentData]:
    """Per-segment statistics from the scores table (FINAL) for both windows of `rule` (from the canary table for a
    canary metric)."""
    if rule.spec.table == "canary":
        return fetch_canary(store, rule, windows)
    if rule.spec.table == "shadow":
        return fetch_shadow(store, rule, windows)
    if rule.spec.table == "labels":
        return fetch_control_labels(store, rule, windows)
    if rule.spec.table == "feedback":
        return fetch_feedback(store, rule, windows)
    if rule.spec.table == "feedback_scores":
        return fetch_feedback_auc(store, rule, windows)
    sql, params = scores_sql(rule, store.database, store.table, windows)
    keys = rule.key_fields
    out: dict[SegmentKey, SegmentData] = {}
    n_aggs = len(_SCORE_AGGS)
    for row in _run(store, sql, params):
        key: SegmentKey = tuple((k, str(v)) for k, v in zip(keys, row[: len(keys)], strict=True))
        pos = len(keys)
        judge = ""
        if "judge_id" in keys:
            judge = str(row[pos])
            pos += 1
        cur = _stats(row[pos : pos + n_aggs], windows.current_seconds)
        base_rows = int(row[pos + n_aggs])
        first, n_windows = row[pos + 2 * n_aggs], int(row[pos + 2 * n_aggs + 1])
        exposure = baseline_exposure(windows, first if base_rows else None, n_windows)
        base = _stats(row[pos + n_aggs : pos + 2 * n_aggs], exposure)
        if cur.rows == 0 and base.rows == 0 and keys:
            continue
        out[key] = SegmentData(cur, base, judge)
    return out


def fetch_versions(store: ClickHouseStore, rule: Rule, windows: Windows) -> dict[SegmentKey, list[VersionStats]]:
    """A rollout rule's versions with rows in the current window, per segment (the key without the version);
    empty for a rule without `rollout`."""
    if rule.rollout is None:
        return {}
    of = rule.rollout.of
    sql, params = versions_sql(rule, store.database, store.table, windows, windows.current[1] - rule.rollout.lookback)
    keys = rule.key_fields
    n_aggs = len(_SCORE_AGGS)
    out: dict[SegmentKey, list[VersionStats]] = {}
    for row in _run(store, sql, params):
        named = list(zip(keys, (str(v) for v in row[: len(keys)]), strict=True))
        scope: SegmentKey = tuple((k, v) for k, v in named if k != of)
        version = next(v for k, v in named if k == of)
        pos = len(keys)
        cur = _stats(row[pos + 1 : pos + 1 + n_aggs], windows.current_seconds)
        out.setdefault(scope, []).append(VersionStats(version, utc(row[pos + 1 + n_aggs]), cur, str(row[pos])))
    return out


def _stats(values: tuple[Any, ...], seconds: float) -> WindowStats:
    return window_stats(dict(zip((name for name, _ in _SCORE_AGGS), values, strict=True)), seconds)


def fetch_traffic(
    store: ClickHouseStore, rule: Rule, windows: Windows, traffic_table: str
) -> dict[SegmentKey, TrafficCounts]:
    """Per-segment traffic counts from the traffic table for both windows of `rule`."""
    sql, params = traffic_sql(rule, store.database, traffic_table, windows)
    keys = [k for k in rule.key_fields if k != "judge_id"]
    out: dict[SegmentKey, TrafficCounts] = {}
    for row in _run(store, sql, params):
        key: SegmentKey = tuple((k, str(v)) for k, v in zip(keys, row[: len(keys)], strict=True))
        c_s, c_c, b_s, b_c = (int(x or 0) for x in row[len(keys) : len(keys) + 4])
        first, n_windows = row[len(keys) + 4], int(row[len(keys) + 5])
        if keys and not (c_s or c_c or b_s or b_c):
            continue
        exposure = baseline_exposure(windows, first if (b_s or b_c) else None, n_windows)
        out[key] = TrafficCounts(c_s, c_c, b_s, b_c, exposure)
    return out


def fetch_tail_counts(
    store: ClickHouseStore, rule: Rule, windows: Windows, segment: SegmentKey, cutoff: float, threshold: float
) -> TailCounts:
    """Count ok scores below `cutoff` (both windows) and below `threshold` (current) in one segment."""
    params, base_names = _window_params(windows)
    params.update(cutoff=cutoff, threshold=threshold)
    where = []
    for i, (k, v) in enumerate(segment):
        where.append(f"{_ident(k)} = {{k{i}:String}}")
        params[f"k{i}"] = v
    col = rule.spec.time_column
    cur = f"{col} >= {{cur_start:{_TS}}} AND {col} < {{cur_end:{_TS}}}"
    base = _window_predicate(col, base_names)
    sql = (
        f"SELECT countIf(({cur}) AND score < {{cutoff:Float64}}), countIf(({base}) AND score < {{cutoff:Float64}}),\n"
        f"       countIf(({cur}) AND score < {{threshold:Float64}})\n"
        f"FROM {_ident(store.database)}.{_ident(store.table)} FINAL\n"
        f"WHERE status = 'ok' AND {col} >= {{span_start:{_TS}}} AND {col} < {{span_end:{_TS}}}{_rows_of(rule)}"
        + "".join(f" AND {w}" for w in where)
    )
    row = _run(store, sql, params)[0]
    return TailCounts(cutoff, int(row[0]), int(row[1]), int(row[2]))


# ---- canary metrics: the canary table, one row per run and labelled pair (monitor.canary) ------------------------

# Each run's pairs and figures first (a run's figures are on each of its rows), then the runs summed per window.
# The run's time and judge get aliases of their own: an alias named like its column would replace the column.
_CANARY_RUN_SQL = (
    "SELECT {keys}, run_id, any(judge) AS run_judge, any(run_at) AS at, count() AS n_rows, countIf(status = 'ok') AS "
    "n_ok,\n"
    "         countIf(status = 'error') AS n_errors, any(run_spearman) AS rho, any(run_kappa) AS kappa,\n"
    "         sumIf(score - label_unit, status = 'ok') AS shift\n"
    "  FROM {table} FINAL\n"
    "  WHERE run_at >= {{{start}:{ts}}} AND run_at < {{{end}:{ts}}}\n"
    "  GROUP BY {keys}, run_id"
)

# The sums of `windows.CanarySums` (and rows, ok, errors), per window flag `{w}`, named as `window_stats` reads them.
_CANARY_AGGS = (
    ("rows", "sumIf(n_rows, {w})"),
    ("ok", "sumIf(n_ok, {w})"),
    ("errors", "sumIf(n_errors, {w})"),
    ("runs", "countIf({w})"),
    ("rho", "sumIf(rho, {w} AND rho IS NOT NULL)"),
    ("rho_runs", "countIf({w} AND rho IS NOT NULL)"),
    ("kappa", "sumIf(kappa, {w} AND kappa IS NOT NULL)"),
    ("kappa_runs", "countIf({w} AND kappa IS NOT NULL)"),
    ("shift", "sumIf(shift, {w})"),
)


def _canary_runs(rule: Rule, database: str, start: str, end: str) -> str:
    keys = ", ".join(_ident(k) for k in rule.key_fields)
    return _CANARY_RUN_SQL.format(keys=keys, table=f"{_ident(database)}.{CANARY_TABLE}", start=start, end=end, ts=_TS)


def canary_sql(rule: Rule, database: str, windows: Windows) -> tuple[str, dict[str, Any]]:
    """SQL and parameters summing a canary rule's runs per judge and labelled set over its current and baseline
    windows (a run belongs to the window its run_at is in)."""
    params, base_names = _window_params(windows)
    keys = list(rule.key_fields)
    select = [*keys, "any(run_judge) AS judge_name"]
    for prefix, flag in (("c", "in_cur"), ("b", "in_base")):
        select += [f"{expr.format(w=flag)} AS {prefix}_{name}" for name, expr in _CANARY_AGGS]
    sql = (
        f"SELECT {', '.join(select)}\n"
        f"FROM (\n"
        f"  SELECT *, at >= {{cur_start:{_TS}}} AND at < {{cur_end:{_TS}}} AS in_cur,\n"
        f"         {_window_predicate('at', base_names)} AS in_base\n"
        f"  FROM (\n  {_canary_runs(rule, database, 'span_start', 'span_end')}\n  )\n"
        f")\n"
        f"GROUP BY {', '.join(keys)}"
    )
    return sql, params


def fetch_canary(store: ClickHouseStore, rule: Rule, windows: Windows) -> dict[SegmentKey, SegmentData]:
    """Per judge and labelled set, the canary runs of both windows of `rule`, summed."""
    sql, params = canary_sql(rule, store.database, windows)
    keys = rule.key_fields
    names = [name for name, _ in _CANARY_AGGS]
    out: dict[SegmentKey, SegmentData] = {}
    for row in _run(store, sql, params):
        key: SegmentKey = tuple((k, str(v)) for k, v in zip(keys, row[: len(keys)], strict=True))
        pos = len(keys) + 1
        cur = window_stats(dict(zip(names, row[pos : pos + len(names)], strict=True)), windows.current_seconds)
        base = window_stats(
            dict(zip(names, row[pos + len(names) : pos + 2 * len(names)], strict=True)), windows.baseline_seconds
        )
        if cur.rows == 0 and base.rows == 0:
            continue
        out[key] = SegmentData(cur, base, str(row[len(keys)]))
    return out


def _bucketed(select: list[str], source: str, keys: list[str]) -> str:
    """`select` over the subquery `source`, grouped by grid bucket and segment keys, ordered by segment then bucket."""
    return (
        f"SELECT {', '.join(select)}\nFROM (\n  {source}\n)\nGROUP BY {', '.join(['bucket', *keys])}\nORDER BY "
        f"{', '.join([*keys, 'bucket'])}"
    )


def _grid_params(grid: Grid, start: datetime, end: datetime) -> dict[str, Any]:
    return {"origin": grid.origin_ms, "size": grid.size_ms, "start": start, "end": end}


def canary_history_sql(
    rule: Rule, database: str, grid: Grid, start: datetime, end: datetime
) -> tuple[str, dict[str, Any]]:
    """SQL and parameters of a canary rule's history: per grid bucket (of run_at) and segment over [start, end), the
    sums of `history.CANARY_SUMS` and the bucket's first run time."""
    keys = list(rule.key_fields)
    aggs = {name: expr.format(w="1") for name, expr in _CANARY_AGGS}
    select = [
        "intDiv(toUnixTimestamp64Milli(at) - {origin:Int64}, {size:Int64}) AS bucket",
        *keys,
        "any(run_judge) AS judge_name",
    ]
    select += [f"{aggs[name]} AS s_{name}" for name in CANARY_SUMS]
    select.append("toUnixTimestamp64Milli(min(at)) AS first_ms")
    return _bucketed(select, _canary_runs(rule, database, "start", "end"), keys), _grid_params(grid, start, end)


def fetch_canary_history(store: ClickHouseStore, rule: Rule, grid: Grid, start: datetime, end: datetime) -> History:
    """A canary rule's runs over [start, end) per bucket of `grid`, summed per judge and labelled set."""
    sql, params = canary_history_sql(rule, store.database, grid, start, end)
    return build_history(grid, start, end, rule.key_fields, CANARY_SUMS, _run(store, sql, params), None)


# ---- shadow metrics: the events a primary judge and its shadow both scored ok (monitor.judging.shadow) ------------

# One row per shared event: the shadow's row (sample_rule 'shadow:...') joined to the primary's row of the same app
# and event (any other judge_id without the prefix), both ok. Both rows carry the event's time, so `{where}` (a time
# range on event_time) filters both sides before the join. Every column name is distinct, so no alias shadows one.
_SHADOW_PAIRS = (
    "SELECT app, model, prompt_version, judge_id, primary_judge_id, judge, event_time, event_id, question, "
    "shadow_score, primary_score\n"
    "  FROM (SELECT app, event_id, model, prompt_version, judge_id, judge, event_time, question, score AS "
    "shadow_score\n"
    "        FROM {table} FINAL WHERE status = 'ok' AND {shadow} AND {where}) AS s\n"
    "  INNER JOIN (SELECT app AS p_app, event_id AS p_event_id, judge_id AS primary_judge_id, score AS primary_score\n"
    "        FROM {table} FINAL WHERE status = 'ok' AND NOT {shadow} AND {where}) AS p\n"
    "  ON app = p_app AND event_id = p_event_id"
)

# The sums of `windows.ShadowSums` (with rows, ok and errors, as `window_stats` reads them), per window flag `{w}`.
_SHADOW_AGGS = (
    ("rows", "countIf({w})"),
    ("ok", "countIf({w})"),
    ("errors", "toUInt64(0)"),
    ("shadow_diff", "sumIf(shadow_score - primary_score, {w})"),
)
# A window's pairs for the rank correlation, interleaved as `stats.paired_spearman` reads them.
_SHADOW_PAIR_VALUES = "arrayFlatten(groupArrayIf([assumeNotNull(shadow_score), assumeNotNull(primary_score)], {w}))"


def _shadow_pairs(database: str, table: str, where: str) -> str:
    return _SHADOW_PAIRS.format(table=f"{_ident(database)}.{_ident(table)}", shadow=SHADOW_ROW, where=where)


def shadow_sql(rule: Rule, database: str, table: str, windows: Windows) -> tuple[str, dict[str, Any]]:
    """SQL and parameters summing a shadow rule's shared events per segment (the shadow's and the primary's judge_id
    among the keys) over its current and baseline windows, with each window's score pairs when ρ is read."""
    params, base_names = _window_params(windows)
    keys = list(rule.key_fields)
    select = [*keys, "any(judge) AS judge_name"]
    for prefix, flag in (("c", "in_cur"), ("b", "in_base")):
        select += [f"{expr.format(w=flag)} AS {prefix}_{name}" for name, expr in _SHADOW_AGGS]
    select += _exposure_columns("event_time", base_names)
    if values_for(rule) == "pairs":
        select += [
            f"{_SHADOW_PAIR_VALUES.format(w=flag)} AS {prefix}_pairs"
            for prefix, flag in (("c", "in_cur"), ("b", "in_base"))
        ]
    span = f"event_time >= {{span_start:{_TS}}} AND event_time < {{span_end:{_TS}}}{rows_read(rule)}"
    sql = (
        f"SELECT {', '.join(select)}\n"
        f"FROM (\n"
        f"  SELECT *, event_time >= {{cur_start:{_TS}}} AND event_time < {{cur_end:{_TS}}} AS in_cur,\n"
        f"         {_window_predicate('event_time', base_names)} AS in_base\n"
        f"  FROM (\n  {_shadow_pairs(database, table, span)}\n  )\n"
        f")\n"
        f"GROUP BY {', '.join(keys)}"
    )
    return sql, params


def fetch_shadow(store: ClickHouseStore, rule: Rule, windows: Windows) -> dict[SegmentKey, SegmentData]:
    """Per shadow and primary judge (and the rule's segment fields), the shared events of both windows of `rule`."""
    sql, params = shadow_sql(rule, store.database, store.table, windows)
    keys = rule.key_fields
    names = [name for name, _ in _SHADOW_AGGS]
    n = len(names)
    pairs = values_for(rule) == "pairs"
    out: dict[SegmentKey, SegmentData] = {}
    for row in _run(store, sql, params):
        key: SegmentKey = tuple((k, str(v)) for k, v in zip(keys, row[: len(keys)], strict=True))
        pos = len(keys) + 1
        cur_v: dict[str, Any] = dict(zip(names, row[pos : pos + n], strict=True))
        base_v: dict[str, Any] = dict(zip(names, row[pos + n : pos + 2 * n], strict=True))
        first, n_windows = row[pos + 2 * n], int(row[pos + 2 * n + 1])
        if pairs:
            cur_v["shadow_rho"] = paired_spearman([float(x) for x in row[pos + 2 * n + 2]])
            base_v["shadow_rho"] = paired_spearman([float(x) for x in row[pos + 2 * n + 3]])
        exposure = baseline_exposure(windows, first if int(base_v["rows"]) else None, n_windows)
        cur, base = window_stats(cur_v, windows.current_seconds), window_stats(base_v, exposure)
        if cur.rows == 0 and base.rows == 0:
            continue
        out[key] = SegmentData(cur, base, str(row[len(keys)]))
    return out


def shadow_history_sql(
    rule: Rule, database: str, table: str, grid: Grid, start: datetime, end: datetime
) -> tuple[str, dict[str, Any]]:
    """SQL and parameters of a shadow rule's history: per grid bucket and segment over [start, end), the sums of
    `history.SHADOW_SUMS`, the bucket's first event time, and its score pairs when ρ is read."""
    keys = list(rule.key_fields)
    aggs = dict(_SHADOW_AGGS)
    select = [
        "intDiv(toUnixTimestamp64Milli(event_time) - {origin:Int64}, {size:Int64}) AS bucket",
        *keys,
        "any(judge) AS judge_name",
    ]
    select += [f"{aggs[name].format(w='1')} AS s_{name}" for name in SHADOW_SUMS]
    select.append("toUnixTimestamp64Milli(min(event_time)) AS first_ms")
    if values_for(rule) == "pairs":
        select.append(f"{_SHADOW_PAIR_VALUES.format(w='1')} AS vals")
    source = _shadow_pairs(
        database, table, f"event_time >= {{start:{_TS}}} AND event_time < {{end:{_TS}}}{rows_read(rule)}"
    )
    return _bucketed(select, source, keys), _grid_params(grid, start, end)


def fetch_shadow_history(store: ClickHouseStore, rule: Rule, grid: Grid, start: datetime, end: datetime) -> History:
    """A shadow rule's shared events over [start, end) per bucket of `grid`, summed per segment."""
    sql, params = shadow_history_sql(rule, store.database, store.table, grid, start, end)
    return build_history(grid, start, end, rule.key_fields, SHADOW_SUMS, _run(store, sql, params), values_for(rule))


# ---- label metrics: the review queue's control slice against each judge's score of the item (monitor.review) ------

# The control labels of the window (a reviewer's latest label of an item: FINAL), each joined to every judge's ok row
# of the item. The scores are read only where the labelled events are (their event times bound the partitions read,
# their ids the rows): a label window's few hundred items, not the table.
_CONTROL_LABELS = (
    "WITH control AS (\n"
    "  SELECT event_id, app, model, prompt_version, reviewer, label, labelled_at, event_time AS labelled_event_time\n"
    "  FROM {labels} FINAL\n"
    "  WHERE route = {{route:String}} AND labelled_at >= {{cur_start:{ts}}} AND labelled_at < {{cur_end:{ts}}}\n"
    ")\n"
    "SELECT {select}\n"
    "FROM control\n"
    "INNER JOIN (\n"
    "  SELECT app AS s_app, event_id AS s_event_id, judge_id, judge, assumeNotNull(score) AS judge_score\n"
    "  FROM {scores} FINAL\n"
    "  WHERE status = 'ok' AND isFinite(score){rows}\n"
    "    AND event_time >= (SELECT min(labelled_event_time) FROM control)\n"
    "    AND event_time <= (SELECT max(labelled_event_time) FROM control)\n"
    "    AND app IN (SELECT app FROM control) AND event_id IN (SELECT event_id FROM control)\n"
    ") AS s ON app = s_app AND event_id = s_event_id"
)
# A 0..1 score's rubric level, as `monitor.calibration.agreement.bucket` computes it (halves up).
_JUDGE_LEVEL = "least(4, greatest(0, toInt64(floor(judge_score * 4 + 0.5))))"


def _control_labels(rule: Rule, database: str, table: str, select: str) -> str:
    return _CONTROL_LABELS.format(
        labels=f"{_ident(database)}.{LABELS_TABLE}",
        scores=f"{_ident(database)}.{_ident(table)}",
        ts=_TS,
        select=select,
        rows=live_rows(rule),
    )


def control_labels_sql(rule: Rule, database: str, table: str, windows: Windows) -> tuple[str, dict[str, Any]]:
    """SQL and parameters of a control_kappa rule: per judge (and the rule's segment fields), the window's control
    labels and the judge's scores of the same items, pair by pair."""
    keys = list(rule.key_fields)
    select = ", ".join([*keys, "any(judge) AS judge_name", "groupArray(label) AS labels", "groupArray(judge_score)"])
    sql = _control_labels(rule, database, table, select) + f"\nGROUP BY {', '.join(keys)}"
    return sql, {"route": CONTROL_ROUTE, "cur_start": windows.current[0], "cur_end": windows.current[1]}


def labels_table_exists(store: ClickHouseStore) -> bool:
    """Whether the store has the reviewers' labels table (a schema before migration 045 has none)."""
    return bool(_run(store, f"EXISTS TABLE {_ident(store.database)}.{LABELS_TABLE}", {})[0][0])


def fetch_control_labels(store: ClickHouseStore, rule: Rule, windows: Windows) -> dict[SegmentKey, SegmentData]:
    """Per judge (and the rule's segment fields), κ of the window's control labels against the judge's levels; {}
    when the store has no labels table (the rule then says so, `outcomes.describe_empty`)."""
    if not labels_table_exists(store):
        return {}
    sql, params = control_labels_sql(rule, store.database, store.table, windows)
    keys = rule.key_fields
    out: dict[SegmentKey, SegmentData] = {}
    for row in _run(store, sql, params):
        key: SegmentKey = tuple((k, str(v)) for k, v in zip(keys, row[: len(keys)], strict=True))
        labels, scores = [int(x) for x in row[len(keys) + 1]], [float(x) for x in row[len(keys) + 2]]
        kappa = control_kappa(labels, scores).value
        n = len(labels)
        current = WindowStats(windows.current_seconds, rows=n, ok=n, control_kappa=kappa)
        out[key] = SegmentData(current, WindowStats(0.0), str(row[len(keys)]))
    return out


def control_examples_sql(
    rule: Rule, segment: SegmentKey, windows: Windows, database: str, table: str, limit: int
) -> str:
    """A ready-to-run query listing a control_kappa segment's labels of the window that disagree most with the judge."""
    select = (
        "labelled_at, app, judge_id, reviewer, label, round(judge_score, 3) AS judge_score, "
        f"{_JUDGE_LEVEL} AS judge_level, abs(judge_level - label) AS gap, event_id"
    )
    body = _control_labels(rule, database, table, select)
    body = body.replace(f"{{cur_start:{_TS}}}", _ts_literal(windows.current[0]))
    body = body.replace(f"{{cur_end:{_TS}}}", _ts_literal(windows.current[1]))
    body = body.replace("{route:String}", sql_literal(CONTROL_ROUTE))
    same_segment = [f"{_ident(k)} = {sql_literal(v)}" for k, v in segment]
    return (
        f"SELECT * FROM (\n{body}\n)\n"
        f"WHERE {' AND '.join(same_segment) or '1'}\n"
        f"ORDER BY {rule.spec.examples_order}\n"
        f"LIMIT {int(limit)}"
    )


# ---- users' feedback: the per-minute rollup (monitor.feedback), and feedback joined to the judges' scores -----------

# Per window flag `{w}`, the rollup's counts under the score sums' names (`history.FEEDBACK_SUMS`): each feedback event
# is a row of weight 1 whose value is 1 unless it is negative, so the share and detector code reads it as a low-score
# share (`w_low`: the negative ones). Unresolved feedback (app '') is never a segment.
_FEEDBACK_AGGS = (
    ("rows", "sumIf(n_feedback, {w})"),
    ("ok", "sumIf(n_feedback, {w})"),
    ("errors", "toUInt64(0)"),
    ("weight", "sumIf(n_feedback, {w})"),
    ("weight_sq", "sumIf(n_feedback, {w})"),
    ("w_score", "sumIf(n_feedback - n_negative, {w})"),
    ("w_score_sq", "sumIf(n_feedback - n_negative, {w})"),
    ("w_low", "sumIf(n_negative, {w})"),
)
RESOLVED_FEEDBACK = "app != ''"


def feedback_tables_exist(store: ClickHouseStore) -> bool:
    """Whether the store has the feedback table and its rollup (a schema before migrations 046/047 has neither)."""
    sql = "SELECT count() FROM system.tables WHERE database = {db:String} AND name IN ({names:Array(String)})"
    names = [FEEDBACK_TABLE, FEEDBACK_ROLLUP_TABLE]
    return int(_run(store, sql, {"db": store.database, "names": names})[0][0]) == len(names)


def feedback_sql(rule: Rule, database: str, windows: Windows) -> tuple[str, dict[str, Any]]:
    """SQL and parameters summing the feedback rollup per segment over the current and baseline windows."""
    params, base_names = _window_params(windows)
    keys = list(rule.key_fields)
    select = [*keys]
    for prefix, flag in (("c", "in_cur"), ("b", "in_base")):
        select += [f"{expr.format(w=flag)} AS {prefix}_{name}" for name, expr in _FEEDBACK_AGGS]
    select += _exposure_columns("minute", base_names)
    sql = (
        f"SELECT {', '.join(select)}\n"
        f"FROM (\n"
        f"  SELECT *, minute >= {{cur_start:{_TS}}} AND minute < {{cur_end:{_TS}}} AS in_cur,\n"
        f"         {_window_predicate('minute', base_names)} AS in_base\n"
        f"  FROM {_ident(database)}.{FEEDBACK_ROLLUP_TABLE}\n"
        f"  WHERE minute >= {{span_start:{_TS}}} AND minute < {{span_end:{_TS}}} AND {RESOLVED_FEEDBACK}\n"
        f")"
    )
    if keys:
        sql += f"\nGROUP BY {', '.join(keys)}"
    return sql, params


def fetch_feedback(store: ClickHouseStore, rule: Rule, windows: Windows) -> dict[SegmentKey, SegmentData]:
    """Per segment, the feedback of both windows of `rule` from the rollup; {} when the store has no feedback tables
    (the rule then says so, `outcomes.describe_empty`)."""
    if not feedback_tables_exist(store):
        return {}
    sql, params = feedback_sql(rule, store.database, windows)
    keys = rule.key_fields
    names = [name for name, _ in _FEEDBACK_AGGS]
    n = len(names)
    out: dict[SegmentKey, SegmentData] = {}
    for row in _run(store, sql, params):
        key: SegmentKey = tuple((k, str(v)) for k, v in zip(keys, row[: len(keys)], strict=True))
        pos = len(keys)
        cur_v = dict(zip(names, row[pos : pos + n], strict=True))
        base_v = dict(zip(names, row[pos + n : pos + 2 * n], strict=True))
        first, n_windows = row[pos + 2 * n], int(row[pos + 2 * n + 1])
        exposure = baseline_exposure(windows, first if int(base_v["rows"] or 0) else None, n_windows)
        cur, base = window_stats(cur_v, windows.current_seconds), window_stats(base_v, exposure)
        if cur.rows == 0 and base.rows == 0 and keys:
            continue
        out[key] = SegmentData(cur, base)
    return out


def feedback_history_sql(
    rule: Rule, database: str, grid: Grid, start: datetime, end: datetime
) -> tuple[str, dict[str, Any]]:
    """SQL and parameters of a feedback rule's history: per grid bucket (of the feedback's minute) and segment over
    [start, end), the sums of `history.FEEDBACK_SUMS` and the bucket's first minute."""
    keys = list(rule.key_fields)
    aggs = {name: expr.format(w="1") for name, expr in _FEEDBACK_AGGS}
    select = [
        "intDiv(toInt64(toUnixTimestamp(minute)) * 1000 - {origin:Int64}, {size:Int64}) AS bucket",
        *keys,
        *(f"{aggs[name]} AS s_{name}" for name in FEEDBACK_SUMS),
        "toInt64(toUnixTimestamp(min(minute))) * 1000 AS first_ms",
    ]
    source = (
        f"SELECT * FROM {_ident(database)}.{FEEDBACK_ROLLUP_TABLE}\n"
        f"  WHERE minute >= {{start:{_TS}}} AND minute < {{end:{_TS}}} AND {RESOLVED_FEEDBACK}"
    )
    return _bucketed(select, source, keys), _grid_params(grid, start, end)


def fetch_feedback_history(store: ClickHouseStore, rule: Rule, grid: Grid, start: datetime, end: datetime) -> History:
    """A feedback rule's rollup over [start, end) per bucket of `grid`, summed per segment (empty without the feedback
    tables)."""
    if not feedback_tables_exist(store):
        return build_history(grid, start, end, rule.key_fields, FEEDBACK_SUMS, [], None)
    sql, params = feedback_history_sql(rule, store.database, grid, start, end)
    return build_history(grid, start, end, rule.key_fields, FEEDBACK_SUMS, _run(store, sql, params), None)


# How far before the window's first feedback its answers' scored rows are looked for: beyond the answer look-up's
# default (MONITOR_FEEDBACK_LOOKBACK_S, a day), with room to spare.
ANSWER_LOOKBACK = timedelta(days=7)

# The window's feedback on answers (a named event id, a resolved segment), each joined to every judge's primary live
# ok row of the answer: the answer's segment and the judge's score. The scores are read only where the answers are
# (their ids, and event times from a week before the window), not the table.
_FEEDBACK_SCORES = (
    "WITH fb AS (\n"
    "  SELECT event_id, negative, kind, value, comment, reason, feedback_time\n"
    "  FROM {feedback} FINAL\n"
    "  WHERE feedback_time >= {{cur_start:{ts}}} AND feedback_time < {{cur_end:{ts}}}\n"
    "    AND event_id != '' AND {resolved}\n"
    ")\n"
    "SELECT {select}\n"
    "FROM fb\n"
    "INNER JOIN (\n"
    "  SELECT event_id AS s_event_id, app, model, prompt_version, judge_id, judge, assumeNotNull(score) AS score\n"
    "  FROM {scores} FINAL\n"
    "  WHERE status = 'ok' AND isFinite(score) AND NOT {shadow}{rows}\n"
    "    AND event_time >= {{answers_start:{ts}}} AND event_time < {{cur_end:{ts}}}\n"
    "    AND event_id IN (SELECT event_id FROM fb)\n"
    ") AS s ON event_id = s_event_id"
)


def _feedback_scores(rule: Rule, database: str, table: str, select: str) -> str:
    return _FEEDBACK_SCORES.format(
        feedback=f"{_ident(database)}.{FEEDBACK_TABLE}",
        scores=f"{_ident(database)}.{_ident(table)}",
        ts=_TS,
        resolved=RESOLVED_FEEDBACK,
        select=select,
        shadow=SHADOW_ROW,
        rows=live_rows(rule),  # live, and never a feedback-triggered judgement (picked for being disliked)
    )


def feedback_auc_sql(rule: Rule, database: str, table: str, windows: Windows) -> tuple[str, dict[str, Any]]:
    """SQL and parameters of a feedback_auc rule: per judge (and the rule's segment fields), the scores of the answers
    users disliked and of those they did not, over the window's feedback."""
    keys = list(rule.key_fields)
    select = ", ".join(
        [
            *keys,
            "any(judge) AS judge_name",
            "groupArrayIf(score, negative) AS disliked",
            "groupArrayIf(score, NOT negative)",
        ]
    )
    sql = _feedback_scores(rule, database, table, select) + f"\nGROUP BY {', '.join(keys)}"
    start, end = windows.current
    return sql, {"cur_start": start, "cur_end": end, "answers_start": start - ANSWER_LOOKBACK}


def fetch_feedback_auc(store: ClickHouseStore, rule: Rule, windows: Windows) -> dict[SegmentKey, SegmentData]:
    """Per judge (and the rule's segment fields), the upper end of the 95 % interval of the AUC of its score for
    predicting the window's thumbs-downs: the rule fires only when even that is below its floor, so a judge near the
    floor on a few hundred pairs does not flap. {} when the store has no feedback tables."""
    if not feedback_tables_exist(store):
        return {}
    sql, params = feedback_auc_sql(rule, store.database, store.table, windows)
    keys = rule.key_fields
    out: dict[SegmentKey, SegmentData] = {}
    for row in _run(store, sql, params):
        key: SegmentKey = tuple((k, str(v)) for k, v in zip(keys, row[: len(keys)], strict=True))
        disliked, liked = [float(x) for x in row[len(keys) + 1]], [float(x) for x in row[len(keys) + 2]]
        figure = auc_of(disliked, liked)
        n = len(disliked) + len(liked)
        current = WindowStats(
            windows.current_seconds,
            rows=n,
            ok=n,
            feedback_auc=figure.high,
            disliked=figure.disliked,
            liked=figure.liked,
        )
        out[key] = SegmentData(current, WindowStats(0.0), str(row[len(keys)]))
    return out


def feedback_examples_sql(
    rule: Rule, segment: SegmentKey, windows: Windows, database: str, table: str, limit: int
) -> str:
    """A ready-to-run query listing a feedback rule's segment's latest negative feedback of the window (any feedback,
    for the rate), with comments and answer event ids (for feedback_auc: the disliked answers the judge scored highest
    first)."""
    same_segment = [f"{_ident(k)} = {sql_literal(v)}" for k, v in segment]
    start, end = _ts_literal(windows.current[0]), _ts_literal(windows.current[1])
    if rule.spec.table == "feedback_scores":
        select = (
            "feedback_time, app, model, prompt_version, judge_id, negative, kind, value, round(score, 3) AS score, "
            "comment, reason, event_id"
        )
        body = _feedback_scores(rule, database, table, select)
        body = body.replace(f"{{cur_start:{_TS}}}", start).replace(f"{{cur_end:{_TS}}}", end)
        body = body.replace(f"{{answers_start:{_TS}}}", _ts_literal(windows.current[0] - ANSWER_LOOKBACK))
        return (
            f"SELECT * FROM (\n{body}\n)\n"
            f"WHERE {' AND '.join([*same_segment, 'negative'])}\n"
            f"ORDER BY {rule.spec.examples_order}\n"
            f"LIMIT {int(limit)}"
        )
    # The negative feedback for the negative share; any feedback for the rate (the last that came before it stopped).
    conds = [*same_segment, f"feedback_time >= {start} AND feedback_time < {end}"]
    conds += [rule.spec.examples_filter] if rule.spec.examples_filter is not None else []
    return (
        "SELECT feedback_time, app, model, prompt_version, kind, value, reason, comment, event_id AS answer_event_id, "
        "segment_source, feedback_id\n"
        f"FROM {_ident(database)}.{FEEDBACK_TABLE} FINAL\n"
        f"WHERE {' AND '.join(conds)}\n"
        "ORDER BY feedback_time DESC\n"
        f"LIMIT {int(limit)}"
    )


# ---- a whole backtest's history per bucket (monitor.alerts.history) ---------------------------------------------


def history_sql(
    rule: Rule, database: str, table: str, grid: Grid, start: datetime, end: datetime, values: ValuesOf | None
) -> tuple[str, dict[str, Any]]:
    """SQL and parameters of a rule's history: per grid bucket and segment over [start, end), the same sums as
    `scores_sql` (`history.SCORE_SUMS`), the bucket's first row time, and the raw values when `values` asks."""
    col = rule.spec.time_column
    keys = list(rule.key_fields)
    aggs = dict(_SCORE_AGGS)
    select = [f"intDiv(toUnixTimestamp64Milli({col}) - {{origin:Int64}}, {{size:Int64}}) AS bucket", *keys]
    if "judge_id" in keys:
        select.append("any(judge) AS judge_name")
    select += [f"{aggs[name].format(w='1')} AS s_{name}" for name in SCORE_SUMS]  # prefixed: `weight` is a column
    select.append(f"toUnixTimestamp64Milli(min({col})) AS first_ms")
    if values == "score":
        select.append(f"groupArrayIf(assumeNotNull(score), {_OK_SCORE}) AS vals")
    elif values == "lag":
        select.append("groupArray(lag_s) AS vals")
    sql = (
        f"SELECT {', '.join(select)}\n"
        f"FROM (\n"
        f"  SELECT *, {_ROW_COLUMNS}\n"
        f"  FROM {_ident(database)}.{_ident(table)} FINAL\n"
        f"  WHERE {col} >= {{start:{_TS}}} AND {col} < {{end:{_TS}}}{_rows_of(rule)}\n"
        f")\n"
        f"GROUP BY {', '.join(['bucket', *keys])}\n"
        f"ORDER BY {', '.join([*keys, 'bucket'])}"
    )
    return sql, {
        "origin": grid.origin_ms,
        "size": grid.size_ms,
        "start": start,
        "end": end,
        "low": rule.low_score_below,
    }


def fetch_score_history(store: ClickHouseStore, rule: Rule, grid: Grid, start: datetime, end: datetime) -> History:
    """The scores of `rule`'s segments over [start, end) per bucket of `grid` (which must start at or before
    `start`); a feedback rule's feedback counts."""
    if rule.spec.table == "feedback":
        return fetch_feedback_history(store, rule, grid, start, end)
    values = values_for(rule)
    sql, params = history_sql(rule, store.database, store.table, grid, start, end, values)
    return build_history(grid, start, end, rule.key_fields, SCORE_SUMS, _run(store, sql, params), values)


def fetch_traffic_history(
    store: ClickHouseStore, rule: Rule, traffic_table: str, grid: Grid, start: datetime, end: datetime
) -> History:
    """The traffic counts of `rule`'s segments over [start, end) per bucket of `grid`."""
    keys = [k for k in rule.key_fields if k != "judge_id"]
    sql = (
        f"SELECT intDiv(toInt64(toUnixTimestamp(minute)) * 1000 - {{origin:Int64}}, {{size:Int64}}) AS bucket, "
        f"{''.join(k + ', ' for k in keys)}"
        "sum(sampled), sum(consumed), count(), toInt64(toUnixTimestamp(min(minute))) * 1000\n"
        f"FROM {_ident(store.database)}.{_ident(traffic_table)}\n"
        f"WHERE minute >= {{start:{_TS}}} AND minute < {{end:{_TS}}}\n"
        f"GROUP BY {', '.join(['bucket', *keys])}\n"
        f"ORDER BY {', '.join([*keys, 'bucket'])}"
    )
    rows = _run(store, sql, {"origin": grid.origin_ms, "size": grid.size_ms, "start": start, "end": end})
    return build_history(grid, start, end, keys, TRAFFIC_SUMS, rows, None)


def fetch_no_content(store: ClickHouseStore, traffic_table: str, start: datetime, end: datetime) -> dict[str, int]:
    """Per app, the OpenTelemetry calls counted without content in [start, end), most first (none: empty)."""
    sql = (
        f"SELECT app, sum(no_content) AS n FROM {_ident(store.database)}.{_ident(traffic_table)}\n"
        f"WHERE minute >= {{start:{_TS}}} AND minute < {{end:{_TS}}}\n"
        "GROUP BY app HAVING n > 0 ORDER BY n DESC, app"
    )
    return {str(app): int(n) for app, n in _run(store, sql, {"start": start, "end": end})}


def fetch_newest(store: ClickHouseStore, table: str, column: str, before: datetime, where: str = "") -> datetime | None:
    """The latest `column` of `table` at or before `before` (None when the table has no such row); `where` is a fixed
    extra filter (` AND ...`, as `live_rows` gives), never user text."""
    c = _ident(column)
    sql = (
        f"SELECT max({c}) FROM {_ident(store.database)}.{_ident(table)} WHERE {c} <= {{before:{_TS}}}{where} HAVING "
        "count() > 0"
    )
    rows = _run(store, sql, {"before": before})
    return utc(rows[0][0]) if rows else None


# ---- ready-made SQL for people ---------------------------------------------------------------------------


def sql_literal(value: str) -> str:
    """A ClickHouse string literal for `value` (backslash and quote escaped)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _ts_literal(dt: datetime) -> str:
    return f"toDateTime64('{utc(dt).strftime('%Y-%m-%d %H:%M:%S.%f')[:-3]}', 3, 'UTC')"


def examples_sql(rule: Rule, segment: SegmentKey, windows: Windows, database: str, table: str, limit: int = 20) -> str:
    """A ready-to-run query listing the worst recent examples of `segment` for `rule`'s metric (for a canary metric,
    the pairs of the runs in the window that disagree most with their labels, or failed)."""
    col = rule.spec.time_column
    same_segment = [f"{_ident(k)} = {sql_literal(v)}" for k, v in segment]
    when = f"{col} >= {_ts_literal(windows.current[0])} AND {col} < {_ts_literal(windows.current[1])}"
    conds = [*same_segment, when]
    if rule.spec.examples_filter is not None:
        conds.append(rule.spec.examples_filter)
    if rule.spec.table == "shadow":
        # The window's shared events of the pair, the largest disagreements first (the time filters both sides).
        return (
            "SELECT event_time, app, judge_id, primary_judge_id, round(shadow_score, 3) AS shadow_score,\n"
            "       round(primary_score, 3) AS primary_score, round(shadow_score - primary_score, 3) AS difference, "
            "question, event_id\n"
            f"FROM (\n  {_shadow_pairs(database, table, when + rows_read(rule))}\n)\n"
            f"WHERE {' AND '.join(same_segment) or '1'}\n"
            f"ORDER BY {rule.spec.examples_order}\n"
            f"LIMIT {int(limit)}"
        )
    if rule.spec.table == "labels":
        return control_examples_sql(rule, segment, windows, database, table, limit)
    if rule.spec.table in ("feedback", "feedback_scores"):
        return feedback_examples_sql(rule, segment, windows, database, table, limit)
    if rule.spec.table == "canary":
        return (
            "SELECT run_at, run_id, judge_id, labels, pair_id, category, label, round(score, 3) AS score,\n"
            "       round(score - label_unit, 3) AS gap, status, error\n"
            f"FROM {_ident(database)}.{CANARY_TABLE} FINAL\n"
            f"WHERE {' AND '.join(conds)}\n"
            f"ORDER BY {rule.spec.examples_order}\n"
            f"LIMIT {int(limit)}"
        )
    # The rows the rule read: a replayed row or a feedback-triggered judgement is not a recent example.
    conds.append(SAMPLED_ROW if rule.include_replays else LIVE_ROW)
    if TURN_ROWS[rule.turns]:
        conds.append(TURN_ROWS[rule.turns])
    # The statements with their verdicts explain a surprising score in one look (which claims the judge found
    # off-topic).
    return (
        "SELECT event_time, app, model, prompt_version, judge_id, status, round(score, 3) AS score, error,\n"
        "       dateDiff('millisecond', event_time, scored_at) / 1000.0 AS lag_s, cost_usd,\n"
        "       question, response, reasoning, n_statements, arrayZip(statements, verdicts) AS statement_verdicts, "
        "event_id\n"
        f"FROM {_ident(database)}.{_ident(table)} FINAL\n"
        f"WHERE {' AND '.join(conds)}\n"
        f"ORDER BY {rule.spec.examples_order}\n"
        f"LIMIT {int(limit)}"
    )
