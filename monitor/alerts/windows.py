"""Pure data at the bottom of the alerts package: a rule's windows and what one segment showed in them.

Imports no SQL, store or scipy module, so the pure modules (observations, evaluator, metric specs) stay pure."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from monitor.alerts.rules import Rule

SegmentKey = tuple[tuple[str, str], ...]
SCORE_BINS = 21  # scores binned to 0.05, floor(score * 20 + 0.5): the rubric's levels exactly
BIN_SUMS = tuple(f"w_bin_{i:02d}" for i in range(SCORE_BINS))


def utc(dt: datetime) -> datetime:
    """`dt` as an aware UTC datetime (naive values from ClickHouse are UTC)."""
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


@dataclass(frozen=True, slots=True)
class Windows:
    """The current window and the baseline windows (empty when the rule has no baseline), half-open [start, end)."""

    current: tuple[datetime, datetime]
    baseline: tuple[tuple[datetime, datetime], ...] = ()

    @property
    def current_seconds(self) -> float:
        """Length of the current window."""
        return (self.current[1] - self.current[0]).total_seconds()

    @property
    def baseline_seconds(self) -> float:
        """Total length of the baseline windows."""
        return sum((e - s).total_seconds() for s, e in self.baseline)

    @property
    def span(self) -> tuple[datetime, datetime]:
        """The smallest range covering every window (what the query scans)."""
        starts = [self.current[0], *(s for s, _ in self.baseline)]
        ends = [self.current[1], *(e for _, e in self.baseline)]
        return (min(starts), max(ends))


def windows_for(rule: Rule, now: datetime) -> Windows:
    """The windows of `rule` evaluated at `now`; the end is floored to the minute (traffic is per minute)."""
    end = utc(now) - rule.offset
    end = end.replace(second=0, microsecond=0)
    start = end - rule.window
    if not rule.uses_baseline or rule.baseline is None:
        return Windows((start, end))
    if rule.detector is not None and rule.baseline.trailing is not None:
        # A detector's baseline overlaps its window, up to the newest `fresh` stretch (see `Detector.fresh`).
        until = end - rule.detector.fresh
        return Windows((start, end), ((until - rule.baseline.trailing, until),))
    if rule.baseline.trailing is not None:
        return Windows((start, end), ((start - rule.baseline.trailing, start),))
    days = rule.baseline.previous_days or 0
    return Windows(
        (start, end), tuple((start - timedelta(days=k), end - timedelta(days=k)) for k in range(1, days + 1))
    )


def baseline_exposure(windows: Windows, first: datetime | None, windows_with_rows: int) -> float:
    """Seconds of baseline that count, for rates: a trailing baseline from the segment's first row in it
    (younger segments and a new monitor are not read as silent before), previous days only those with rows."""
    if not windows.baseline:
        return 0.0
    if len(windows.baseline) == 1:
        start, end = windows.baseline[0]
        if first is None:
            return 0.0
        return (end - max(start, utc(first))).total_seconds()
    per = (windows.baseline[0][1] - windows.baseline[0][0]).total_seconds()
    return per * windows_with_rows


@dataclass(frozen=True, slots=True)
class WeightedSums:
    """Sums over a window's ok rows, each weighted by w = 1/sample_rate (the traffic one judged row stands for).

    Sums rather than means, so that windows and segments pool by adding them (a parent's baseline)."""

    weight: float = 0.0  # sum of w
    weight_sq: float = 0.0  # sum of w^2, for the effective sample size (sum w)^2 / sum w^2
    score: float = 0.0  # sum of w * score
    score_sq: float = 0.0  # sum of w * score^2
    low: float = 0.0  # sum of w over scores below the rule's low_score_below
    # sum of w per score bin of 0.05 (`sequential.BINS`): the baseline's distribution, for a detector's threshold
    bins: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class CanarySums:
    """Sums over a window's canary runs (one judge, one labelled set): per-run figures added up, so windows pool by
    adding them, and a mean over runs is a sum over a count. ρ and κ count only the runs where they are defined."""

    runs: int = 0
    rho: float = 0.0  # sum of the runs' Spearman ρ
    rho_runs: int = 0
    kappa: float = 0.0  # sum of the runs' quadratic-weighted κ
    kappa_runs: int = 0
    shift: float = 0.0  # sum over scored pairs of score - label (0..1): over `ok`, the pooled mean shift


@dataclass(frozen=True, slots=True)
class ShadowSums:
    """A window's events scored ok by both a primary judge and its shadow (`ok` counts them): the sum of shadow −
    primary, and Spearman ρ of the two scores (None: fewer than 2 pairs, a constant side, or not read)."""

    difference: float = 0.0
    rho: float | None = None


@dataclass(frozen=True, slots=True)
class WindowStats:
    """Aggregates of one segment in one window; None where no rows define the value."""

    seconds: float
    rows: int = 0  # ok + error rows, deduplicated
    ok: int = 0
    errors: int = 0
    invalid: int = 0  # error rows of replies that did not validate (invalid_reply_rate)
    weighted: WeightedSums = WeightedSums()  # score sums weighted by 1/sample_rate (mean_score, low_score_share)
    p10: float | None = None
    lag_p90: float | None = None  # seconds from event_time to scored_at
    cost: float = 0.0
    events: int = 0  # distinct event ids (any judge)
    cache_read: float = 0.0  # prompt tokens read from the prompt cache (cache_read_share)
    prompt_tokens: float = 0.0  # all prompt tokens: input + cache read + cache write
    calls: int = 0  # rows that sent a prompt (judge API calls)
    sampled: int | None = None  # from the traffic table (None: not read)
    consumed: int | None = None
    canary: CanarySums = CanarySums()  # canary metrics: rows, ok and errors count judged pairs
    shadow: ShadowSums = ShadowSums()  # shadow metrics: rows and ok count shared events
    # control_kappa: the judge's κ against the control slice's labels (rows and ok count the labels); None: none
    # defined (no labels, or every label and judge level in one and the same rubric level)
    control_kappa: float | None = None
    # feedback_auc: the judge's AUC for predicting a thumbs-down over the window's feedback on answers it scored ok
    # (None: a class is empty), and how many disliked and liked answers it rests on (rows and ok count both)
    feedback_auc: float | None = None
    disliked: int = 0
    liked: int = 0


def finite(value: Any) -> float | None:
    """`value` as a float, or None when it is NULL, NaN or infinite (ClickHouse's answer for an empty aggregate)."""
    if value is None:
        return None
    f = float(value)
    return f if math.isfinite(f) else None


def window_stats(v: Mapping[str, Any], seconds: float) -> WindowStats:
    """A window's stats from its named sums (`rows`, `ok`, `errors`, `weight`, `weight_sq`, `w_score`, `w_score_sq`,
    `w_low`, the `w_bin_NN`, `cost`, `events`, `cache_read`, `prompt_tokens`, `calls`, and `p10`, `lag_p90` when
    read; for canary metrics `runs`, `rho`, `rho_runs`, `kappa`, `kappa_runs`, `shift` instead of the score sums; for
    shadow metrics `shadow_diff` and `shadow_rho`); the one conversion of the per-step queries and of the backtest's
    history, so both build the same stats from the same sums. A sum not given is 0."""
    rows = int(v["rows"])
    ok = int(v["ok"])

    def total(name: str) -> float:
        # sumIf over a Nullable score is NULL where no row matched: nothing, so 0.
        return finite(v.get(name)) or 0.0

    # Plain sums of weights: never NaN, NULL (None) where no row matched.
    bins = tuple(float(v[name] or 0.0) for name in BIN_SUMS) if BIN_SUMS[0] in v else ()
    weighted = WeightedSums(
        total("weight"), total("weight_sq"), total("w_score"), total("w_score_sq"), total("w_low"), bins
    )
    return WindowStats(
        seconds=seconds,
        rows=rows,
        ok=ok,
        errors=int(v["errors"]),
        invalid=int(total("invalid")),
        weighted=weighted if ok else WeightedSums(),
        p10=finite(v.get("p10")) if ok else None,
        lag_p90=finite(v.get("lag_p90")) if rows else None,
        cost=total("cost"),
        events=int(total("events")),
        cache_read=total("cache_read"),
        prompt_tokens=total("prompt_tokens"),
        calls=int(total("calls")),
        canary=_canary(v, total) if "runs" in v else CanarySums(),
        shadow=ShadowSums(total("shadow_diff"), finite(v.get("shadow_rho"))) if "shadow_diff" in v else ShadowSums(),
    )


def _canary(v: Mapping[str, Any], total: Callable[[str], float]) -> CanarySums:
    return CanarySums(
        int(total("runs")),
        total("rho"),
        int(total("rho_runs")),
        total("kappa"),
        int(total("kappa_runs")),
        total("shift"),
    )


BaselineKind = Literal["parent", "previous_version"]


@dataclass(frozen=True, slots=True)
class BaselineSource:
    """Where a segment's baseline came from when it is not the segment's own history: the nearest parent's (same
    app and judge, the other prompt versions or models), or, in a rollout rule, the version before it."""

    kind: BaselineKind
    fields: tuple[str, ...]  # the key fields the baseline differs in: ("prompt_version",), ("model",) or both
    segment_values: tuple[str, ...]  # the segment's values of those fields: ("v2",)
    baseline_values: tuple[str, ...]  # the baseline's, most events first: ("v1",), or ("m1/v1",) for both fields
    scope: SegmentKey  # the key fields segment and baseline share (app, judge_id)
    reason: str = ""  # why the segment's own history was not used

    def describe(self) -> str:
        """One clause for people: `prompt_version v2 against the app's baseline (v1)`."""
        what, own = "/".join(self.fields), "/".join(self.segment_values)
        theirs = ", ".join(self.baseline_values[:3]) + (
            f" and {len(self.baseline_values) - 3} more" if len(self.baseline_values) > 3 else ""
        )
        if self.kind == "previous_version":
            return f"{what} {own} against {theirs}, the {what} before it, in the same window"
        shared = [(k, v) for k, v in self.scope if k != "judge_id"]
        if [k for k, _ in shared] == ["app"]:
            whose = "the app's baseline"
        else:
            whose = "the baseline of " + (" ".join(f"{k}={v}" for k, v in shared) or "all traffic")
        text = f"{what} {own} against {whose} ({theirs})"
        return f"{text}: {self.reason}" if self.reason else text


@dataclass(frozen=True, slots=True)
class SegmentData:
    """One segment's current and baseline statistics, the judge name when keyed by judge_id, and where the
    baseline came from when it is not the segment's own history."""

    current: WindowStats
    baseline: WindowStats
    judge: str = ""
    baseline_from: BaselineSource | None = None


@dataclass(frozen=True, slots=True)
class VersionStats:
    """One prompt version (or model) of a rollout rule's segment: its current window and its first event."""

    name: str
    first_seen: datetime  # the version's first event in the rule's lookback (any status)
    current: WindowStats
    judge: str = ""


@dataclass(frozen=True, slots=True)
class TrafficCounts:
    """Sampled and consumed events of one segment in the current window and the baseline."""

    sampled: int
    consumed: int
    baseline_sampled: int
    baseline_consumed: int
    baseline_seconds: float


@dataclass(frozen=True, slots=True)
class TailCounts:
    """For p10 tests: ok scores below the baseline's p10 in each window, and below the fire threshold now."""

    cutoff: float
    current_below: int
    baseline_below: int
    current_below_threshold: int
