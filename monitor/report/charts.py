"""Chart specs (pure): which lines, bars and alert marks each chart of the report holds, on which time grid.
`monitor.report.svg` draws them; nothing here knows how."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal

from monitor.alerts.windows import WeightedSums
from monitor.report.bands import Estimate, mean_estimate, share_estimate
from monitor.report.buckets import bucket_start
from monitor.report.model import (
    CanaryPoint,
    CostDay,
    Firing,
    FirstSeen,
    HealthBucket,
    ReportData,
    Segment,
    SegmentBucket,
    TrafficBucket,
)
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
    bands: tuple[tuple[float, float] | None, ...] = ()  # per bucket, the 95 % band around the value (or none)
    thin: tuple[bool, ...] = ()  # per bucket, too few events to read: drawn hollow and not joined
    muted: bool = False  # a stable series drawn in grey behind the ones that fired


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


SpanState = Literal["pending", "firing", "resolved"]


@dataclass(frozen=True, slots=True)
class Span:
    """A stretch of one alert episode, clipped to the range: pending, firing, or firing until it resolved at `end`
    (`open_end`: still in that state at the range's end)."""

    label: str
    start: datetime
    end: datetime
    open_end: bool = False
    state: SpanState = "firing"


@dataclass(frozen=True, slots=True)
class Mark:
    """A labelled vertical line: where a prompt version or model first appears."""

    label: str
    t: datetime


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
    marks: tuple[Mark, ...] = ()
    clipped: int = 0  # points above the panel's fixed top drawn at it (a share over 100 %): the page says so

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


def episode_spans(firing: Firing, since: datetime, until: datetime) -> tuple[Span, ...]:
    """The parts of one episode inside [since, until): pending until it fired (or until now), then firing until it
    resolved (state `resolved`) or until the range's end."""
    label = firing_label(firing)
    out = []
    if firing.pending_since is not None and (firing.fired_at is None or firing.pending_since < firing.fired_at):
        end = firing.fired_at or until
        out.append(_span(label, firing.pending_since, end, since, until, "pending", firing.fired_at is None))
    if firing.fired_at is not None:
        end = firing.resolved_at or until
        state: SpanState = "resolved" if firing.resolved_at is not None else "firing"
        out.append(_span(label, firing.fired_at, end, since, until, state, firing.resolved_at is None))
    return tuple(s for s in out if s.start <= s.end and s.start < until)


def _span(
    label: str, start: datetime, end: datetime, since: datetime, until: datetime, state: SpanState, still: bool
) -> Span:
    return Span(label, max(start, since), min(end, until), open_end=still or end > until, state=state)


def fired_segments(segments: Iterable[Segment], firings: Iterable[Firing]) -> frozenset[Segment]:
    """The segments that at least one episode that reached firing concerns (drawn in colour, first)."""
    fired = [f for f in firings if f.fired]
    return frozenset(s for s in segments if any(firing_applies(f, (s,)) for f in fired))


def fired_apps(totals: Iterable[SegmentTotals], firings: Iterable[Firing]) -> list[str]:
    """The apps with a segment that a fired episode concerns, to chart first."""
    return list(dict.fromkeys(s.app for s in fired_segments((t.segment for t in totals), firings)))


def first_seen_marks(first_seen: Iterable[FirstSeen], app: str) -> tuple[Mark, ...]:
    """The rollouts of `app` as marks, labelled with the version (or model) and its time."""
    return tuple(
        Mark(f"{f.value if f.kind == 'prompt_version' else 'model ' + f.value} first seen {f.t:%H:%M:%S}", f.t)
        for f in first_seen
        if f.app == app
    )


@dataclass(frozen=True, slots=True)
class Grid:
    """The time axis of one chart: bucket starts `x`, each `width_s` wide, within `x_range`."""

    x: tuple[datetime, ...]
    width_s: int
    x_range: tuple[datetime, datetime]


def _estimates(
    buckets: Iterable[SegmentBucket], shown: Sequence[Segment], estimate: Callable[[WeightedSums], Estimate | None]
) -> dict[Segment, dict[datetime, Estimate]]:
    out: dict[Segment, dict[datetime, Estimate]] = {s: {} for s in shown}
    for b in buckets:
        if b.segment in out:
            e = estimate(b.sums())
            if e is not None:
                out[b.segment][b.t] = e
    return out


def _banded(label: str, grid: Sequence[datetime], points: dict[datetime, Estimate], muted: bool) -> Line:
    """A line of estimates with their bands; thin buckets are marked, so they are drawn as the guesses they are."""
    at = [points.get(t) for t in grid]
    return Line(
        label,
        tuple(None if e is None else e.value for e in at),
        label,
        bands=tuple(None if e is None else (e.low, e.high) for e in at),
        thin=tuple(e is not None and e.thin for e in at),
        muted=muted,
    )


def relevancy_chart(
    app: str,
    totals: Sequence[SegmentTotals],
    buckets: Iterable[SegmentBucket],
    grid: Grid,
    firings: Iterable[Firing],
    weighted: bool,
    canaries: Sequence[CanaryPoint] = (),
    first_seen: Iterable[FirstSeen] = (),
    *,
    key: str = "",
    title: str = "",
    low_share: bool = True,
) -> Chart:
    """Mean score (with its 95 % band) and low-score share over time, one line per prompt version and judge of
    `app` (the segments that fired first and in colour, the stable ones in grey behind them, `MAX_LINES` in all),
    with the app's alert episodes and rollouts; below them, when the app's judges have canary runs, each judge's
    mean shift on the canary's labelled set: live scores falling while that line holds is the product, both falling
    together is the judge."""
    firings = list(firings)
    own = [t.segment for t in totals if t.segment.app == app]
    lines = _AppLines.of(own, fired_segments(own, firings))
    panels = _score_panels(list(buckets), lines, grid, weighted, low_share)
    shifts = canary_lines(canaries, lines.judges, grid.x, grid.width_s, "mean_shift")
    if shifts and low_share:
        panels.append(_shift_panel("canary: judge's mean shift (score − label)", shifts))
    return Chart(
        key=key or f"relevancy-{app}",
        title=title or f"app {app or '(none)'}",
        x=grid.x,
        width_s=grid.width_s,
        x_range=grid.x_range,
        panels=tuple(panels),
        spans=tuple(span for f in firings if firing_applies(f, own) for span in episode_spans(f, *grid.x_range)),
        omitted=tuple(s.label for s in lines.omitted),
        marks=first_seen_marks(first_seen, app),
    )


@dataclass(frozen=True, slots=True)
class _AppLines:
    """The segments of one app a relevancy chart draws (those that fired first, `MAX_LINES` in all), the ones it
    leaves out, and which are drawn in grey."""

    shown: tuple[Segment, ...]
    omitted: tuple[Segment, ...]
    fired: frozenset[Segment]

    @classmethod
    def of(cls, own: Sequence[Segment], fired: frozenset[Segment]) -> _AppLines:
        """`own` (busiest first) with the fired ones moved ahead, cut at `MAX_LINES`."""
        ordered = sorted(own, key=lambda s: s not in fired)  # stable sort: the busiest first within each
        return cls(tuple(ordered[:MAX_LINES]), tuple(ordered[MAX_LINES:]), fired)

    @property
    def judges(self) -> list[str]:
        """The judge ids of the lines drawn, in their order."""
        return list(dict.fromkeys(s.judge_id for s in self.shown))

    def muted(self, segment: Segment) -> bool:
        """A stable segment behind the ones that fired; with nothing fired, every line keeps its colour."""
        return bool(self.fired) and segment not in self.fired


def _score_panels(
    items: Sequence[SegmentBucket], lines: _AppLines, grid: Grid, weighted: bool, low_share: bool
) -> list[Panel]:
    """The mean score panel, and the low-score share panel under it when `low_share`."""
    how = "weighted" if weighted else "unweighted"  # the page's header says by what
    mean = _estimates(items, lines.shown, mean_estimate)
    panels = [
        Panel(
            f"mean score ({how}), 95 % band",
            tuple(_banded(s.label, grid.x, mean[s], lines.muted(s)) for s in lines.shown),
            y_max=1.0,
        )
    ]
    if low_share:
        low = _estimates(items, lines.shown, share_estimate)
        panels.append(
            Panel(
                "score < 0.5, % of ok rows",
                tuple(_banded(s.label, grid.x, low[s], lines.muted(s)) for s in lines.shown),
                y_max=100.0,
                percent=True,
            )
        )
    return panels


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
    clipped = 0  # judged counts event ids, consumed counts per minute of event time: a late minute can exceed it
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
            clipped += sum(1 for v in share.values() if v > 100.0)
            lines.append(Line(a, _on_grid(grid, {t: min(v, 100.0) for t, v in share.items()}), a))
        panels.append(Panel("judged, % of consumed", tuple(lines), percent=True))
        omitted = tuple(apps[MAX_LINES:])
    else:
        omitted = ()
    return Chart(
        "coverage",
        "volume and coverage",
        tuple(grid),
        width_s,
        x_range,
        tuple(panels),
        omitted=omitted,
        clipped=clipped,
    )


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


def attribution_chart(data: ReportData, grid: Grid) -> Chart | None:
    """Product or judge: the lead change's app as its judge scored it live, the shadow judge on the same answers,
    and the judge's canary mean shift, on one time axis; None without a change or without canary or shadow."""
    change, figures = data.change, data.figures
    if change is None or figures is None:
        return None
    lead = change.lead
    app = dict(lead.segment).get("app")
    if app is None:
        return None
    shadow = [p for p in data.shadow if p.app == app]
    shifts = canary_lines(data.canaries, [figures.judge_id], grid.x, grid.width_s, "mean_shift")
    if not shadow and not shifts:
        return None
    live: dict[datetime, list[float]] = {}
    for b in data.segments:
        if b.segment.app == app and b.segment.judge_id == figures.judge_id and b.w_ok > 0:
            acc = live.setdefault(b.t, [0.0, 0.0])
            acc[0] += b.w_score
            acc[1] += b.w_ok
    lines = [Line(f"live: {app} · {figures.judge_id}", _on_grid(grid.x, {t: s / w for t, (s, w) in live.items()}))]
    for judge in dict.fromkeys(p.shadow_judge_id for p in shadow):
        mine = [p for p in shadow if p.shadow_judge_id == judge]
        lines.append(Line(f"shadow: {judge} (same answers)", _on_grid(grid.x, {p.t: p.shadow_mean for p in mine})))
        lines.append(
            Line(
                f"primary on those answers ({judge})",
                _on_grid(grid.x, {p.t: p.primary_mean for p in mine}),
                dashed=True,
            )
        )
    panels = [Panel("mean score", tuple(lines), y_max=1.0)]
    if shifts:
        panels.append(_shift_panel("canary: judge's mean shift", shifts))
    spans = episode_spans(lead, *grid.x_range)
    return Chart(
        "attribution",
        "product or judge",
        grid.x,
        grid.width_s,
        grid.x_range,
        tuple(panels),
        spans=spans,
        marks=first_seen_marks(data.first_seen, app),
    )
