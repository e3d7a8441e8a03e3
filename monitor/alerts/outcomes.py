"""Why a rule or a segment made no decision, as data: a `Gap` kind with the numbers behind it, set where the
decision is made (observations, engine), and the plain words for people (`alerts check`), made from that data.

Pure: no SQL, no store."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING

from monitor.alerts.durations import format_duration

if TYPE_CHECKING:
    from monitor.alerts.rules import Rule
    from monitor.alerts.windows import Windows


class Gap(StrEnum):
    """What was missing. Segment gaps come in a `Shortfall`, rule gaps (no segment at all) in an `EmptyRule`."""

    FEW_EVENTS = "few_events"  # the window has fewer than min_events
    NO_VALUE = "no_value"  # nothing in the window that the metric counts (no ok rows for a mean)
    FEW_BASELINE_EVENTS = "few_baseline_events"  # the baseline has fewer than min_baseline_events
    SILENT_FEW_BASELINE = "silent_few_baseline"  # silent now, but the baseline is too thin to expect events
    NO_TRAFFIC_COUNTS = "no_traffic_counts"  # coverage: the traffic table has no counts for the segment
    NO_BASELINE = "no_baseline"  # the condition compares with a baseline that has no value
    NO_ROWS = "no_rows"  # no rows in the window or the baseline (a segment held, or a whole rule)
    STORE_EMPTY = "store_empty"  # rule: the scores table has no row at all up to now
    TRAFFIC_EMPTY = "traffic_empty"  # rule: the traffic table has no row at all up to now
    NO_ROLLOUT = "no_rollout"  # rollout rule: no segment has a newer version beside an older one


@dataclass(frozen=True, slots=True)
class Shortfall:
    """One reason a segment made no decision: `have` of the `need`ed events, where counts apply."""

    gap: Gap
    have: int = 0
    need: int = 0


@dataclass(frozen=True, slots=True)
class Newest:
    """The newest row at or before the evaluation time (`at` None: none at all), to explain an empty window."""

    at: datetime | None


@dataclass(frozen=True, slots=True)
class EmptyRule:
    """A rule that found no segment to evaluate, and why."""

    rule: Rule
    windows: Windows
    gap: Gap
    newest: Newest | None = None  # None: not looked up (backtests)
    single_version: int = 0  # NO_ROLLOUT: segments with one version in the window
    started_together: int = 0  # NO_ROLLOUT: segments whose versions started within `rollout.min_gap`


# ---- plain words ------------------------------------------------------------------------------------------


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _when(t: datetime, now: datetime | None) -> str:
    # The time alone when it is on the day of the evaluation: the table title gives the date.
    if now is not None and t.date() == now.date():
        return t.strftime("%H:%M")
    return t.strftime("%Y-%m-%d %H:%M")


def _between(windows: Windows | None, now: datetime | None) -> str:
    if windows is None:
        return ""
    start, end = windows.current
    return f" between {_when(start, now)} and {_when(end, now)}"


def _length(d: timedelta) -> str:
    # "the previous 24h" reads better than "the previous 1d"; longer spans in days.
    hours, rest = divmod(d, timedelta(hours=1))
    return f"{hours}h" if not rest and hours < 48 else format_duration(d)


def baseline_words(rule: Rule) -> str:
    """Where the rule's baseline is, for people: `in the previous 24h`, `at these hours on the previous 7 days`."""
    if rule.spec.compares_versions and rule.rollout is not None:
        return f"for the {rule.rollout.of} before the newest, in the same window"
    if rule.baseline is None:
        return "in the baseline"
    if rule.baseline.trailing is not None:
        return f"in the previous {_length(rule.baseline.trailing)}"
    return f"at these hours on the previous {rule.baseline.previous_days} days"


_CANARY_NO_VALUE = {
    "canary_spearman": "no canary run in the window with a Spearman ρ (it needs 3 judged pairs and scores that differ)",
    "canary_kappa": "no canary run in the window with a κ (it needs judged pairs)",
    "canary_mean_shift": "no judged canary pair in the window",
}


def _no_value(rule: Rule) -> str:
    if rule.metric in _CANARY_NO_VALUE:
        return _CANARY_NO_VALUE[rule.metric]
    if rule.metric in ("mean_score", "low_score_share", "p10", "rollout_mean_score"):
        return "no scored (ok) rows in the window"
    if rule.metric == "coverage":
        return "no sampled events counted in the window"
    return "no rows in the window"


