"""The report as one self-contained HTML page (pure): inline CSS and SVG, no script, no outside resource.

The markup is in the templates (`monitor/report/templates/`, autoescaped: see `monitor.report.environment`); this
module works out what they show, as plain values and text, and renders them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from monitor.report.attribution import Attribution, attribute, canary_split, shadow_split
from monitor.report.bands import THIN_EVENTS
from monitor.report.buckets import describe_width
from monitor.report.charts import MAX_APP_CHARTS, fired_apps
from monitor.report.environment import environment
from monitor.report.examples import conversation_command, find_command
from monitor.report.focus import clock, fired_on_apps, headline, segment_name
from monitor.report.formats import count, num, pct, usd, when
from monitor.report.judge_users import overall_rows, weekly_rows
from monitor.report.model import CanaryPoint, Conversation, Example, Firing, ReportData
from monitor.report.queries import DEFAULT_DAYS
from monitor.report.totals import SegmentTotals, apps_in_order, overall_mean, ratio

__all__ = ["ChartView", "attribution_of", "headline_of", "render_page", "replay_note", "when"]

PAGE = "report.html.j2"


@dataclass(frozen=True, slots=True)
class ChartView:
    """A drawn chart: its inline SVG and the series it left out."""

    svg: Markup
    omitted: tuple[str, ...] = ()
    clipped: int = 0  # points drawn at 100 % that were above it


@dataclass(frozen=True, slots=True)
class Kpi:
    """One box of the summary: a figure already written out, and what it counts."""

    value: str
    label: str


@dataclass(frozen=True, slots=True)
class AppChart:
    """One app's relevancy chart and the judges drawn on it."""

    app: str
    judges: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CanaryRow:
    """One judge and labelled set of the canary table: its runs in the range, the latest one's figures."""

    judge_id: str
    labels: str
    runs: tuple[CanaryPoint, ...]

    @property
    def latest(self) -> CanaryPoint:
        """The last run in the range."""
        return self.runs[-1]

    @property
    def shifts(self) -> tuple[float, float] | None:
        """The lowest and highest mean shift over the runs; None when no run has one."""
        found = [r.mean_shift for r in self.runs if r.mean_shift is not None]
        return (min(found), max(found)) if found else None

    @property
    def not_scored(self) -> float | None:
        """The share of the runs' pairs the judge could not score."""
        return ratio(sum(r.errors for r in self.runs), sum(r.pairs for r in self.runs))

    @property
    def cost(self) -> float | None:
        """What the runs cost; None when a run's price is unknown."""
        costs = [r.cost_usd for r in self.runs]
        return sum(c for c in costs if c is not None) if all(c is not None for c in costs) else None


@dataclass(frozen=True, slots=True)
class CoverageRow:
    """Traffic of one app and prompt version over the range."""

    app: str
    prompt_version: str
    consumed: int
    sampled: int
    judged: int

    @property
    def coverage(self) -> float | None:
        """Judged over consumed, at most 1 (see the page's note on events counted in a later minute)."""
        share = ratio(self.judged, self.consumed)
        return None if share is None else min(share, 1.0)


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement of an example with the judge's verdict on it and why."""

    text: str
    verdict: str
    reason: str

    @property
    def kind(self) -> str:
        """The verdict's colour class: yes, no, or idk for anything else."""
        return self.verdict if self.verdict in ("yes", "no", "idk") else "idk"


@dataclass(frozen=True, slots=True)
class ExampleRow:
    """A worst-scored example, its statements paired with their verdicts, and the line that finds its row."""

    example: Example
    statements: tuple[Statement, ...]
    find: str


@dataclass(frozen=True, slots=True)
class ConversationRow:
    """One of the worst conversations and the line that lists its judged turns."""

    conversation: Conversation
    find: str


def render_page(
    data: ReportData, totals: Sequence[SegmentTotals], charts: dict[str, ChartView], marked: frozenset[Firing]
) -> str:
    """The whole page. `charts` maps a chart key (see `monitor.report.charts`) to its drawing; `marked` are
    the firings drawn on at least one chart."""
    context: dict[str, Any] = {"data": data, "totals": totals, "charts": charts, "marked": marked}
    context |= _header(data)
    if data.judged_rows > 0:
        context |= _story(data) | _tables(data, totals, charts)
    return environment().get_template(PAGE).render(context)


def _header(data: ReportData) -> dict[str, Any]:
    """What the page's head, its empty state and its footer show."""
    return {
        "title": f"Relevancy report · {when(data.since)} – {when(data.until)}",
        "span": span_text(data),
        "generated": when(data.generated_at),
        "replay_note": replay_note(data),
        "consumed": sum(b.consumed for b in data.traffic),
        "no_content": no_content(data),
    }


