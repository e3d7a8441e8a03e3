"""Totals over the whole range from the bucketed rows (pure): per segment, per app, and the weighted mean."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from monitor.report.model import Segment, SegmentBucket


def ratio(part: float, whole: float) -> float | None:
    """`part / whole`, None when there is no whole (no rows is no value, never 0)."""
    return part / whole if whole > 0 else None


@dataclass(frozen=True, slots=True)
class SegmentTotals:
    """One segment over the range: rows, ok and error rows, mean score and low-score share (both weighted)."""

    segment: Segment
    rows: int
    ok: int
    errors: int
    w_ok: float
    w_score: float
    w_low: float

    @property
    def mean(self) -> float | None:
        """Mean score of the ok rows, weighted like the buckets (by 1/sample_rate when the table has it)."""
        return ratio(self.w_score, self.w_ok)

    @property
    def low_share(self) -> float | None:
        """Share of the ok rows scoring below 0.5, weighted the same way."""
        return ratio(self.w_low, self.w_ok)


def segment_totals(buckets: Iterable[SegmentBucket]) -> list[SegmentTotals]:
    """One total per segment, the busiest app first and, within an app, the busiest segment first."""
    sums: dict[Segment, list[float]] = {}
    for b in buckets:
        acc = sums.setdefault(b.segment, [0, 0, 0, 0.0, 0.0, 0.0])
        for i, v in enumerate((b.rows, b.ok, b.errors, b.w_ok, b.w_score, b.w_low)):
            acc[i] += v
    totals = [SegmentTotals(s, int(a[0]), int(a[1]), int(a[2]), a[3], a[4], a[5]) for s, a in sums.items()]
    by_app: dict[str, int] = {}
    for t in totals:
        by_app[t.segment.app] = by_app.get(t.segment.app, 0) + t.rows
    return sorted(totals, key=lambda t: (-by_app[t.segment.app], t.segment.app, -t.rows, t.segment))


def apps_in_order(totals: Iterable[SegmentTotals], first: Iterable[str] = ()) -> list[str]:
    """The apps of `totals` in their order (busiest first, see `segment_totals`), the apps in `first` (those with a
    fired alert) ahead of the rest."""
    apps = list(dict.fromkeys(t.segment.app for t in totals))
    ahead = set(first)
    return [a for a in apps if a in ahead] + [a for a in apps if a not in ahead]


def overall_mean(totals: Iterable[SegmentTotals]) -> float | None:
    """The weighted mean score over every segment (rows of different judges pooled: a summary, not a series)."""
    items = list(totals)
    return ratio(sum(t.w_score for t in items), sum(t.w_ok for t in items))
