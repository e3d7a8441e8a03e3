"""The overview page (pure): every app and under it its segments, current mean against baseline, the detector's
statistic against its threshold, the judged rate, firing alerts and a sparkline; thin segments say so."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from monitor.alerts.evaluator import AlertState
from monitor.report.bands import THIN_EVENTS
from monitor.ui.pages.common import AlertLink, Sparkline, alert_link, applies, sparkline, statistic_share
from monitor.ui.queries import SegmentHour, SegmentWindow

CURRENT = timedelta(hours=1)  # the current window: the last hour of judged rows
BASELINE = timedelta(days=7)  # the baseline: the week before it
SPARK_HOURS = 48
_SEGMENT_KEYS = ("app", "model", "prompt_version", "judge_id")


@dataclass(frozen=True, slots=True)
class SegmentRow:
    """One segment (model, prompt version, judge) of an app."""

    model: str
    prompt_version: str
    judge_id: str
    current: float | None
    n_current: int
    baseline: float | None
    n_baseline: int
    baseline_of_app: bool  # the segment has no history of its own (a new version): its app's, same judge
    statistic_share: float | None  # the detector's statistic over its threshold (1: it pages)
    judged_per_min: float
    thin: str  # why the figures are too thin to read, or ""
    alerts: tuple[AlertLink, ...]
    spark: Sparkline | None


@dataclass(frozen=True, slots=True)
class AppView:
    """One app: its segments and the alerts firing on any of them."""

    app: str
    segments: tuple[SegmentRow, ...]
    alerts: tuple[AlertLink, ...]


@dataclass(frozen=True, slots=True)
class Overview:
    """The whole page: as of which minute, the apps, and the firing alerts keyed on no app (a judge's own)."""

    as_of: datetime | None
    apps: tuple[AppView, ...]
    other_alerts: tuple[AlertLink, ...]
    firing: int


def _key(a: str, m: str, pv: str, j: str) -> tuple[str, str, str, str]:
    return (a, m, pv, j)


def build_overview(
    as_of: datetime | None,
    current: Sequence[SegmentWindow],
    hours: Sequence[SegmentHour],
    states: Mapping[tuple[str, str], AlertState],
) -> Overview:
    """The page from the last hour's rows per segment, the hourly rows before it, and the alert states."""
    if as_of is None:
        return Overview(None, (), (), 0)
    start = as_of - CURRENT
    base_sums: dict[tuple[str, str, str, str], tuple[int, float]] = {}
    spark_start = as_of - timedelta(hours=SPARK_HOURS)
    spark: dict[tuple[str, str, str, str], dict[datetime, float]] = {}
    for h in hours:
        k = _key(h.app, h.model, h.prompt_version, h.judge_id)
        if h.hour + timedelta(hours=1) <= start:
            n, s = base_sums.get(k, (0, 0.0))
            base_sums[k] = (n + h.ok_rows, s + h.score_sum)
        if h.hour >= spark_start and h.ok_rows:
            spark.setdefault(k, {})[h.hour] = h.score_sum / h.ok_rows
    grid = [spark_start.replace(minute=0, second=0, microsecond=0) + timedelta(hours=i) for i in range(SPARK_HOURS + 1)]
    segments = {_key(w.app, w.model, w.prompt_version, w.judge_id): w for w in current}
    for k in base_sums:
        segments.setdefault(k, SegmentWindow(*k, 0, 0, None))
    app_base: dict[tuple[str, str], tuple[int, float]] = {}
    for (a, _m, _pv, j), (n, total) in base_sums.items():
        had = app_base.get((a, j), (0, 0.0))
        app_base[(a, j)] = (had[0] + n, had[1] + total)
    fired = [s for s in states.values() if s.state == "firing"]
    detectors = [s for s in states.values() if statistic_share(s.note) is not None]
    apps: dict[str, list[SegmentRow]] = {}
    for k in sorted(segments):
        w = segments[k]
        row = dict(zip(_SEGMENT_KEYS, k, strict=True))
        n_base, s_base = base_sums.get(k, (0, 0.0))
        of_app = n_base < THIN_EVENTS and app_base.get((w.app, w.judge_id), (0, 0.0))[0] >= THIN_EVENTS
        if of_app:
            n_base, s_base = app_base[(w.app, w.judge_id)]
        shares = [statistic_share(s.note) for s in detectors if "app" in dict(s.segment) and applies(s.segment, row)]
        apps.setdefault(w.app, []).append(
            SegmentRow(
                model=w.model,
                prompt_version=w.prompt_version,
                judge_id=w.judge_id,
                current=w.mean,
                n_current=w.ok_rows,
                baseline=s_base / n_base if n_base else None,
                n_baseline=n_base,
                baseline_of_app=of_app,
                statistic_share=max((x for x in shares if x is not None), default=None),
                judged_per_min=w.ok_rows / (CURRENT.total_seconds() / 60),
                thin=_thin(w.ok_rows, n_base),
                alerts=_links(s for s in fired if "app" in dict(s.segment) and applies(s.segment, row)),
                spark=sparkline(spark.get(k, {}).get(t) for t in grid),
            )
        )
    views = tuple(
        AppView(app, tuple(rows), _links(s for s in fired if dict(s.segment).get("app") == app))
        for app, rows in apps.items()
    )
    others = _links(s for s in fired if "app" not in dict(s.segment))
    return Overview(as_of, views, others, len(fired))


def _thin(n_current: int, n_baseline: int) -> str:
    if n_current < THIN_EVENTS:
        return f"thin: {n_current} judged in the last hour, too few to read the mean"
    if n_baseline < THIN_EVENTS:
        return f"thin: {n_baseline} judged in the week before, no baseline to compare with"
    return ""


def _links(states: Iterable[AlertState]) -> tuple[AlertLink, ...]:
    return tuple(alert_link(s) for s in sorted(states, key=lambda s: (s.severity != "page", s.rule, s.key[1])))