def describe_shortfall(s: Shortfall, rule: Rule, windows: Windows | None = None, now: datetime | None = None) -> str:
    """One shortfall in plain words; with `windows`, the current window's times are named."""
    g = s.gap
    unit = rule.spec.unit
    if g is Gap.FEW_EVENTS:
        return f"window: {s.have} of {s.need} {unit} needed{_between(windows, now)}"
    if g is Gap.NO_VALUE:
        return _no_value(rule) + _between(windows, now)
    if g is Gap.FEW_BASELINE_EVENTS:
        if s.have == 0 and rule.baseline is not None and rule.baseline.previous_days is not None:
            return (
                f"no history at these hours on the previous {rule.baseline.previous_days} days ({s.need} {unit} needed)"
            )
        return f"baseline: {s.have} of {s.need} {unit} needed {baseline_words(rule)}"
    if g is Gap.SILENT_FEW_BASELINE:
        return (
            f"silent, but the baseline has only {s.have} of the {s.need} events needed to expect any "
            f"({baseline_words(rule)})"
        )
    if g is Gap.NO_TRAFFIC_COUNTS:
        return "no traffic counts for this segment (the monitor writes them to the traffic table as it consumes)"
    if g is Gap.NO_BASELINE:
        return f"no baseline value {baseline_words(rule)}"
    if g is Gap.NO_ROWS:
        return f"no rows in the window{_between(windows, now)} or {baseline_words(rule)}"
    return g.value.replace("_", " ")


def describe_shortfalls(
    shortfalls: tuple[Shortfall, ...], rule: Rule, windows: Windows | None = None, now: datetime | None = None
) -> str:
    """The shortfalls of one segment in plain words, joined by `; `."""
    return "; ".join(describe_shortfall(s, rule, windows, now) for s in shortfalls)


def describe_empty(e: EmptyRule, now: datetime) -> str:
    """Why a rule had no segment, in plain words, naming the window's times and what hid the newest rows."""
    rule, windows = e.rule, e.windows
    canary = rule.spec.table == "canary"
    if e.gap is Gap.STORE_EMPTY:
        if canary:
            return (
                "no canary run in the store yet (`alerts run` writes one every ALERTS_CANARY_INTERVAL; off when it is "
                "0)"
            )
        return "no judged rows in the store yet"
    if e.gap is Gap.TRAFFIC_EMPTY:
        return (
            f"traffic table empty: no consumed events counted yet (needed by {rule.metric} rules with source "
            f"{rule.source})"
        )
    if e.gap is Gap.NO_ROLLOUT and rule.rollout is not None:
        parts = []
        if e.single_version:
            parts.append(f"{_count(e.single_version, 'segment')} with a single {rule.rollout.of}")
        if e.started_together:
            parts.append(
                f"{e.started_together} whose {rule.rollout.of}s started within {format_duration(rule.rollout.min_gap)} "
                "of each other"
            )
        return "no rollout in the window: " + (", ".join(parts) or "no versions")
    if canary:
        what = "no canary runs"
    elif rule.source == "traffic":
        what = "no traffic counted"
    elif rule.spec.needs_traffic:
        what = "no judged rows or traffic counts"
    elif rule.spec.time_column == "scored_at":
        what = "no rows scored"
    else:
        what = "no judged rows"
    text = what + _between(windows, now)
    if windows.baseline:
        text += f", nor {baseline_words(rule)}"
    return text + _hidden_by_offset(e, now)


def _hidden_by_offset(e: EmptyRule, now: datetime) -> str:
    """Where the newest row is against the window: after its end (the offset or the unfinished minute hid it), or
    before."""
    if e.newest is None or e.newest.at is None:
        return ""
    end = e.windows.current[1]
    newest = f"newest {'run' if e.rule.spec.table == 'canary' else 'row'} {_when(e.newest.at, now)}"
    if e.newest.at >= end:
        offset = e.rule.offset
        if offset.total_seconds() > 0:
            return f" (the window ends `offset` {format_duration(offset)} before now; {newest})"
        return f" (the window ends at the last whole minute; {newest})"
    return f" ({newest})"
