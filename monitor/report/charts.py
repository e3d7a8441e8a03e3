"""Chart specs (pure): which lines, bars and alert marks each chart of the report holds, on which time grid.
`monitor.report.svg` draws them; nothing here knows how."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal

from monitor.report.buckets import bucket_start
from monitor.report.model import CanaryPoint, CostDay, Firing, HealthBucket, Segment, SegmentBucket, TrafficBucket
from monitor.report.totals import SegmentTotals

MAX_LINES = 8  # per chart: beyond that a legend stops being readable; the tables list every segment
MAX_APP_CHARTS = 20  # relevancy charts, busiest apps first: a page of hundreds of charts is read by nobody


@dataclass(frozen=True, slots=True)
class Line:
    """One series on the time grid (None: no rows in that bucket, drawn as a gap). Lines of one `color_key`
    share a colour across the chart's panels; `dashed` tells a second measure of the same thing apart."""

    label: str
    values: tuple[float | None, ...]
    color_key: str = ""
    dashed: bool = False
    joined: bool = False  # drawn across empty buckets: a series sampled less often than the grid (canary runs)


@dataclass(frozen=True, slots=True)
class Bars:
    """One layer of stacked bars on the grid."""

    label: str
    values: tuple[float, ...]
    color_key: str = ""


@dataclass(frozen=True, slots=True)
class Panel:
    """One plot area; charts stack their panels over one shared time axis."""

    ylabel: str
    lines: tuple[Line, ...] = ()
    bars: tuple[Bars, ...] = ()
    y_max: float | None = None  # a fixed top (1 for scores, 100 for percentages); None: fit the data
    y_min: float = 0.0  # below 0 for values that go either way (the canary's mean shift)
    percent: bool = False
    money: bool = False


@dataclass(frozen=True, slots=True)
class Span:
    """An alert firing: from `start` to `end`, clipped to the range (`open_end`: still firing at its end)."""

    label: str
    start: datetime
    end: datetime
    open_end: bool = False


@dataclass(frozen=True, slots=True)
class Chart:
    """A chart: panels over the bucket starts `x` (each `width_s` wide) within `x_range`, with alert spans."""

    key: str  # unique in the page
    title: str
    x: tuple[datetime, ...]
    width_s: int
    x_range: tuple[datetime, datetime]
    panels: tuple[Panel, ...]
    spans: tuple[Span, ...] = ()
    omitted: tuple[str, ...] = field(default=())  # series left out of the legend to keep it readable
    day_ticks: bool = False  # label the axis with dates (a chart per day) rather than times

    @property
    def empty(self) -> bool:
        """No panel has anything to draw."""
        return not any(line.values for p in self.panels for line in p.lines) and not any(
            b.values for p in self.panels for b in p.bars
        )


def _on_grid(grid: Sequence[datetime], points: dict[datetime, float]) -> tuple[float | None, ...]:
    return tuple(points.get(t) for t in grid)


# The keys of an alert segment that a report segment has too; a rule keyed on anything else (model) is matched on these.
_SEGMENT_KEYS = ("app", "prompt_version", "judge_id", "judge")


def firing_applies(firing: Firing, segments: Iterable[Segment]) -> bool:
    """Whether `firing` concerns one of `segments`: each key of its segment that a report segment has matches
    (a rule keyed on no app covers every app; one keyed on a judge only the segments of that judge)."""
    keyed = [(k, v) for k, v in firing.segment if k in _SEGMENT_KEYS]
    return any(all(getattr(s, k) == v for k, v in keyed) for s in segments)


def firing_label(firing: Firing, leave_out: Iterable[str] = ("app",)) -> str:
    """The rule's name and the rest of its segment, e.g. `relevancy_drop · v2 · statements-3f…`."""
    skip = set(leave_out)
    return " · ".join([firing.rule, *(v for k, v in firing.segment if k not in skip)])


def firing_span(firing: Firing, since: datetime, until: datetime) -> Span:
    """The part of `firing` inside [since, until)."""
    end = firing.resolved_at if firing.resolved_at is not None else until
    return Span(
        firing_label(firing),
        max(firing.fired_at, since),
        min(end, until),
        open_end=firing.resolved_at is None or end > until,
    )


