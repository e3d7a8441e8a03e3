"""What several pages share (pure): alert states as the report's episodes, segment text, sparklines, chart images."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from markupsafe import Markup

from monitor.alerts.evaluator import AlertState
from monitor.alerts.links import alert_path
from monitor.report.formats import segment
from monitor.report.model import Firing

_STATISTIC = re.compile(r"CUSUM (\d+(?:\.\d+)?) (?:of|>=) (\d+(?:\.\d+)?)")
SVG_NS = '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"'


@dataclass(frozen=True, slots=True)
class AlertLink:
    """A link to one rule's episode on one segment."""

    rule: str
    severity: str
    state: str
    segment: str
    href: str


def firing_of(s: AlertState) -> Firing | None:
    """The state's latest episode as the report draws it; None when there is none (inactive, nothing kept)."""
    pending = s.since if s.state in ("pending", "firing", "resolved") else None
    fired = s.fired_at if s.state != "pending" else None  # a pending state's fired_at is an earlier episode's
    resolved = s.resolved_at if s.state != "firing" and fired is not None else None
    if fired is None and pending is None:
        return None
    return Firing(s.rule, s.severity, s.segment, s.state, fired, resolved, s.value, s.baseline, s.note, pending)


def alert_link(s: AlertState) -> AlertLink:
    """The link of a state's page."""
    return AlertLink(s.rule, s.severity, s.state, segment(s.segment), alert_path(s.rule, s.key[1]))


def statistic_share(note: str) -> float | None:
    """A detector's statistic as a share of its threshold, read from the state's note (`CUSUM 3.1 of 7.0`)."""
    found = _STATISTIC.search(note)
    if found is None or float(found.group(2)) <= 0:
        return None
    return float(found.group(1)) / float(found.group(2))


def applies(keys: Sequence[tuple[str, str]], row: dict[str, str]) -> bool:
    """Whether an alert segment covers a row: every key it has that the row has matches."""
    return all(row[k] == v for k, v in keys if k in row)


@dataclass(frozen=True, slots=True)
class Sparkline:
    """A small line of values on 0..1, as the overview's template draws it: point runs (gaps break the line) and the
    lone points of one-point runs, in the SVG's own coordinates."""

    width: int
    height: int
    lines: tuple[str, ...]  # each an SVG `points` list: "x,y x,y ..."
    dots: tuple[tuple[float, float], ...]


def sparkline(values: Iterable[float | None], width: int = 120, height: int = 24) -> Sparkline | None:
    """The sparkline of `values` (None where there is none), or None without values."""
    points = list(values)
    if not points:
        return None
    step = width / max(len(points) - 1, 1)
    runs: list[list[tuple[float, float]]] = [[]]
    for i, v in enumerate(points):
        if v is None:
            runs.append([])
            continue
        runs[-1].append((round(i * step, 1), round(height - 1 - max(0.0, min(1.0, v)) * (height - 2), 1)))
    lines = tuple(" ".join(f"{x},{y}" for x, y in r) for r in runs if len(r) > 1)
    return Sparkline(width, height, lines, tuple(r[0] for r in runs if len(r) == 1))


def svg_image(svg: Markup) -> str:
    """A drawn chart as a `data:` URL for an `<img>`: the page's CSP allows no inline style, the SVG's own does."""
    text = str(svg)
    text = text.replace("<svg", SVG_NS, 1) if "xmlns=" not in text[:400] else text
    return "data:image/svg+xml;base64," + base64.b64encode(text.encode()).decode()
