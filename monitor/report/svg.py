"""Draw a chart spec as inline SVG with matplotlib (no pyplot: no global figure state, no display needed).

Text is drawn as paths (svg.fonttype=path), so the page shows the same glyphs everywhere and needs no font; the
XML prolog, metadata, comments and namespace declarations are dropped, since the SVG sits inside an HTML page
(whose parser knows the SVG and xlink namespaces) and must not name any outside resource."""

from __future__ import annotations

import io
import math
import re
import textwrap
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import matplotlib
from markupsafe import Markup
from matplotlib.axes import Axes
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter, DateFormatter, DayLocator
from matplotlib.figure import Figure
from matplotlib.ticker import Formatter
from matplotlib.typing import RcKeyType

from monitor.report.charts import Chart, Line, Mark, Panel, Span, SpanState

# The tab10 palette without its red, which marks alert firings.
_PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#393b79",
)
_FIRING = "#d62728"
_MUTED = "#9e9e9e"  # stable segments, behind the ones that fired
_MARK = "#333333"
_SPAN_COLOURS: dict[SpanState, tuple[str, float]] = {
    "pending": ("#ff9f1c", 0.14),
    "firing": (_FIRING, 0.14),
    "resolved": (_FIRING, 0.06),
}
_WIDTH_IN = 12.0
_PANEL_IN = 2.4
_LEGEND_LINE_IN = 0.155  # one line of legend text at 8 pt with matplotlib's spacing
_LABEL_CHARS = 44  # a legend entry wraps onto a new line past this, so the legend stays inside its column
_MOST_DECIMALS = 4
_RC: dict[RcKeyType, Any] = {
    "svg.fonttype": "path",
    "text.parse_math": False,  # an app named "$x$" is a name, not TeX
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "timezone": "UTC",
}
_DROP = re.compile(
    r"<\?xml[^>]*\?>|<!DOCTYPE[^>]*>|<metadata>.*?</metadata>|<!--.*?-->|\s+xmlns(?::\w+)?=\"[^\"]*\"", re.DOTALL
)


def render_svg(chart: Chart) -> Markup:
    """The chart as an `<svg>` element for inline use in HTML: markup the page's templates take as it is."""
    with matplotlib.rc_context({**_RC, "svg.hashsalt": chart.key}):
        heights = [max(_PANEL_IN, 0.3 + _LEGEND_LINE_IN * n) for n in _legend_lines(chart)]
        height = 0.7 + sum(heights)
        fig = Figure(figsize=(_WIDTH_IN, height))
        # Fixed margins rather than a layout engine: every chart's time axis lines up with the others on the page,
        # and the legends share the right-hand column.
        fig.subplots_adjust(left=0.08, right=0.68, top=1 - 0.2 / height, bottom=0.55 / height, hspace=0.12)
        axes = fig.subplots(len(chart.panels), 1, sharex=True, squeeze=False, gridspec_kw={"height_ratios": heights})[
            :, 0
        ]
        colours = _colours(chart)
        half = timedelta(seconds=chart.width_s / 2)
        for i, (ax, panel) in enumerate(zip(axes, chart.panels, strict=True)):
            _draw_spans(ax, chart.spans, labelled=i == 0)
            _draw_marks(ax, chart.marks, labelled=i == 0)
            _draw_panel(ax, panel, chart, colours, half)
            ax.set_xlim(chart.x_range[0], chart.x_range[1])
            if ax.get_legend_handles_labels()[0]:
                ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
        _time_axis(axes[-1], chart.day_ticks)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    # Trusted markup, the one the report has: every label, title and name is drawn as glyph paths (svg.fonttype),
    # matplotlib's SVG writer escapes what it writes as text (attributes, the comments naming each text, dropped
    # here), and the only element with text content is matplotlib's own style. tests/monitor/report/test_escaping.py
    # draws hostile names and finds no element, attribute or text of theirs.
    return Markup(_DROP.sub("", buf.getvalue()).strip())