def relevancy_chart(
    app: str,
    totals: Sequence[SegmentTotals],
    buckets: Iterable[SegmentBucket],
    grid: Sequence[datetime],
    width_s: int,
    x_range: tuple[datetime, datetime],
    firings: Iterable[Firing],
    weighted: bool,
    canaries: Sequence[CanaryPoint] = (),
) -> Chart:
    """Mean score and low-score share over time, one line per prompt version and judge of `app` (the busiest
    `MAX_LINES`), with the alert firings that concern the app; below them, when the app's judges have canary runs,
    each judge's mean shift on the canary's labelled set, on the same time axis: live scores falling while that
    line holds is the product, both falling together is the judge."""
    own = [t for t in totals if t.segment.app == app]
    shown = [t.segment for t in own[:MAX_LINES]]
    mean: dict[Segment, dict[datetime, float]] = {s: {} for s in shown}
    low: dict[Segment, dict[datetime, float]] = {s: {} for s in shown}
    for b in buckets:
        if b.segment in mean and b.w_ok > 0:
            mean[b.segment][b.t] = b.w_score / b.w_ok
            low[b.segment][b.t] = 100 * b.w_low / b.w_ok
    how = "weighted" if weighted else "unweighted"  # the page's header says by what
    spans = tuple(firing_span(f, *x_range) for f in firings if firing_applies(f, (t.segment for t in own)))
    panels = [
        Panel(f"mean score ({how})", tuple(Line(s.label, _on_grid(grid, mean[s]), s.label) for s in shown), y_max=1.0),
        Panel(
            "score < 0.5, % of ok rows",
            tuple(Line(s.label, _on_grid(grid, low[s]), s.label) for s in shown),
            y_max=100.0,
            percent=True,
        ),
    ]
    judges = list(dict.fromkeys(s.judge_id for s in shown))
    shifts = canary_lines(canaries, judges, grid, width_s, "mean_shift")
    if shifts:
        panels.append(_shift_panel("canary: judge's mean shift (score − label)", shifts))
    return Chart(
        key=f"relevancy-{app}",
        title=f"app {app or '(none)'}",
        x=tuple(grid),
        width_s=width_s,
        x_range=x_range,
        panels=tuple(panels),
        spans=spans,
        omitted=tuple(t.segment.label for t in own[MAX_LINES:]),
    )


CanaryFigure = Literal["spearman", "kappa", "mean_shift"]


def canary_lines(
    canaries: Iterable[CanaryPoint],
    judges: Sequence[str],
    grid: Sequence[datetime],
    width_s: int,
    figure: CanaryFigure,
    what: str = "canary",
    *,
    dashed: bool = False,
) -> tuple[Line, ...]:
    """One line per judge of `judges` that has canary runs: `figure` of its runs, averaged per bucket (a run's
    bucket is the one its start falls in), labelled `<judge_id> · <what>` and coloured per judge."""
    sums: dict[str, dict[datetime, list[float]]] = {}
    wanted = set(judges)
    for c in canaries:
        value = getattr(c, figure)
        if c.judge_id not in wanted or value is None:
            continue
        acc = sums.setdefault(c.judge_id, {}).setdefault(bucket_start(c.t, width_s), [0.0, 0.0])
        acc[0] += value
        acc[1] += 1
    return tuple(
        Line(
            f"{judge} · {what}",
            _on_grid(grid, {t: total / n for t, (total, n) in sums[judge].items()}),
            judge,
            dashed,
            joined=True,
        )
        for judge in judges
        if judge in sums
    )


def _lowest(lines: Iterable[Line]) -> float:
    return min([0.0, *(v for line in lines for v in line.values if v is not None)])


def _shift_panel(ylabel: str, lines: tuple[Line, ...]) -> Panel:
    # Symmetric around 0, at least ±0.25 (a rubric point), so a steady judge reads as a flat line near the middle.
    top = max([0.25, *(abs(v) * 1.15 for line in lines for v in line.values if v is not None)])
    return Panel(ylabel, lines, y_max=top, y_min=-top)


def canary_chart(
    canaries: Sequence[CanaryPoint], grid: Sequence[datetime], width_s: int, x_range: tuple[datetime, datetime]
) -> Chart:
    """Per judge: Spearman ρ (solid) and κ (dashed) of its canary runs against the labels, their mean shift, and
    the share of pairs it could not score."""
    judges = list(dict.fromkeys(c.judge_id for c in canaries))
    shown = judges[:MAX_LINES]
    agreement = canary_lines(canaries, shown, grid, width_s, "spearman", "ρ") + canary_lines(
        canaries, shown, grid, width_s, "kappa", "κ", dashed=True
    )
    errors: dict[str, dict[datetime, list[int]]] = {}
    for c in canaries:
        acc = errors.setdefault(c.judge_id, {}).setdefault(bucket_start(c.t, width_s), [0, 0])
        acc[0] += c.errors
        acc[1] += c.pairs
    failed = tuple(
        Line(j, _on_grid(grid, {t: 100 * e / n for t, (e, n) in errors[j].items() if n}), j)
        for j in shown
        if j in errors
    )
    return Chart(
        "canary",
        "judge canaries",
        tuple(grid),
        width_s,
        x_range,
        (
            Panel(
                "agreement with the labels (ρ, κ)", agreement, y_max=1.0, y_min=-1.0 if _lowest(agreement) < 0 else 0.0
            ),
            _shift_panel(
                "mean shift (score − label)", canary_lines(canaries, shown, grid, width_s, "mean_shift", "mean shift")
            ),
            Panel("pairs not scored, %", failed, y_max=100.0, percent=True),
        ),
        omitted=tuple(judges[MAX_LINES:]),
    )


