"""The time buckets of the report's charts: a width from the range, and the grid of bucket starts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

# Widths that divide a UTC day evenly, so buckets align with days and hours (toStartOfInterval counts from the epoch).
_WIDTHS_S = (
    10,
    15,
    30,
    60,
    120,
    300,
    600,
    900,
    1800,
    3600,
    2 * 3600,
    3 * 3600,
    6 * 3600,
    12 * 3600,
    86400,
)
MINUTE = 60  # the traffic counts' grain: a chart of them never has narrower buckets
_MAX_BUCKETS = 120  # enough points to see a shape (about 100), few enough that each averages a useful number of rows


def bucket_seconds(since: datetime, until: datetime, narrowest: int = MINUTE) -> int:
    """The narrowest width from `narrowest` to 1 day that cuts [since, until) into at most 120 buckets (no width is
    more than 2.5 times the one before, so a range the widths cover gets 48 to 120)."""
    span = (until - since).total_seconds()
    return next((w for w in _WIDTHS_S if w >= narrowest and span / w <= _MAX_BUCKETS), _WIDTHS_S[-1])


def bucket_start(t: datetime, width_s: int) -> datetime:
    """The start of the bucket holding `t`, counted from the epoch in UTC like ClickHouse's toStartOfInterval."""
    epoch = int(t.timestamp())
    return datetime.fromtimestamp(epoch - epoch % width_s, tz=UTC)


def bucket_grid(since: datetime, until: datetime, width_s: int) -> tuple[datetime, ...]:
    """Every bucket start from the bucket holding `since` up to before `until`."""
    out = []
    t = bucket_start(since, width_s)
    step = timedelta(seconds=width_s)
    while t < until:
        out.append(t)
        t += step
    return tuple(out)


def describe_width(width_s: int) -> str:
    """`30 s`, `15 min`, `3 h`, `1 day`."""
    if width_s % 60:
        return f"{width_s} s"
    if width_s % 86400 == 0:
        days = width_s // 86400
        return f"{days} day" + ("s" if days > 1 else "")
    if width_s % 3600 == 0:
        return f"{width_s // 3600} h"
    return f"{width_s // 60} min"