def _story(data: ReportData) -> dict[str, Any]:
    """What the headline section and the relevancy charts show."""
    return {
        "headline": headline_of(data),
        "verdict": attribution_of(data).sentence,
        "rollout": rollout_text(data),
        "thin_events": f"{THIN_EVENTS:.0f}",
        "alert_note": alert_status_note(data),
        "canary_panel_note": canary_panel_note(data),
    }


def _tables(data: ReportData, totals: Sequence[SegmentTotals], charts: dict[str, ChartView]) -> dict[str, Any]:
    """What the sections below the headline show."""
    apps = apps_in_order(totals, fired_apps(totals, data.firings))
    rows = coverage_rows(data)
    view = charts.get("coverage")
    return {
        "kpis": kpis(data, totals),
        "app_charts": [AppChart(app, _judges_of(totals, app)) for app in apps[:MAX_APP_CHARTS]],
        "quieter_apps": apps[MAX_APP_CHARTS:],
        "canary_rows": canary_rows(data.canaries),
        "judge_user_overall": overall_rows(data.judge_users),
        "judge_user_weekly": weekly_rows(data.judge_users),
        "coverage_rows": rows,
        "clipped_points": view.clipped if view is not None else 0,
        "clipped_rows": sum(1 for r in rows if r.consumed and r.judged > r.consumed),
        "unpriced": unpriced_rows(data),
        "examples": [example_row(e, data.store) for e in data.examples],
        "example_source": example_source(data),
        "conversations": None
        if data.conversations is None
        else [ConversationRow(c, conversation_command(c, data.store)) for c in data.conversations],
    }


def _judges_of(totals: Iterable[SegmentTotals], app: str) -> tuple[str, ...]:
    return tuple(sorted({t.segment.judge_id for t in totals if t.segment.app == app}))


def span_text(data: ReportData) -> str:
    """The range, its length, how it was chosen and the charts' bucket width, as one line."""
    hours = (data.until - data.since).total_seconds() / 3600
    length = f"{hours / 24:.1f} days" if hours >= 48 else f"{hours:.1f} h" if hours >= 1 else f"{hours * 60:.0f} min"
    how = (
        f"all the data in the store, up to {DEFAULT_DAYS} days (the default; --since and --until choose another)"
        if data.default_range
        else "as asked (--since, --until)"
    )
    return (
        f"Range {when(data.since)} – {when(data.until)} ({length}): {how} · buckets of {describe_width(data.bucket_s)}"
    )


def headline_of(data: ReportData) -> str:
    """The page's one-line headline: the lead change against its baseline and the rules that fired, or that
    nothing fired."""
    if data.judged_rows == 0:
        return "No judged events in this range."
    pending = [f for f in data.firings if f.fired_at is None]
    return headline(data.change, data.figures, pending)


def attribution_of(data: ReportData) -> Attribution:
    """Product or judge, for the lead change (see `monitor.report.attribution`)."""
    change, figures = data.change, data.figures
    judge = figures.judge_id if figures is not None else ""
    at = change.at if change is not None else data.since
    app = dict(change.lead.segment).get("app", "") if change is not None else ""
    canary = canary_split(data.canaries, judge, at) if judge else None
    shadow = shadow_split(data.shadow, app, at) if app else None
    return attribute(figures, change.at if change is not None else None, canary, shadow)


def rollout_text(data: ReportData) -> str:
    """When the lead change began: the rollout that started it, or the episode's start; empty without a change."""
    c = data.change
    if c is None:
        return ""
    if c.rollout is not None:
        return f"{c.rollout.label} first appeared at {clock(c.rollout.t)}"
    return (
        f"the episode began at {clock(c.at)} (no new prompt version or model of {segment_name(c.lead)} appeared "
        "before it)"
    )


def replay_note(data: ReportData) -> str:
    """One line on the rows `relevancy-monitor replay` wrote in the range: left out (the default) or included."""
    r = data.replays
    if r is None:
        return "Replayed rows: none (this table has no replay_run column: it predates migration 036)."
    if r.rows == 0:
        return "Replayed rows: none in this range."
    runs = f"{count(r.runs)} replay run{'' if r.runs == 1 else 's'}"
    if data.include_replays:
        return f"Replayed rows: {count(r.rows)} from {runs} in this range, included (--include-replays)."
    return f"Replayed rows: {count(r.rows)} from {runs} in this range, left out (--include-replays includes them)."


