"""Why a rule or a segment made no decision, as data: a `Gap` kind with the numbers behind it, set where the
decision is made (observations, engine), and the plain words for people (`alerts check`), made from that data.

Pure: no SQL, no store."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING

from schemas.durations import format_duration

if TYPE_CHECKING:
    from monitor.alerts.rules import Rule
    from monitor.alerts.windows import SegmentKey, Windows

# The settings named in the explanations (tests tie them to `ShadowSettings` and `AlertSettings`): outcomes stay
# pure, without the judging runtime's imports.
SHADOW_JUDGE_VARIABLE = "MONITOR_SHADOW_JUDGE"
SHADOW_RATE_VARIABLE = "MONITOR_SHADOW_SAMPLE_RATE"
SHADOW_METHODS = ("lexical", "rubric", "statements")
CANARY_INTERVAL_VARIABLE = "ALERTS_CANARY_INTERVAL"
FEEDBACK_TOPICS_VARIABLE = "MONITOR_FEEDBACK_TOPICS"


class Gap(StrEnum):
    """What was missing. Segment gaps come in a `Shortfall`, rule gaps (no segment at all) in an `EmptyRule`."""

    FEW_EVENTS = "few_events"  # the window has fewer than min_events
    NO_VALUE = "no_value"  # nothing in the window that the metric counts (no ok rows for a mean)
    FEW_BASELINE_EVENTS = "few_baseline_events"  # the baseline has fewer than min_baseline_events
    SILENT_FEW_BASELINE = "silent_few_baseline"  # silent now, but the baseline is too thin to expect events
    NO_TRAFFIC_COUNTS = "no_traffic_counts"  # coverage: the traffic table has no counts for the segment
    NO_BASELINE = "no_baseline"  # the condition compares with a baseline that has no value
    NO_ROWS = "no_rows"  # no rows in the window or the baseline (a segment held, or a whole rule)
    STORE_EMPTY = "store_empty"  # rule: its table (scores, canary runs) has no row at all up to now
    TRAFFIC_EMPTY = "traffic_empty"  # rule: the traffic table has no row at all up to now
    NO_ROLLOUT = "no_rollout"  # rollout rule: no segment has a newer version beside an older one
    NO_SHADOW_JUDGE = "no_shadow_judge"  # shadow rule: judged rows, but never a shadow judge's (none configured)
    ONLY_REPLAYS = "only_replays"  # rule leaving replays out: the scores table has replayed rows only
    ONLY_OTHER_ROWS = "only_other_rows"  # rule: its table has rows in the window, none of them the rule's
    NO_SHARED_EVENTS = "no_shared_events"  # shadow rule: shadow rows in the window, none shared ok with a primary
    NO_LABELS_TABLE = "no_labels_table"  # label rule: the store has no labels table (a schema before migration 045)
    FEW_OF_A_CLASS = "few_of_a_class"  # feedback_auc: too few disliked (or liked) answers for an AUC to mean much


@dataclass(frozen=True, slots=True)
class Shortfall:
    """One reason a segment made no decision: `have` of the `need`ed events, where counts apply."""

    gap: Gap
    have: int = 0
    need: int = 0


@dataclass(frozen=True, slots=True)
class Newest:
    """The newest row at or before a time (None: none at all), to explain an empty window: of the rows the rule reads
    (`at`: live ones, a shadow judge's for a shadow rule), and of its whole table (`table_at`)."""

    at: datetime | None
    table_at: datetime | None


@dataclass(frozen=True, slots=True)
class LateVersion:
    """A rollout rule's version whose first event is after the window's end (`offset` hides it for now)."""

    scope: SegmentKey  # the segment without the version
    name: str
    first_seen: datetime


@dataclass(frozen=True, slots=True)
class EmptyRule:
    """A rule that found no segment to evaluate, and why."""

    rule: Rule
    windows: Windows
    gap: Gap
    newest: Newest | None = None  # None: not looked up (backtests)
    single_version: int = 0  # NO_ROLLOUT: segments with one version in the window
    started_together: int = 0  # NO_ROLLOUT: segments whose versions started within `rollout.min_gap`
    late: tuple[LateVersion, ...] = ()  # NO_ROLLOUT: versions first seen after the window's end


@dataclass(frozen=True, slots=True)
class EmptyFacts:
    """What the engine read about a rule without segments: its versions without a rollout, versions after the window,
    and the newest rows up to the evaluation time and up to the window's end (None: not looked up)."""

    single_version: int = 0
    started_together: int = 0
    late: tuple[LateVersion, ...] = ()
    newest: Newest | None = None
    by_end: Newest | None = None  # looked up only when a newest row is at or after the window's end


def _in_window(at: datetime | None, by_end: datetime | None, window: tuple[datetime, datetime]) -> bool:
    """Whether a row is in the half-open window, from the newest row up to now and the newest up to its end."""
    start, end = window
    if at is None or at < start:
        return False
    if at < end:
        return True
    return by_end is not None and start <= by_end < end


def why_empty(rule: Rule, windows: Windows, facts: EmptyFacts) -> EmptyRule:
    """Why `rule` found no segment: versions without a rollout, an empty table, a table without the rule's rows (no
    shadow judge, replays only), the rule's rows only outside its window, or none in its windows at all."""
    if facts.single_version or facts.started_together:
        return EmptyRule(
            rule, windows, Gap.NO_ROLLOUT, facts.newest, facts.single_version, facts.started_together, facts.late
        )
    newest = facts.newest
    if rule.spec.table == "labels":
        # No judge with a control label in the window: too few labels (none), or no labels table to read them from.
        return EmptyRule(rule, windows, Gap.NO_LABELS_TABLE if newest is None else Gap.NO_ROWS, newest)
    if newest is None:
        return EmptyRule(rule, windows, Gap.NO_ROWS)
    shadow = rule.spec.table == "shadow"
    if newest.table_at is None:
        return EmptyRule(rule, windows, Gap.TRAFFIC_EMPTY if rule.source == "traffic" else Gap.STORE_EMPTY, newest)
    if newest.at is None:
        # The table has rows, none ever of the rule's: the only filters are the shadow judge's rows and live ones.
        return EmptyRule(rule, windows, Gap.NO_SHADOW_JUDGE if shadow else Gap.ONLY_REPLAYS, newest)
    by_end = facts.by_end
    if _in_window(newest.at, by_end.at if by_end is not None else None, windows.current):
        # Shadow rows in the window but no segment: none of them pairs with a primary's ok row.
        return EmptyRule(rule, windows, Gap.NO_SHARED_EVENTS if shadow else Gap.NO_ROWS, newest)
    if _in_window(newest.table_at, by_end.table_at if by_end is not None else None, windows.current):
        return EmptyRule(rule, windows, Gap.ONLY_OTHER_ROWS, newest)
    return EmptyRule(rule, windows, Gap.NO_ROWS, newest)


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
    "control_kappa": "no κ: every control label and every judge score of them is in one and the same rubric level",
    "feedback_auc": "no AUC: the window's feedback on judged answers is all negative or all positive",
}