def coverage_chart(
    traffic: Iterable[TrafficBucket],
    grid: Sequence[datetime],
    width_s: int,
    x_range: tuple[datetime, datetime],
    has_traffic: bool,
) -> Chart:
    """Events consumed, chosen for judging and judged per bucket (all apps), and per app the share judged."""
    consumed: dict[datetime, float] = {}
    sampled: dict[datetime, float] = {}
    judged: dict[datetime, float] = {}
    per_app: dict[str, tuple[dict[datetime, float], dict[datetime, float]]] = {}
    for b in traffic:
        for acc, v in ((consumed, b.consumed), (sampled, b.sampled), (judged, b.judged)):
            acc[b.t] = acc.get(b.t, 0) + v
        c, j = per_app.setdefault(b.app, ({}, {}))
        c[b.t] = c.get(b.t, 0) + b.consumed
        j[b.t] = j.get(b.t, 0) + b.judged
    volume = [Line("judged", _on_grid(grid, judged), "judged")]
    panels: list[Panel] = []
    if has_traffic:
        volume = [
            Line("consumed", _on_grid(grid, consumed), "consumed"),
            Line("sampled", _on_grid(grid, sampled), "sampled"),
            *volume,
        ]
    panels.append(Panel("events per bucket", tuple(volume)))
    if has_traffic:
        apps = sorted((a for a in per_app if a), key=lambda a: -sum(per_app[a][0].values()))
        lines = []
        for a in apps[:MAX_LINES]:
            c, j = per_app[a]
            share = {t: 100 * j.get(t, 0) / n for t, n in c.items() if n > 0}
            lines.append(Line(a, _on_grid(grid, share), a))
        panels.append(Panel("judged, % of consumed", tuple(lines), percent=True))
        omitted = tuple(apps[MAX_LINES:])
    else:
        omitted = ()
    return Chart("coverage", "volume and coverage", tuple(grid), width_s, x_range, tuple(panels), omitted=omitted)


def health_chart(
    health: Iterable[HealthBucket], grid: Sequence[datetime], width_s: int, x_range: tuple[datetime, datetime]
) -> Chart:
    """Per judge: error rows and rate-limited (429) rows as a share of its rows, and the scoring lag (p50, p90)."""
    per_judge: dict[str, dict[str, dict[datetime, float]]] = {}
    for h in health:
        m = per_judge.setdefault(h.judge_id, {"errors": {}, "limited": {}, "p50": {}, "p90": {}})
        if h.rows:
            m["errors"][h.t] = 100 * h.errors / h.rows
            m["limited"][h.t] = 100 * h.rate_limited / h.rows
        if h.lag_p50_s is not None:
            m["p50"][h.t] = h.lag_p50_s
        if h.lag_p90_s is not None:
            m["p90"][h.t] = h.lag_p90_s
    judges = sorted(per_judge)[:MAX_LINES]
    errors, lag = [], []
    for j in judges:
        m = per_judge[j]
        errors += [
            Line(f"{j} · all errors", _on_grid(grid, m["errors"]), j),
            Line(f"{j} · rate limited (429)", _on_grid(grid, m["limited"]), j, True),
        ]
        lag += [Line(f"{j} · p90", _on_grid(grid, m["p90"]), j), Line(f"{j} · p50", _on_grid(grid, m["p50"]), j, True)]
    return Chart(
        "judge-health",
        "judge health",
        tuple(grid),
        width_s,
        x_range,
        (
            Panel("error rows, % of rows", tuple(errors), percent=True),
            Panel("scoring lag (scored_at − event_time), s", tuple(lag)),
        ),
        omitted=tuple(sorted(per_judge)[MAX_LINES:]),
    )


def cost_chart(costs: Iterable[CostDay], since: datetime, until: datetime) -> Chart:
    """Judge spend per UTC day, stacked per judge."""
    items = list(costs)
    first, last = since.astimezone(UTC).date(), (until - timedelta(microseconds=1)).astimezone(UTC).date()
    days = [first + timedelta(days=i) for i in range((last - first).days + 1)]
    x = tuple(_midnight(d) for d in days)
    per_judge: dict[str, dict[datetime, float]] = {}
    for c in items:
        acc = per_judge.setdefault(c.judge_id, {})
        acc[_midnight(c.day)] = acc.get(_midnight(c.day), 0.0) + c.cost_usd
    # A judge that cost nothing (lexical, or cached throughout) has no bar; the table lists it.
    bars = tuple(
        Bars(j, tuple(per_judge[j].get(t, 0.0) for t in x), j) for j in sorted(per_judge) if any(per_judge[j].values())
    )
    panel = Panel("USD per day", bars=bars, money=True)
    return Chart("cost", "judge cost per day", x, 86400, (x[0], x[-1] + timedelta(days=1)), (panel,), day_ticks=True)


def _midnight(d: date) -> datetime:
    return datetime.combine(d, time(0), tzinfo=UTC)