@dataclass(frozen=True, slots=True)
class NoContent:
    """OpenTelemetry calls that came without text, in all and per app (busiest first, as one line)."""

    calls: int
    apps: str


def no_content(data: ReportData) -> NoContent | None:
    """The OpenTelemetry calls that came without text: traffic that no score can stand for; None when there are
    none."""
    per_app: dict[str, int] = {}
    for b in data.traffic:
        if b.no_content:
            per_app[b.app] = per_app.get(b.app, 0) + b.no_content
    if not per_app:
        return None
    apps = ", ".join(f"{app} {count(n)}" for app, n in sorted(per_app.items(), key=lambda kv: -kv[1]))
    return NoContent(sum(per_app.values()), apps)


def kpis(data: ReportData, totals: Sequence[SegmentTotals]) -> list[Kpi]:
    """The summary's boxes: rows, mean, low-score share, errors, cost, segments and judges of the range."""
    rows = sum(t.rows for t in totals)
    errors = sum(t.errors for t in totals)
    low = ratio(sum(t.w_low for t in totals), sum(t.w_ok for t in totals))
    return [
        Kpi(count(rows), "judged rows"),
        Kpi(num(overall_mean(totals)), "mean score, all segments"),
        Kpi(pct(low), "scored < 0.5"),
        Kpi(pct(ratio(errors, rows)), f"error rows ({count(errors)})"),
        Kpi(usd(sum(c.cost_usd for c in data.costs)), "judge cost"),
        Kpi(count(len(totals)), "segments"),
        Kpi(count(len(data.judges)), "judges"),
    ]


def canary_panel_note(data: ReportData) -> str:
    """The sentence on the relevancy charts' canary panel; empty when no canary ran."""
    if not data.canaries:
        return ""
    return (
        " The bottom panel is the judge's mean shift on the canary's labelled set (see Judge canaries): live scores "
        "falling while it holds is the product; falling with it is the judge."
    )


def alert_status_note(data: ReportData) -> str:
    """Why the charts carry no alert marks (no table, an empty one, nothing fired); empty when they do."""
    if data.alert_status == "missing":
        return " There is no alert state table in this database, so the charts carry no alert marks."
    if data.alert_status == "empty":
        return " The alert state table is empty (no evaluator has run), so the charts carry no alert marks."
    if not data.firings:
        return " No alert fired in this range."
    return ""


def canary_rows(canaries: Iterable[CanaryPoint]) -> list[CanaryRow]:
    """The canary runs grouped per judge and labelled set, in the order they first ran."""
    groups: dict[tuple[str, str], list[CanaryPoint]] = {}
    for c in canaries:
        groups.setdefault((c.judge_id, c.labels), []).append(c)
    return [CanaryRow(judge_id, labels, tuple(runs)) for (judge_id, labels), runs in groups.items()]


def coverage_rows(data: ReportData) -> list[CoverageRow]:
    """The traffic counts summed per app and prompt version, the most consumed first."""
    per: dict[tuple[str, str], list[int]] = {}
    for b in data.traffic:
        acc = per.setdefault((b.app, b.prompt_version), [0, 0, 0])
        acc[0] += b.consumed
        acc[1] += b.sampled
        acc[2] += b.judged
    ordered = sorted(per.items(), key=lambda kv: -kv[1][0])
    return [CoverageRow(app, pv, c, s, j) for (app, pv), (c, s, j) in ordered]


def unpriced_rows(data: ReportData) -> int:
    """Uncached rows of model judges without a cost (no known price), which the cost totals leave out."""
    # A judge without a model (lexical) makes no API call; only a model's uncached rows should carry a cost.
    return sum(c.rows - c.priced - c.cached for c in data.costs if c.judge_model)


def example_row(e: Example, store: str) -> ExampleRow:
    """An example with its statements paired with their verdicts and reasons, and the line that finds it."""
    statements = tuple(
        Statement(
            s,
            e.verdicts[i] if i < len(e.verdicts) else "",
            e.verdict_reasons[i] if i < len(e.verdict_reasons) else "",
        )
        for i, s in enumerate(e.statements)
    )
    return ExampleRow(e, statements, find_command(e, store))


def example_source(data: ReportData) -> str:
    """Where the worst examples come from: the segments that fired, else the lowest-scoring ones."""
    fired = fired_on_apps(data.firings)  # as `focus.example_sources` chooses them
    if fired:
        names = ", ".join(dict.fromkeys(f"{segment_name(f)} ({f.rule})" for f in fired))
        return f"from the segments that fired: {names}"
    return "from the lowest-scoring segments (nothing fired in this range)"