def _no_value(rule: Rule) -> str:
    if rule.metric in _CANARY_NO_VALUE:
        return _CANARY_NO_VALUE[rule.metric]
    if rule.metric in ("mean_score", "low_score_share", "p10", "rollout_mean_score"):
        return "no scored (ok) rows in the window"
    if rule.metric == "feedback_rate":
        return "no consumed answers counted in the window"
    if rule.metric == "feedback_negative_share":
        return "no feedback in the window"
    if rule.metric == "coverage":
        return "no sampled events counted in the window"
    return "no rows in the window"


def describe_shortfall(s: Shortfall, rule: Rule, windows: Windows | None = None, now: datetime | None = None) -> str:
    """One shortfall in plain words; with `windows`, the current window's times are named."""
    g = s.gap
    unit = rule.spec.unit
    if g is Gap.FEW_EVENTS and rule.spec.table == "labels":
        return f"{s.have} {unit}, {s.need} needed (labelled in the last {_length(rule.window)})"
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
    if g is Gap.FEW_OF_A_CLASS:
        return f"{s.have} answers in the smaller class (disliked or not), {s.need} of each needed"
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
    """Why a rule had no segment, in one sentence: the missing source (shadow judge, canary runs, live rows), the
    rollout that is not in the window, or the window's times and what hid the newest rows."""
    rule, windows = e.rule, e.windows
    if rule.spec.table == "labels":
        return _no_labels(e, now)
    if rule.spec.table in ("feedback", "feedback_scores"):
        return _no_feedback(e, now)
    canary, shadow = rule.spec.table == "canary", rule.spec.table == "shadow"
    if e.gap is Gap.STORE_EMPTY:
        if canary:
            return (
                "no canary run in the store yet (`relevancy-monitor alerts run` re-scores the labelled canary pairs "
                f"every {CANARY_INTERVAL_VARIABLE}, hourly by default, never when it is 0 or off; `alerts check` runs "
                "none)"
            )
        return "no judged rows in the store yet"
    if e.gap is Gap.TRAFFIC_EMPTY:
        return (
            f"traffic table empty: no consumed events counted yet (needed by {rule.metric} rules with source "
            f"{rule.source})"
        )
    if e.gap is Gap.NO_SHADOW_JUDGE:
        return (
            "no shadow judge configured: the store has judged rows, none of them a shadow judge's (set "
            f"{SHADOW_JUDGE_VARIABLE} to {', '.join(SHADOW_METHODS[:-1])} or {SHADOW_METHODS[-1]} for "
            f"`relevancy-monitor run`; it judges the share {SHADOW_RATE_VARIABLE} of the events a second time)"
        )
    if e.gap is Gap.ONLY_REPLAYS:
        return (
            "no live rows in the store, only rows of `relevancy-monitor replay`, which this rule leaves out "
            "(`include_replays: true` reads them)"
        )
    if e.gap is Gap.NO_ROLLOUT and rule.rollout is not None:
        return _no_rollout(e, rule.rollout.of, now)
    if e.gap is Gap.ONLY_OTHER_ROWS:
        if shadow:
            return (
                f"no shadow judge's rows{_between(windows, now)}, only the primary judge's ({_newest_words(e, now)}; "
                f"{SHADOW_JUDGE_VARIABLE} turns the shadow judge on)"
            )
        return (
            f"no live rows{_between(windows, now)}, only replayed ones, which this rule leaves out "
            f"({_newest_words(e, now, 'live row')}; `include_replays: true` reads them)"
        )
    newest = _newest_words(e, now)
    if e.gap is Gap.NO_SHARED_EVENTS:
        return (
            f"no event that both the shadow judge and its primary scored ok{_between(windows, now)}, though the "
            "shadow judge has rows there (one of the two failed on each, or the primary's row is missing)"
        )
    if canary:
        what = "no canary runs"
    elif shadow:
        what = "no shadow judge's rows"
    elif rule.source == "traffic":
        what = "no traffic counted"
    elif rule.spec.needs_traffic:
        what = "no judged rows or traffic counts"
    elif rule.spec.time_column == "scored_at":
        what = "no rows scored"
    else:
        what = "no judged rows"
    if rule.turns != "all":
        what += TURN_WORDS[rule.turns]
    text = what + _between(windows, now)
    if windows.baseline:
        text += f", nor {baseline_words(rule)}"
    return text + (f" ({newest})" if newest else "")


