"""What the report leads with (pure): the alert episode that matters most, when its change began, the window the
zoomed chart covers, the headline sentence, and which segments the worst examples come from."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from monitor.report.model import Change, Figures, Firing, FirstSeen
from monitor.report.totals import SegmentTotals

# The alert segment keys that are columns of the scores table: an example or a figure filters on these.
SEGMENT_COLUMNS = ("app", "model", "prompt_version", "judge_id", "judge")
FOCUS_BEFORE = timedelta(minutes=30)  # the zoomed chart shows at least this much before the change
EXAMPLE_SEGMENTS = 3  # with nothing fired, the worst examples come from this many lowest-scoring segments
_SEVERITY = {"page": 0, "ticket": 1}

SegmentFilter = tuple[tuple[str, str], ...]  # (column, value) pairs, every one of which a row must match


def segment_filter(firing: Firing) -> SegmentFilter:
    """The episode's segment as column filters (keys the scores table has; a rule's other keys are left out)."""
    return tuple((k, v) for k, v in firing.segment if k in SEGMENT_COLUMNS)


def lead_episode(firings: Iterable[Firing]) -> Firing | None:
    """The episode the page leads with: one still firing before a resolved one, a page before a ticket, a rule on the
    judge's scores (keyed by judge_id) before one on traffic or users' feedback (the headline quotes relevancy),
    then the earliest to fire."""
    fired = [f for f in firings if f.fired_at is not None]
    if not fired:
        return None
    return min(
        fired,
        key=lambda f: (
            f.resolved_at is not None,
            _SEVERITY.get(f.severity, 2),
            "judge_id" not in dict(f.segment),
            f.fired_at,
            f.rule,
        ),
    )


def change_of(firings: Sequence[Firing], first_seen: Iterable[FirstSeen]) -> Change | None:
    """The lead episode with the rules that fired for the same segment, dated from the rollout of its version or
    model when one appeared in the range before it fired, else from the episode's start."""
    lead = lead_episode(firings)
    if lead is None:
        return None
    keys = dict(lead.segment)
    rollouts = [
        f
        for f in first_seen
        if keys.get("app") == f.app and keys.get(f.kind) == f.value and lead.fired_at and f.t <= lead.fired_at
    ]
    rollout = min(rollouts, key=lambda f: f.t) if rollouts else None
    others = sorted({f.rule for f in firings if f.segment == lead.segment and f.fired_at is not None} - {lead.rule})
    rules = (lead.rule, *others)
    return Change(lead, rules, rollout.t if rollout else lead.started, rollout)


def focus_window(at: datetime, since: datetime, until: datetime) -> tuple[datetime, datetime]:
    """The zoomed chart's range: from well before the change (30 min, or twice as long as since it) to the end."""
    before = max(FOCUS_BEFORE, 2 * (until - at))
    return max(since, at - before), until


def segment_name(firing: Firing) -> str:
    """`support-bot v13`: the app, then its prompt version (or model, or judge) when the rule keys on one."""
    keys = dict(firing.segment)
    rest = next((keys[k] for k in ("prompt_version", "model", "judge_id") if k in keys), "")
    app = keys.get("app", "all apps")
    return f"{app} {rest}".strip()


def clock(t: datetime) -> str:
    """`2026-12-03 14:32 UTC`: a time a reader can place, whatever the range's length."""
    return f"{t:%Y-%m-%d %H:%M} UTC"


def headline(change: Change | None, figures: Figures | None, pending: Sequence[Firing] = ()) -> str:
    """One line: what changed, by how much, since when, and which rules fired; or that nothing fired."""
    if change is None:
        if pending:
            p = min(pending, key=lambda f: f.started)
            return f"Nothing fired in this range ({p.rule} pending for {segment_name(p)} since {clock(p.started)})."
        return "Nothing fired in this range."
    lead = change.lead
    state = "firing" if lead.resolved_at is None else f"resolved at {clock(lead.resolved_at)}, fired"
    tail = f"{state} {', '.join(change.rules)}"
    since = f"since {clock(change.at)}"
    if figures is None or figures.current is None:
        return f"{segment_name(lead)}: {tail} {since}."
    if figures.baseline is None:
        return f"{segment_name(lead)}: relevancy {figures.current:.2f} {since}, no earlier rows to compare; {tail}."
    base = figures.baseline
    change_pct = f" ({100 * (figures.current - base) / base:+.0f} %)" if base > 0 else ""
    return f"{segment_name(lead)}: relevancy {figures.current:.2f} against {base:.2f} {since}{change_pct}, {tail}."


def fired_on_apps(firings: Iterable[Firing]) -> list[Firing]:
    """The episodes that fired for an app segment: a rule on a judge alone (its error rate or canary) says nothing of
    the answers."""
    return [f for f in firings if f.fired_at is not None and f.get("app")]


def example_sources(firings: Iterable[Firing], totals: Sequence[SegmentTotals]) -> tuple[SegmentFilter, ...]:
    """Where the worst examples come from: the app segments that fired (a rule on a judge alone, its error rate or
    canary, says nothing of answers), else the lowest-scoring segments."""
    fired = list(dict.fromkeys(segment_filter(f) for f in fired_on_apps(firings)))
    if fired:
        return tuple(fired)
    scored = sorted((t for t in totals if t.mean is not None), key=lambda t: (t.mean, -t.rows))
    return tuple(
        (("app", t.segment.app), ("prompt_version", t.segment.prompt_version), ("judge_id", t.segment.judge_id))
        for t in scored[:EXAMPLE_SEGMENTS]
    )