def _legend_lines(chart: Chart) -> list[int]:
    """Per panel, the lines of text its legend takes (entries wrap), so each panel is tall enough for its legend."""
    out = []
    for i, panel in enumerate(chart.panels):
        labels = [line.label for line in panel.lines] + [b.label for b in panel.bars]
        if i == 0:
            labels += list(dict.fromkeys(_span_label(s) for s in chart.spans)) + [m.label for m in chart.marks]
        out.append(sum(_wrap(label).count("\n") + 1 for label in labels))
    return out


def _time_axis(ax: Axes, day_ticks: bool) -> None:
    if day_ticks:
        days = DayLocator(interval=1) if (ax.get_xlim()[1] - ax.get_xlim()[0]) <= 16 else AutoDateLocator()  # type: ignore[no-untyped-call]
        ax.xaxis.set_major_locator(days)
        ax.xaxis.set_major_formatter(DateFormatter("%Y-%m-%d"))  # type: ignore[no-untyped-call]
    else:
        locator = AutoDateLocator()  # type: ignore[no-untyped-call]
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    ax.set_xlabel("UTC")


def _colours(chart: Chart) -> dict[str, str]:
    keys: dict[str, str] = {}
    for p in chart.panels:
        for key in [line.color_key or line.label for line in p.lines] + [b.color_key or b.label for b in p.bars]:
            keys.setdefault(key, _PALETTE[len(keys) % len(_PALETTE)])
    return keys


def _draw_panel(ax: Axes, panel: Panel, chart: Chart, colours: dict[str, str], half: timedelta) -> None:
    centres = [t + half for t in chart.x]
    # Stable (muted) lines first and lower, so the ones that fired are drawn over them.
    for line in sorted(panel.lines, key=lambda line: not line.muted):
        colour = _MUTED if line.muted else colours[line.color_key or line.label]
        _draw_line(ax, line, centres, colour)
    bottom = [0.0] * len(chart.x)
    width = chart.width_s / 86400 * 0.8  # matplotlib's date unit is a day
    for bars in panel.bars:
        ax.bar(
            centres,  # type: ignore[arg-type]
            bars.values,
            width=width,
            bottom=bottom,
            label=_wrap(bars.label),
            color=colours[bars.color_key or bars.label],
        )
        bottom = [b + v for b, v in zip(bottom, bars.values, strict=True)]
    ax.set_ylabel(panel.ylabel)
    top = panel.y_max
    if top is None:
        highest = max([v for line in panel.lines for v in line.values if v is not None] + bottom + [0.0])
        top = highest * 1.1 if highest > 0 else 1.0
    ax.set_ylim(panel.y_min, top)
    if panel.y_min < 0:
        ax.axhline(0.0, color="#555555", linewidth=0.8)  # no shift: where a steady judge's line sits
    if panel.percent:
        ax.yaxis.set_major_formatter(DistinctTicks(suffix="%"))
    elif panel.money:
        ax.yaxis.set_major_formatter(DistinctTicks(prefix="$", least=2 if top >= 1 else 4))
    else:
        ax.yaxis.set_major_formatter(DistinctTicks())


def _draw_line(ax: Axes, line: Line, centres: list[datetime], colour: str) -> None:
    z = 1.5 if line.muted else 2.5
    thin = line.thin or (False,) * len(line.values)
    if line.bands:
        # A band joins the buckets that can be read; a thin bucket's (the widest) is a whisker of its own.
        lows = [math.nan if b is None or t else b[0] for b, t in zip(line.bands, thin, strict=True)]
        highs = [math.nan if b is None or t else b[1] for b, t in zip(line.bands, thin, strict=True)]
        alpha = 0.12 if line.muted else 0.18
        ax.fill_between(centres, lows, highs, color=colour, alpha=alpha, linewidth=0, zorder=z - 1)  # type: ignore[arg-type]
        for x, b, t in zip(centres, line.bands, thin, strict=True):
            if t and b is not None:
                ax.vlines(x, b[0], b[1], color=colour, alpha=0.25, linewidth=1.0, zorder=z - 1)  # type: ignore[arg-type]
    xs: list[datetime] = centres
    # A thin bucket is not joined to its neighbours: the line runs only through the buckets that can be read.
    ys = [math.nan if v is None or t else v for v, t in zip(line.values, thin, strict=True)]
    if line.joined:  # without its empty buckets, the points are joined up
        xs, ys = (
            [x for x, v in zip(centres, line.values, strict=True) if v is not None],
            [v for v in line.values if v is not None],
        )
    # Markers show a lone bucket between gaps, which a line alone would not draw.
    ax.plot(
        xs,  # type: ignore[arg-type]
        ys,
        label=_wrap(line.label),
        color=colour,
        linestyle="--" if line.dashed else "-",
        linewidth=1.2 if line.muted else 1.8,
        marker="o",
        markersize=2.5,
        zorder=z,
    )
    hollow = [(x, v) for x, v, t in zip(centres, line.values, thin, strict=True) if t and v is not None]
    if hollow:
        ax.plot(
            [x for x, _ in hollow],  # type: ignore[arg-type]
            [v for _, v in hollow],
            linestyle="none",
            marker="o",
            markersize=4,
            markerfacecolor="white",
            markeredgecolor=colour,
            alpha=0.7,
            zorder=z,
        )