def _no_labels(e: EmptyRule, now: datetime) -> str:
    """A label rule without a judge to decide on, in one line: no labels table, or no control label (with a judge's
    score of its item) in the window."""
    rule = e.rule
    head = f"0 {rule.spec.unit}, {rule.min_events} needed (labelled in the last {_length(rule.window)})"
    if e.gap is Gap.NO_LABELS_TABLE:
        return f"{head}: the store has no labels table (a schema before migration 045; `relevancy-monitor migrate`)"
    if e.newest is None or e.newest.at is None:
        return f"{head}: no control label yet (reviewers label the queue in `relevancy-monitor ui`)"
    if e.newest.at >= e.windows.current[0]:
        return f"{head}: the control labels in it are of items no judge scored ok"
    return f"{head}: newest control label {_when(e.newest.at, now)}"


def _no_feedback(e: EmptyRule, now: datetime) -> str:
    """A feedback rule without a segment, in one line: no feedback read (or no feedback tables), none with a segment,
    or none in the window (for feedback_auc: none on an answer a judge scored)."""
    rule, windows = e.rule, e.windows
    newest = e.newest
    if newest is not None and newest.table_at is None:
        return (
            f"no users' feedback in the store yet ({FEEDBACK_TOPICS_VARIABLE} names the topics that carry it; a schema "
            "before migration 046 has no feedback table: `relevancy-monitor migrate`)"
        )
    if newest is not None and newest.at is None:
        return "feedback in the store, but none with a segment (unresolved: its answer was found nowhere)"
    if rule.spec.table == "feedback_scores":
        head = f"0 {rule.spec.unit}, {rule.min_events} needed"
        return f"{head}: no feedback on an answer a judge scored ok{_between(windows, now)}" + (
            f" (newest feedback {_when(newest.at, now)})" if newest is not None and newest.at is not None else ""
        )
    text = "no feedback" + _between(windows, now)
    if windows.baseline:
        text += f", nor {baseline_words(rule)}"
    newest_words = _newest_words(e, now, "feedback")
    return text + (f" ({newest_words})" if newest_words else "")


