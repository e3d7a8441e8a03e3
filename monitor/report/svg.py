"""Draw a chart spec as inline SVG with matplotlib (no pyplot: no global figure state, no display needed).

Text is drawn as paths (svg.fonttype=path), so the page shows the same glyphs everywhere and needs no font; the
XML prolog, metadata, comments and namespace declarations are dropped, since the SVG sits inside an HTML page
(whose parser knows the SVG and xlink namespaces) and must not name any outside resource."""

from __future__ import annotations

import io
import math
import re
from datetime import datetime, timedelta
from typing import Any

import matplotlib
from matplotlib.axes import Axes
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter, DateFormatter, DayLocator
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, PercentFormatter
from matplotlib.typing import RcKeyType

from monitor.report.charts import Chart, Panel, Span

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
_WIDTH_IN = 12.0
_LABEL_CHARS = 54  # a legend entry longer than this is cut, so the legend stays inside its column
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


def render_svg(chart: Chart) -> str:
    """The chart as an `<svg>` element for inline use in HTML."""
    with matplotlib.rc_context({**_RC, "svg.hashsalt": chart.key}):
        height = 0.7 + 2.4 * len(chart.panels)
        fig = Figure(figsize=(_WIDTH_IN, height))
        # Fixed margins rather than a layout engine: every chart's time axis lines up with the others on the page,
        # and the legends share the right-hand column.
        fig.subplots_adjust(left=0.08, right=0.68, top=1 - 0.2 / height, bottom=0.55 / height, hspace=0.12)
        axes = fig.subplots(len(chart.panels), 1, sharex=True, squeeze=False)[:, 0]
        colours = _colours(chart)
        half = timedelta(seconds=chart.width_s / 2)
        for i, (ax, panel) in enumerate(zip(axes, chart.panels, strict=True)):
            _draw_panel(ax, panel, chart, colours, half)
            _draw_spans(ax, chart.spans, labelled=i == 0)
            ax.set_xlim(chart.x_range[0], chart.x_range[1])
            if ax.get_legend_handles_labels()[0]:
                ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
        _time_axis(axes[-1], chart.day_ticks)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    return _DROP.sub("", buf.getvalue()).strip()


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
    for line in panel.lines:
        xs: list[datetime] = centres
        ys = [math.nan if v is None else v for v in line.values]
        if line.joined:  # without its empty buckets, the points are joined up
            xs, ys = (
                [x for x, v in zip(centres, line.values, strict=True) if v is not None],
                [v for v in line.values if v is not None],
            )
        # Markers show a lone bucket between gaps, which a line alone would not draw.
        ax.plot(
            xs,  # type: ignore[arg-type]
            ys,
            label=_short(line.label),
            color=colours[line.color_key or line.label],
            linestyle="--" if line.dashed else "-",
            linewidth=1.6,
            marker="o",
            markersize=2.5,
        )
    bottom = [0.0] * len(chart.x)
    width = chart.width_s / 86400 * 0.8  # matplotlib's date unit is a day
    for bars in panel.bars:
        ax.bar(
            centres,  # type: ignore[arg-type]
            bars.values,
            width=width,
            bottom=bottom,
            label=_short(bars.label),
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
        ax.yaxis.set_major_formatter(PercentFormatter(decimals=0))
    elif panel.money:
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"${v:,.2f}" if top >= 1 else f"${v:.4f}"))


def _draw_spans(ax: Axes, spans: tuple[Span, ...], *, labelled: bool) -> None:
    seen: set[str] = set()
    for s in spans:
        label = _short(f"firing: {s.label}") if labelled and s.label not in seen else None
        seen.add(s.label)
        ax.axvspan(s.start, _at_least_visible(s.start, s.end), color=_FIRING, alpha=0.12, label=label)  # type: ignore[arg-type]
        ax.axvline(s.start, color=_FIRING, linewidth=1.2, linestyle=":")  # type: ignore[arg-type]


def _at_least_visible(start: datetime, end: datetime) -> datetime:
    # A firing resolved within a minute would be a zero-width span; the dotted line at its start still shows it.
    return max(end, start + timedelta(minutes=1))


def _short(label: str) -> str:
    return label if len(label) <= _LABEL_CHARS else label[: _LABEL_CHARS - 1] + "…"
