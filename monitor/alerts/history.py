"""A rule's history read once for a whole backtest: per segment, the sums of every grid bucket (a few minutes),
from which each step's windows are summed in memory instead of one query per rule and step.

The grid is chosen so that every window boundary of every step falls on a bucket boundary (`grid_for`); the
sums are those the per-step query computes (`queries._SCORE_AGGS`), so a window's stats are the same sums,
added in another order. Exact quantiles (p10, the lag's p90) and the p10 tail counts come from the raw values,
kept bucket after bucket, with ClickHouse's `quantileExact` rule. Distinct event ids are counted per bucket: an
event whose rows (several judges) lie in different buckets would count twice, which needs one event id with
different event times.

Pure: built from the rows a history query returned (`queries.fetch_score_history`), no I/O."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from monitor.alerts.rules import Rule
from monitor.alerts.sequential import Buckets
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
    window_stats,
    windows_for,
)

MINUTE = timedelta(minutes=1)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# The additive sums of a score bucket, in the order the history query selects them.
SCORE_SUMS = (
    "rows",
    "ok",
    "errors",
    "invalid",
    "weight",
    "weight_sq",
    "w_score",
    "w_score_sq",
    "w_low",
    *BIN_SUMS,
    "cost",
    "events",
    "cache_read",
    "prompt_tokens",
    "calls",
)
TRAFFIC_SUMS = ("sampled", "consumed", "present")
# A feedback bucket's (`queries._FEEDBACK_AGGS`): the events as unit-weight rows, each a 1 when not negative, so that
# the score sums' names read them (w_low: the negative ones).
FEEDBACK_SUMS = ("rows", "ok", "errors", "weight", "weight_sq", "w_score", "w_score_sq", "w_low")
# A canary bucket's: its runs' pairs and summed figures (`queries._CANARY_AGGS`).
CANARY_SUMS = ("rows", "ok", "errors", "runs", "rho", "rho_runs", "kappa", "kappa_runs", "shift")
# A shadow bucket's: its shared events (rows = ok) and their summed shadow − primary (`queries._SHADOW_AGGS`).
SHADOW_SUMS = ("rows", "ok", "errors", "shadow_diff")

# Which raw values a metric's reading needs beyond sums: ok scores (p10 and its tail counts), lags, or the shared
# events' (shadow, primary) score pairs, interleaved (a rank correlation is no sum).
ValuesOf = Literal["score", "lag", "pairs"]
_VALUES: dict[str, ValuesOf] = {"p10": "score", "scoring_lag_p90": "lag", "shadow_spearman": "pairs"}


def values_for(rule: Rule) -> ValuesOf | None:
    """The raw values a rule's metric reads (None: sums suffice)."""
    return _VALUES.get(rule.metric)


@dataclass(frozen=True, slots=True)
class Grid:
    """Buckets of `size` from `origin`; a window whose bounds are on it is a run of whole buckets."""

    origin: datetime
    size: timedelta

    def index(self, t: datetime) -> int | None:
        """The bucket starting at `t`; None when `t` is not a bucket boundary."""
        q, r = divmod(t - self.origin, self.size)
        return int(q) if not r else None

    def covering(self, start: datetime) -> Grid:
        """The same grid with its origin moved back by whole buckets to `start` or before (bucket numbers >= 0)."""
        if start >= self.origin:
            return self
        whole, part = divmod(self.origin - start, self.size)
        return Grid(self.origin - self.size * (int(whole) + (1 if part else 0)), self.size)

    @property
    def origin_ms(self) -> int:
        """The origin in epoch milliseconds."""
        return (self.origin - EPOCH) // timedelta(milliseconds=1)

    @property
    def size_ms(self) -> int:
        """The bucket size in milliseconds."""
        return self.size // timedelta(milliseconds=1)