# A rule on one kind of turn: why it can find none where the store has rows.
TURN_WORDS = {
    "first": " of a first turn (turn 0)",
    "follow_up": " of a follow-up turn (turn > 0: events that carry the conversation before the question)",
}


def _no_rollout(e: EmptyRule, of: str, now: datetime) -> str:
    parts = []
    if e.single_version:
        parts.append(f"{_count(e.single_version, 'segment')} with a single {of}")
    if e.started_together:
        gap = format_duration(e.rule.rollout.min_gap) if e.rule.rollout is not None else ""
        parts.append(f"{e.started_together} whose {of}s started within {gap} of each other")
    text = "no rollout in the window: " + (", ".join(parts) or "no versions")
    if e.late:
        # The neighbouring rules (offset 0) may already list the new version: say why this one does not yet. Shown
        # per segment without the judge: a new version judged by two judges is one rollout.
        first: dict[tuple[str, str], datetime] = {}
        for v in e.late:
            key = (v.name, _segment_words(v.scope))
            first[key] = min(first.get(key, v.first_seen), v.first_seen)
        shown = [f"{of} {name} ({where}) first seen {_when(t, now)}" for (name, where), t in first.items()]
        more = f" and {len(shown) - 3} more" if len(shown) > 3 else ""
        text += (
            f"; {', '.join(shown[:3])}{more}, after the window's end ({_window_end_words(e.rule)}): compared once the "
            "window reaches it"
        )
    return text


def _segment_words(scope: SegmentKey) -> str:
    return " ".join(f"{k}={v}" for k, v in scope if k != "judge_id") or "all traffic"


def _window_end_words(rule: Rule) -> str:
    offset = rule.offset
    if offset.total_seconds() > 0:
        return f"`offset` {format_duration(offset)} before now"
    return "at the last whole minute"


def _newest_words(e: EmptyRule, now: datetime, noun: str = "") -> str:
    """Where the newest of the rule's rows is against the window: after its end (the offset or the unfinished minute
    hid it), or before; "" when none was looked up."""
    if e.newest is None or e.newest.at is None:
        return ""
    noun = noun or {"canary": "run", "shadow": "shadow row"}.get(e.rule.spec.table, "row")
    newest = f"newest {noun} {_when(e.newest.at, now)}"
    if e.newest.at >= e.windows.current[1]:
        return f"the window ends {_window_end_words(e.rule)}; {newest}"
    return newest
