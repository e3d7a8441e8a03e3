"""The report's pure pieces: bucket widths, the store shown without credentials, firings matched and clipped, and
SVG that is safe to inline."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from monitor.report.buckets import bucket_grid, bucket_seconds, describe_width
from monitor.report.charts import Chart, Line, Panel, episode_spans, firing_applies
from monitor.report.model import Firing, Segment
from monitor.report.svg import render_svg
from monitor.report.write import store_label
from tests.monitor.report.conftest import T0, outside_references


@pytest.mark.parametrize(
    ("span", "width", "label"),
    [
        (timedelta(hours=1), 60, "1 min"),
        (timedelta(hours=24), 900, "15 min"),
        (timedelta(days=7), 2 * 3600, "2 h"),
        (timedelta(days=30), 6 * 3600, "6 h"),
        (timedelta(days=365), 86400, "1 day"),
    ],
)
def test_bucket_width_keeps_about_a_hundred_points(span: timedelta, width: int, label: str) -> None:
    """The narrowest width from a minute to a day that cuts the range into at most 120 buckets (a day at most)."""
    assert bucket_seconds(T0, T0 + span) == width and describe_width(width) == label


def test_a_zoomed_chart_may_have_buckets_under_a_minute() -> None:
    """Asked for, the width goes down to 10 s (the zoom on a change of minutes); by default never under a minute."""
    assert bucket_seconds(T0, T0 + timedelta(minutes=20), narrowest=10) == 10
    assert bucket_seconds(T0, T0 + timedelta(minutes=31), narrowest=10) == 30
    assert bucket_seconds(T0, T0 + timedelta(minutes=20)) == 60


def test_bucket_grid_starts_at_the_bucket_holding_since() -> None:
    """The grid starts at the epoch-aligned bucket holding `since` (like toStartOfInterval) and stops before `until`."""
    grid = bucket_grid(T0 + timedelta(minutes=7), T0 + timedelta(minutes=31), 900)
    assert grid == (T0, T0 + timedelta(minutes=15), T0 + timedelta(minutes=30))


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://monitor:secret@ch.internal:8443/db?password=x", "https://ch.internal:8443/db"),
        ("http://user@ch:8123", "http://ch:8123"),
        ("https://u:p@[::1]:8443", "https://[::1]:8443"),
        ("chdb:///var/lib/relevancy", "chdb:///var/lib/relevancy"),
    ],
)
def test_the_store_is_shown_without_credentials(url: str, shown: str) -> None:
    """A server URL loses its user, password and query in the report's title; an embedded path stays as it is."""
    assert store_label(url) == shown


def _firing(segment: tuple[tuple[str, str], ...], hours: float, resolved: float | None) -> Firing:
    fired = T0 + timedelta(hours=hours)
    return Firing(
        "r",
        "page",
        segment,
        "firing" if resolved is None else "resolved",
        fired,
        None if resolved is None else T0 + timedelta(hours=resolved),
        None,
        None,
        "",
    )


def test_a_firing_concerns_the_segments_it_keys_on() -> None:
    """App, prompt version and judge keys must match a segment; a key the report has no series for (model) is
    ignored."""
    seg = Segment("support", "v2", "statements-1")
    assert firing_applies(_firing((), 1, None), [seg])
    assert firing_applies(_firing((("app", "support"), ("model", "m9")), 1, None), [seg])
    assert firing_applies(_firing((("judge_id", "statements-1"),), 1, None), [seg])
    assert not firing_applies(_firing((("judge_id", "lexical-1"),), 1, None), [seg])
    assert not firing_applies(_firing((("app", "support"), ("prompt_version", "v1")), 1, None), [seg])
    assert not firing_applies(_firing((), 1, None), [])


def test_a_firing_span_is_clipped_to_the_range() -> None:
    """A firing that began before the range starts at `since` and is `resolved` at its end; one still firing ends at
    `until`, marked open."""
    since, until = T0 + timedelta(hours=2), T0 + timedelta(hours=10)
    (early,) = episode_spans(_firing((("app", "a"), ("prompt_version", "v2")), 1, 3), since, until)
    assert (early.start, early.end, early.open_end, early.label, early.state) == (
        since,
        T0 + timedelta(hours=3),
        False,
        "r · v2",
        "resolved",
    )
    (ongoing,) = episode_spans(_firing((), 9, None), since, until)
    assert (ongoing.start, ongoing.end, ongoing.open_end, ongoing.state) == (
        T0 + timedelta(hours=9),
        until,
        True,
        "firing",
    )
    assert episode_spans(_firing((), 11, None), since, until) == ()  # after the range


def test_an_episode_is_shaded_pending_then_firing() -> None:
    """An episode pending before it fired is two spans, pending then firing; one still pending is open-ended."""
    since, until = T0, T0 + timedelta(hours=10)
    pending_then = replace(_firing((), 4, None), pending_since=T0 + timedelta(hours=3))
    assert [(s.state, s.start, s.end) for s in episode_spans(pending_then, since, until)] == [
        ("pending", T0 + timedelta(hours=3), T0 + timedelta(hours=4)),
        ("firing", T0 + timedelta(hours=4), until),
    ]
    waiting = replace(_firing((), 4, None), fired_at=None, state="pending", pending_since=T0 + timedelta(hours=8))
    (only,) = episode_spans(waiting, since, until)
    assert (only.state, only.start, only.end, only.open_end) == ("pending", T0 + timedelta(hours=8), until, True)


def test_chart_svg_is_inline_safe_and_takes_names_as_text() -> None:
    """The SVG has no prolog, metadata, comments or outside reference, and draws a `$x$ <b>` label as plain text."""
    grid = tuple(T0 + timedelta(hours=h) for h in range(4))
    chart = Chart(
        "k",
        "t",
        grid,
        3600,
        (T0, T0 + timedelta(hours=4)),
        (Panel("score", (Line("$x$ <b>v1</b>", (0.5, None, 0.7, 0.9)),), y_max=1.0),),
    )
    svg = render_svg(chart)
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert "<?xml" not in svg and "<metadata" not in svg and "<!--" not in svg and "<b>" not in svg
    assert outside_references(svg) == []