def grid_for(rule: Rule, since: datetime, step: timedelta) -> Grid | None:
    """The coarsest grid on which every window of `rule`, evaluated at since, since + step, ..., starts and ends;
    None when its lengths are not whole minutes (then each step is queried)."""
    lengths = [rule.window]
    if rule.uses_baseline and rule.baseline is not None:
        lengths.append(rule.baseline.trailing if rule.baseline.trailing is not None else timedelta(days=1))
    if rule.rollout is not None:
        lengths.append(rule.rollout.lookback)
    if rule.detector is not None:
        lengths.append(rule.detector.fresh)
    if any(length % MINUTE for length in lengths):
        return None
    # Window ends are floored to the minute: with a step of whole minutes they move by exactly one step each.
    step_minutes = step // MINUTE if not step % MINUTE else 1
    size = math.gcd(step_minutes, *(length // MINUTE for length in lengths))
    if rule.detector is not None or rule.spec.compares_versions:
        size = 1  # a detector's (and a rollout's recovery) statistic sums minute buckets, in `run` as in a backtest
    return Grid(windows_for(rule, since).current[1], timedelta(minutes=size))


def read_range(rule: Rule, since: datetime, last: datetime) -> tuple[datetime, datetime]:
    """What the rule's queries scan over evaluations from `since` to `last`: [first window's span start (or
    rollout lookback), last window's end)."""
    first, final = windows_for(rule, since), windows_for(rule, last)
    start = first.span[0]
    if rule.rollout is not None:
        start = min(start, first.current[1] - rule.rollout.lookback)
    return start, final.span[1]


@dataclass(frozen=True, slots=True, eq=False)
class Series:
    """One segment's non-empty buckets: their numbers, prefix sums of their columns, their first row's time, and
    (when read) their raw values one bucket after the other."""

    buckets: NDArray[np.int64]
    prefix: NDArray[np.float64]  # (len(buckets) + 1, columns): prefix[i] is the sum over buckets[:i]
    first_ms: NDArray[np.int64]
    judge: str = ""
    values: NDArray[np.float64] | None = None
    offsets: NDArray[np.int64] | None = None  # values of bucket i: values[offsets[i]:offsets[i + 1]]

    def positions(self, bounds: Sequence[int]) -> NDArray[np.intp]:
        """Where each bucket number of `bounds` would go among the buckets (start of a half-open run)."""
        return np.searchsorted(self.buckets, bounds)

    def window_values(self, lo: int, hi: int) -> NDArray[np.float64]:
        """The raw values of the buckets at positions [lo, hi)."""
        assert self.values is not None, "history read without values"
        assert self.offsets is not None
        return self.values[self.offsets[lo] : self.offsets[hi]]


@dataclass(frozen=True, slots=True, eq=False)
class History:
    """The series of one rule's segments over [start, end) on `grid`."""

    grid: Grid
    start: datetime
    end: datetime
    columns: tuple[str, ...]
    series: dict[SegmentKey, Series]
    values: ValuesOf | None = None

    def bounds(self, windows: Windows, *, lookback: timedelta | None = None) -> list[int] | None:
        """Bucket numbers of the windows' bounds: current start and end, then each baseline window's (and the
        lookback start); None when one is off the grid or outside what was read."""
        times = [*windows.current, *(t for w in windows.baseline for t in w)]
        if lookback is not None:
            times.append(windows.current[1] - lookback)
        if min(times) < self.start or max(times) > self.end:
            return None
        out = []
        for t in times:
            i = self.grid.index(t)
            if i is None:
                return None
            out.append(i)
        return out


def build_history(
    grid: Grid,
    start: datetime,
    end: datetime,
    key_fields: Sequence[str],
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    values: ValuesOf | None,
) -> History:
    """A history from query rows `(bucket, *key values, [judge if judge_id is a key], *columns, first_ms, [values])`,
    ordered by key, then bucket."""
    judged = "judge_id" in key_fields
    n_keys, n_cols = len(key_fields), len(columns)
    groups: dict[SegmentKey, list[Sequence[Any]]] = {}
    for row in rows:
        key: SegmentKey = tuple((k, str(v)) for k, v in zip(key_fields, row[1 : 1 + n_keys], strict=True))
        groups.setdefault(key, []).append(row)
    series = {}
    first_col = 1 + n_keys + (1 if judged else 0)
    for key, group in groups.items():
        sums = np.array([[float(x or 0) for x in r[first_col : first_col + n_cols]] for r in group], dtype=np.float64)
        _finite_sums(sums, columns)
        prefix = np.zeros((len(group) + 1, n_cols), dtype=np.float64)
        np.cumsum(sums, axis=0, out=prefix[1:])
        vals = offsets = None
        if values is not None:
            chunks = [r[first_col + n_cols + 1] for r in group]
            offsets = np.zeros(len(group) + 1, dtype=np.int64)
            np.cumsum([len(c) for c in chunks], out=offsets[1:])
            vals = np.fromiter((float(x) for c in chunks for x in c), dtype=np.float64, count=int(offsets[-1]))
        series[key] = Series(
            buckets=np.array([int(r[0]) for r in group], dtype=np.int64),
            prefix=prefix,
            first_ms=np.array([int(r[first_col + n_cols]) for r in group], dtype=np.int64),
            judge=str(group[0][1 + n_keys]) if judged else "",
            values=vals,
            offsets=offsets,
        )
    return History(grid, start, end, tuple(columns), series, values)


_OK_SUMS = ("ok", "weight", "weight_sq", "w_score", "w_score_sq", "w_low", *BIN_SUMS)


def _finite_sums(sums: NDArray[np.float64], columns: Sequence[str]) -> None:
    """Like `window_stats`, a sum that is not finite counts as none, so that a prefix sum never carries it on; a
    bucket whose score sums are not finite counts no ok score at all (not a weight without scores: zeros)."""
    bad = ~np.isfinite(sums)
    if "w_score" in columns:
        ok = np.array([columns.index(c) for c in _OK_SUMS if c in columns], dtype=np.intp)
        sums[np.ix_(bad[:, ok].any(axis=1), ok)] = 0.0
    sums[bad] = 0.0


# ---- a step's windows from the history ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Sums:
    """One window's (or the baseline windows') sums, windows with rows, first row time, and positions."""

    sums: dict[str, float]
    windows_with_rows: int
    first: datetime | None
    runs: list[tuple[int, int]]  # (lo, hi) positions among the segment's buckets, one per window


def _sums(history: History, s: Series, pos: NDArray[np.intp], pairs: Sequence[tuple[int, int]], present: str) -> _Sums:
    runs = [(int(pos[a]), int(pos[b])) for a, b in pairs]
    total = np.zeros(len(history.columns), dtype=np.float64)
    with_rows = 0
    first_ms: int | None = None
    p = history.columns.index(present)
    for lo, hi in runs:
        if hi <= lo:
            continue
        d = s.prefix[hi] - s.prefix[lo]
        total += d
        if d[p] > 0:
            with_rows += 1
            first_ms = int(s.first_ms[lo]) if first_ms is None else min(first_ms, int(s.first_ms[lo]))
        # A bucket without rows is never stored, so the first stored bucket of a run holds its first row.
    first = EPOCH + timedelta(milliseconds=first_ms) if first_ms is not None else None
    return _Sums(dict(zip(history.columns, total.tolist(), strict=True)), with_rows, first, runs)


def _quantile(values: NDArray[np.float64], level: float) -> float | None:
    """ClickHouse's quantileExact: the element at position floor(level * n) of the sorted values."""
    n = len(values)
    if n == 0:
        return None
    k = int(level * n) if level < 1 else n - 1
    return float(np.partition(values, k)[k])


def _values(s: Series, runs: Sequence[tuple[int, int]]) -> NDArray[np.float64]:
    parts = [s.window_values(lo, hi) for lo, hi in runs if hi > lo]
    if not parts:
        return np.empty(0, dtype=np.float64)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _stats(history: History, s: Series, w: _Sums, seconds: float) -> WindowStats:
    v: dict[str, Any] = dict(w.sums)
    if history.values == "score":
        v["p10"] = _quantile(_values(s, w.runs), 0.1)
    elif history.values == "lag":
        v["lag_p90"] = _quantile(_values(s, w.runs), 0.9)
    elif history.values == "pairs":
        v["shadow_rho"] = paired_spearman(_values(s, w.runs).tolist())
    return window_stats(v, seconds)


def _pairs(n_baseline: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Index pairs into `History.bounds`: the current window, then the baseline windows."""
    return [(0, 1)], [(2 + 2 * i, 3 + 2 * i) for i in range(n_baseline)]


def scores_at(history: History, rule: Rule, windows: Windows, bounds: Sequence[int]) -> dict[SegmentKey, SegmentData]:
    """What `queries.fetch_scores` returns for `windows`, from the history (`bounds` from `History.bounds`)."""
    cur_pairs, base_pairs = _pairs(len(windows.baseline))
    out: dict[SegmentKey, SegmentData] = {}
    keyed = bool(rule.key_fields)
    for key, s in history.series.items():
        pos = s.positions(bounds)
        if keyed and pos[0] == pos[1] and all(pos[a] == pos[b] for a, b in base_pairs):
            continue  # no bucket in any window
        cur, base = _sums(history, s, pos, cur_pairs, "rows"), _sums(history, s, pos, base_pairs, "rows")
        exposure = baseline_exposure(windows, base.first if base.sums["rows"] else None, base.windows_with_rows)
        c, b = _stats(history, s, cur, windows.current_seconds), _stats(history, s, base, exposure)
        if c.rows == 0 and b.rows == 0 and keyed:
            continue
        out[key] = SegmentData(c, b, s.judge)
    if not keyed and () not in out:
        # Like the ungrouped query, all traffic is one segment even without a row.
        out[()] = SegmentData(WindowStats(windows.current_seconds), WindowStats(baseline_exposure(windows, None, 0)))
    return out


def versions_at(
    history: History, rule: Rule, windows: Windows, bounds: Sequence[int]
) -> dict[SegmentKey, list[VersionStats]]:
    """What `queries.fetch_versions` returns for `windows` (`bounds` with the lookback start last)."""
    if rule.rollout is None:
        return {}
    of = rule.rollout.of
    out: dict[SegmentKey, list[VersionStats]] = {}
    for key, s in history.series.items():
        pos = s.positions([bounds[0], bounds[1], bounds[-1]])
        if pos[1] == pos[0]:
            continue
        cur = _sums(history, s, pos, [(0, 1)], "rows")
        if not cur.sums["rows"]:
            continue
        first_seen = EPOCH + timedelta(
            milliseconds=int(s.first_ms[pos[2]])
        )  # the first bucket since the lookback start
        scope: SegmentKey = tuple((k, v) for k, v in key if k != of)
        version = dict(key)[of]
        out.setdefault(scope, []).append(
            VersionStats(version, first_seen, _stats(history, s, cur, windows.current_seconds), s.judge)
        )
    return out


def buckets_at(history: History, rule: Rule, windows: Windows, bounds: Sequence[int]) -> dict[SegmentKey, Buckets]:
    """Each segment's buckets with ok rows in the current window (`bounds[0]`, `bounds[1]`), for a detector rule (and
    a rollout's recovery): the value summed is the share not below `low_score_below` for low_score_share (not
    negative, for feedback_negative_share), else the score."""
    cols = history.columns
    iw, iw2 = cols.index("weight"), cols.index("weight_sq")
    out: dict[SegmentKey, Buckets] = {}
    for key, s in history.series.items():
        lo, hi = (int(p) for p in s.positions([bounds[0], bounds[1]]))
        if hi <= lo:
            continue
        d = np.diff(s.prefix[lo : hi + 1], axis=0)
        value = d[:, iw] - d[:, cols.index("w_low")] if rule.spec.share_detector else d[:, cols.index("w_score")]
        keep = (d[:, iw] > 0) & np.isfinite(value) & np.isfinite(d[:, iw2])
        if not keep.any():
            continue
        start_ms = history.grid.origin_ms + s.buckets[lo:hi] * history.grid.size_ms
        bins = d[keep][:, np.array([cols.index(c) for c in BIN_SUMS])] if BIN_SUMS[0] in cols else None
        out[key] = Buckets(start_ms[keep], d[keep, iw], d[keep, iw2], value[keep], bins)
    return out


def tail_counts_at(
    history: History, windows: Windows, bounds: Sequence[int], segment: SegmentKey, cutoff: float, threshold: float
) -> TailCounts:
    """What `queries.fetch_tail_counts` returns, from the ok scores kept in the history."""
    s = history.series.get(segment)
    if s is None:
        return TailCounts(cutoff, 0, 0, 0)
    cur_pairs, base_pairs = _pairs(len(windows.baseline))
    pos = s.positions(bounds)
    cur = _values(s, [(int(pos[a]), int(pos[b])) for a, b in cur_pairs])
    base = _values(s, [(int(pos[a]), int(pos[b])) for a, b in base_pairs])
    return TailCounts(
        cutoff,
        int(np.count_nonzero(cur < cutoff)),
        int(np.count_nonzero(base < cutoff)),
        int(np.count_nonzero(cur < threshold)),
    )


def traffic_at(
    history: History, rule: Rule, windows: Windows, bounds: Sequence[int]
) -> dict[SegmentKey, TrafficCounts]:
    """What `queries.fetch_traffic` returns for `windows`, from a traffic history."""
    cur_pairs, base_pairs = _pairs(len(windows.baseline))
    keyed = any(k != "judge_id" for k in rule.key_fields)
    out: dict[SegmentKey, TrafficCounts] = {}
    for key, s in history.series.items():
        pos = s.positions(bounds)
        cur, base = _sums(history, s, pos, cur_pairs, "present"), _sums(history, s, pos, base_pairs, "present")
        c_s, c_c, b_s, b_c = (
            int(x) for x in (cur.sums["sampled"], cur.sums["consumed"], base.sums["sampled"], base.sums["consumed"])
        )
        if keyed and not (c_s or c_c or b_s or b_c):
            continue
        exposure = baseline_exposure(windows, base.first if (b_s or b_c) else None, base.windows_with_rows)
        out[key] = TrafficCounts(c_s, c_c, b_s, b_c, exposure)
    if not keyed and () not in out:
        out[()] = TrafficCounts(0, 0, 0, 0, baseline_exposure(windows, None, 0))
    return out
