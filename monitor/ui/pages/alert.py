"""The alert page: one rule's episode on one segment, the zoom on the change with its rollout marker and the
pending/firing/resolved shading (the report's chart, drawn from the minute rollup), the notification's figures and
the worst answers of the segment."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from monitor.alerts.evaluator import AlertState
from monitor.alerts.links import answer_path
from monitor.alerts.state import StateStore
from monitor.report.buckets import bucket_grid, bucket_seconds
from monitor.report.charts import MAX_LINES, Grid, firing_applies, relevancy_chart
from monitor.report.focus import change_of, focus_window, segment_filter
from monitor.report.formats import segment
from monitor.report.model import Firing, FirstSeen
from monitor.report.svg import render_svg
from monitor.report.totals import SegmentTotals, segment_totals
from monitor.store.connection import ClickHouseStore
from monitor.ui.pages.common import firing_of, svg_image
from monitor.ui.queries import (
    ListedRow,
    RowFilter,
    first_minutes,
    latest_minute,
    worst_rows,
    zoom_buckets,
)

LOOKBACK = timedelta(days=30)  # a version first seen after the app's first minute in this lookback is a rollout
QUIET_SPAN = timedelta(hours=6)
CONTEXT_LINES = 2  # the chart and answers of a segment without an episode: its last hours


@dataclass(frozen=True, slots=True)
class WorstAnswer:
    """One of the segment's worst answers, linking to its page."""

    row: ListedRow
    href: str


@dataclass(frozen=True, slots=True)
class AlertPage:
    """The episode, its figures, the zoom chart (a `data:` image, or None with nothing to draw) and worst answers."""

    state: AlertState
    segment: str
    firing: Firing | None
    change_at: datetime | None
    rollout: str
    chart: str | None
    chart_range: tuple[datetime, datetime]
    worst: tuple[WorstAnswer, ...]


def first_seen_of(app: str, found: Sequence[tuple[str, str, datetime]], since: datetime) -> list[FirstSeen]:
    """Rollouts: versions and models of `app` whose first minute comes after the app's own first minute."""
    if not found:
        return []
    app_first = min(t for _, _, t in found)
    return [
        FirstSeen(t, app, "model" if kind == "model" else "prompt_version", value)
        for kind, value, t in found
        if t > app_first and t >= since
    ]


def chart_segments(totals: Sequence[SegmentTotals], firing: Firing | None) -> list[SegmentTotals]:
    """The series the zoom draws: the segments the episode concerns, and `CONTEXT_LINES` of the app's others (in
    grey) to compare with; fewer lines than the report's app charts, so the page draws in well under a second."""
    concerned = [t for t in totals if firing is not None and firing_applies(firing, (t.segment,))]
    others = [t for t in totals if t not in concerned]
    return concerned[: MAX_LINES - CONTEXT_LINES] + others[:CONTEXT_LINES]


def load_alert(store: ClickHouseStore, rule: str, segment_key: str) -> AlertPage | None:
    """The page of (rule, segment key), None when the alert state has no such row. Reads the alert state, the minute
    rollup and, for the worst answers, one bounded query of the scores."""
    state = StateStore(store).load().get((rule, segment_key))
    if state is None:
        return None
    latest = latest_minute(store)
    end = (latest + timedelta(minutes=1)) if latest is not None else (state.last_eval_at or datetime.now(UTC))
    if state.last_eval_at is not None:
        end = max(end, state.last_eval_at)
    firing = firing_of(state)
    app = dict(state.segment).get("app")
    start = (firing.started if firing is not None else end) - QUIET_SPAN
    first_seen = first_seen_of(app, first_minutes(store, app, start - LOOKBACK), start) if app else []
    change = change_of([firing], first_seen) if firing is not None and firing.fired else None
    at = change.at if change is not None else (firing.started if firing is not None else end - QUIET_SPAN)
    since, until = focus_window(at, min(at, start), end)
    chart = None
    if app is not None:
        width = max(60, bucket_seconds(since, until, narrowest=60))
        buckets = zoom_buckets(store, app, since, until, width)
        grid = Grid(bucket_grid(since, until, width), width, (since, until))
        shown, episodes = chart_segments(segment_totals(buckets), firing), [firing] if firing is not None else []
        drawn = relevancy_chart(
            app, shown, buckets, grid, episodes, False,
            first_seen=first_seen, key="zoom", title=f"app {app} around the change", low_share=False,
        )  # fmt: skip
        chart = None if drawn.empty else svg_image(render_svg(drawn))
    keys = segment_filter(firing) if firing is not None else tuple((k, v) for k, v in state.segment)
    worst = worst_rows(store, RowFilter(at, until, any_of=(keys,)))
    rollout = change.rollout.label if change is not None and change.rollout is not None else ""
    return AlertPage(
        state, segment(state.segment), firing, change.at if change is not None else None, rollout, chart,
        (since, until), tuple(WorstAnswer(r, answer_path(r.event_id, r.judge_id)) for r in worst),
    )  # fmt: skip