class DistinctTicks(Formatter):
    """Tick labels with the fewest decimals (at least `least`) that tell every tick apart: 0.5 %, 1.0 %, 1.5 %
    rather than 0 %, 1 %, 1 %."""

    def __init__(self, prefix: str = "", suffix: str = "", least: int = 0) -> None:
        self.prefix, self.suffix, self.least = prefix, suffix, least
        self.decimals = least

    def format_ticks(self, values: Sequence[float]) -> list[str]:
        """All of an axis's labels at once, so the decimals fit the whole set."""
        self.decimals = tick_decimals(values, self.least)
        return [self(v) for v in values]

    def __call__(self, x: float, pos: int | None = None) -> str:
        """One label, with the decimals the last whole set needed."""
        return f"{self.prefix}{x:,.{self.decimals}f}{self.suffix}"


def tick_decimals(values: Sequence[float], least: int = 0) -> int:
    """The fewest decimals from `least` up to 4 that print every tick as it is (0.25, not 0.2), which tells the
    ticks apart: the locator puts them at round steps."""
    for d in range(least, _MOST_DECIMALS + 1):
        if all(abs(round(v, d) - v) <= 1e-9 * max(1.0, abs(v)) for v in values):
            return d
    return _MOST_DECIMALS


def _span_label(s: Span) -> str:
    return f"{s.state}: {s.label}"


def _draw_spans(ax: Axes, spans: tuple[Span, ...], *, labelled: bool) -> None:
    seen: set[str] = set()
    for s in spans:
        text = _span_label(s)
        label = _wrap(text) if labelled and text not in seen else None
        seen.add(text)
        colour, alpha = _SPAN_COLOURS[s.state]
        ax.axvspan(s.start, _at_least_visible(s.start, s.end), color=colour, alpha=alpha, label=label, zorder=0.5)  # type: ignore[arg-type]
        if s.state != "pending":
            ax.axvline(s.start, color=_FIRING, linewidth=1.2, linestyle=":", zorder=0.6)  # type: ignore[arg-type]
        if s.state == "resolved":
            ax.axvline(s.end, color="#2e7d32", linewidth=1.2, linestyle=":", zorder=0.6)  # type: ignore[arg-type]


def _draw_marks(ax: Axes, marks: tuple[Mark, ...], *, labelled: bool) -> None:
    for m in marks:
        label = _wrap(m.label) if labelled else None
        ax.axvline(m.t, color=_MARK, linewidth=1.3, linestyle="--", zorder=3, label=label)  # type: ignore[arg-type]


def _at_least_visible(start: datetime, end: datetime) -> datetime:
    # A firing resolved within a minute would be a zero-width span; the dotted line at its start still shows it.
    return max(end, start + timedelta(minutes=1))


def _wrap(label: str) -> str:
    """A legend entry on as many lines as it needs, never cut: a long rule or segment name stays readable."""
    return "\n".join(textwrap.wrap(label, _LABEL_CHARS, break_on_hyphens=False)) or label
