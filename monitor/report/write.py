"""`write_report`: query a store for a range, build the charts and the page, write one HTML file."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

from monitor.alerts.windows import utc
from monitor.report.buckets import bucket_grid, bucket_seconds
from monitor.report.charts import (
    MAX_APP_CHARTS,
    Chart,
    Grid,
    attribution_chart,
    canary_chart,
    cost_chart,
    coverage_chart,
    fired_apps,
    firing_applies,
    health_chart,
    relevancy_chart,
)
from monitor.report.judge_users import judge_user_chart
from monitor.report.model import Firing, ReportData, Segment, TableStatus
from monitor.report.page import ChartView, headline_of, render_page
from monitor.report.queries import DEFAULT_DAYS, DEFAULT_TRAFFIC_TABLE, WORST_EXAMPLES, data_span, fetch_report_data
from monitor.report.svg import render_svg
from monitor.report.totals import apps_in_order, segment_totals
from monitor.store.connection import ClickHouseStore
from schemas.errors import UsageError


@dataclass(frozen=True, slots=True)
class ReportSummary:
    """What a written report shows: where it is, its range, the segments charted, the rows read, the firings marked."""

    path: Path
    since: datetime
    until: datetime
    segments: tuple[Segment, ...]
    judged_rows: int
    firings_marked: int
    alert_state: TableStatus  # whether the alert state table was there and had rows
    weighted: bool  # means weighted by 1/sample_rate
    replayed_rows: int  # rows of `relevancy-monitor replay` in the range (left out unless included)
    headline: str = ""  # the page's first line: what changed, or that nothing fired


@dataclass(frozen=True, slots=True)
class RenderedReport:
    """The page and what it shows."""

    html: str
    segments: tuple[Segment, ...]
    marked: frozenset[Firing]


def store_label(url: str) -> str:
    """The store's URL as shown in the report: an embedded path as is, a server without user, password or query."""
    if url.startswith("chdb:"):
        return url
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host  # an IPv6 address keeps its brackets
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # not a number: shown as nothing rather than failing the report over its title
        port = ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def charts_of(data: ReportData) -> tuple[list[Chart], frozenset[Firing]]:
    """Every chart of the report, and the firings drawn on at least one of them (pure)."""
    totals = segment_totals(data.segments)
    grid = Grid(bucket_grid(data.since, data.until, data.bucket_s), data.bucket_s, (data.since, data.until))
    apps = apps_in_order(totals, fired_apps(totals, data.firings))[:MAX_APP_CHARTS]
    charts: list[Chart] = []
    if data.zoom is not None:
        z = data.zoom
        zoom_grid = Grid(bucket_grid(z.since, z.until, z.bucket_s), z.bucket_s, (z.since, z.until))
        charts.append(
            relevancy_chart(
                z.app,
                segment_totals(z.segments),
                z.segments,
                zoom_grid,
                data.firings,
                data.weighted,
                first_seen=data.first_seen,
                key="zoom",
                title=f"app {z.app} around the change",
                low_share=False,
            )
        )
    charts += [
        relevancy_chart(app, totals, data.segments, grid, data.firings, data.weighted, data.canaries, data.first_seen)
        for app in apps
    ]
    judge_chart = attribution_chart(data, grid)
    if judge_chart is not None:
        charts.append(judge_chart)
    if data.canaries:
        charts.append(canary_chart(data.canaries, grid.x, data.bucket_s, grid.x_range))
    users_chart = judge_user_chart(data.judge_users)
    if users_chart is not None:
        charts.append(users_chart)
    charts += [
        coverage_chart(data.traffic, grid.x, data.bucket_s, grid.x_range, data.traffic_status == "present"),
        health_chart(data.health, grid.x, data.bucket_s, grid.x_range),
        cost_chart(data.costs, data.since, data.until),
    ]
    segments = [t.segment for t in totals if t.segment.app in apps]
    marked = frozenset(f for f in data.firings if firing_applies(f, segments))
    return charts, marked


def render_report(data: ReportData) -> RenderedReport:
    """The HTML page of `data`, with its charts drawn as inline SVG."""
    totals = segment_totals(data.segments)
    if data.judged_rows == 0:
        return RenderedReport(render_page(data, totals, {}, frozenset()), (), frozenset())
    charts, marked = charts_of(data)
    views = {c.key: ChartView(render_svg(c), c.omitted, c.clipped) for c in charts if not c.empty}
    return RenderedReport(render_page(data, totals, views, marked), tuple(t.segment for t in totals), marked)


def default_since(store: ClickHouseStore, until: datetime, *, include_replays: bool = False) -> datetime:
    """The default range's start: the first scored row of the last 7 days before `until`, on a whole minute (an
    hour before `until` when there is none, so an empty store still gets a report that says so)."""
    first = data_span(store, utc(until), include_replays=include_replays, days=DEFAULT_DAYS)
    if first is None:
        return utc(until) - timedelta(hours=1)
    return first.replace(second=0, microsecond=0)


def write_report(
    store: ClickHouseStore,
    since: datetime | None,
    until: datetime,
    path: Path,
    *,
    traffic_table: str = DEFAULT_TRAFFIC_TABLE,
    worst: int = WORST_EXAMPLES,
    now: datetime | None = None,
    include_replays: bool = False,
) -> ReportSummary:
    """Write the report of [since, until) (naive times are UTC; `since` None: all the data up to 7 days) from a
    store to `path`, of the live consumer's rows unless `include_replays`; raises `UsageError` for an empty range
    or an unwritable path, `StoreError` for the store."""
    default_range = since is None
    until = utc(until)
    since = default_since(store, until, include_replays=include_replays) if since is None else utc(since)
    if since >= until:
        raise UsageError(
            f"the report's range is empty: since ({since.isoformat()}) must be before until ({until.isoformat()})"
        )
    data = fetch_report_data(
        store,
        since,
        until,
        bucket_seconds(since, until),
        traffic_table=traffic_table,
        worst=worst,
        store_label=store_label(store.url),
        now=now or datetime.now(UTC),
        include_replays=include_replays,
        default_range=default_range,
    )
    report = render_report(data)
    _write_atomically(path, report.html)
    return ReportSummary(
        path=path,
        since=since,
        until=until,
        segments=report.segments,
        judged_rows=data.judged_rows,
        firings_marked=len(report.marked),
        alert_state=data.alert_status,
        weighted=data.weighted,
        replayed_rows=data.replays.rows if data.replays is not None else 0,
        headline=headline_of(data),
    )


def _write_atomically(path: Path, text: str) -> None:
    # A reader (a browser refreshing the file) never sees half a page, and a failed write leaves the old one.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise UsageError(f"cannot write the report to {path}: {e.strerror or e}") from None
