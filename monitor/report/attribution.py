"""Is it the product or the judge? (pure): the live score's change beside the judge's canary and the shadow judge
over the same range, read as one typed verdict with the sentence the page shows.

The canary re-scores a fixed labelled set, so its mean shift moves only when the judge does; the shadow judge
scores the same live answers, so it moves with the product but not with the primary judge. A figure "moves" when
its change is at least half the live change (and at least 0.05): a judge that drifted by that much explains half
of what the alert saw."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from monitor.report.model import CanaryPoint, Figures, ShadowPoint

MOVE_LEAST = 0.05
Verdict = Literal["product", "judge", "unknown", "quiet"]


@dataclass(frozen=True, slots=True)
class BeforeAfter:
    """A figure's mean before the change and at or after it (None: nothing on that side)."""

    before: float | None
    after: float | None

    @property
    def delta(self) -> float | None:
        """after − before, when both sides have a value."""
        return None if self.before is None or self.after is None else self.after - self.before


@dataclass(frozen=True, slots=True)
class Attribution:
    """Which moved: the verdict, its sentence, and the figures it rests on."""

    verdict: Verdict
    sentence: str
    canary: BeforeAfter | None = None
    shadow: BeforeAfter | None = None


def _split(points: Iterable[tuple[datetime, float, float]], at: datetime) -> BeforeAfter:
    sums = {True: [0.0, 0.0], False: [0.0, 0.0]}
    for t, value, weight in points:
        acc = sums[t >= at]
        acc[0] += value * weight
        acc[1] += weight
    return BeforeAfter(*(sums[side][0] / sums[side][1] if sums[side][1] else None for side in (False, True)))


def canary_split(canaries: Iterable[CanaryPoint], judge_id: str, at: datetime) -> BeforeAfter | None:
    """The judge's canary mean shift before and after `at` (None: the judge has no canary run in the range)."""
    runs = [(c.t, c.mean_shift, 1.0) for c in canaries if c.judge_id == judge_id and c.mean_shift is not None]
    return _split(runs, at) if runs else None


def shadow_split(shadow: Iterable[ShadowPoint], app: str, at: datetime) -> BeforeAfter | None:
    """The shadow judge's mean on the app's shared events before and after `at` (None: no shadow judge there)."""
    points = [(p.t, p.shadow_mean, float(p.events)) for p in shadow if p.app == app and p.events > 0]
    return _split(points, at) if points else None


def _moved(delta: float | None, live: float) -> bool:
    return delta is not None and abs(delta) >= max(MOVE_LEAST, abs(live) / 2)


def _figure(b: BeforeAfter) -> str:
    def f(v: float | None) -> str:
        return "none" if v is None else f"{v:+.2f}"

    return f"{f(b.before)} before, {f(b.after)} after"


def attribute(
    figures: Figures | None, at: datetime | None, canary: BeforeAfter | None, shadow: BeforeAfter | None
) -> Attribution:
    """The verdict on the lead change (`figures` since `at`), from the canary's and the shadow's before and after."""
    if canary is None and shadow is None:
        return Attribution(
            "unknown",
            "Cannot tell the product from the judge: no canary run and no shadow judge in this range "
            "(ALERTS_CANARY_INTERVAL schedules canary runs; MONITOR_SHADOW_JUDGE adds a second judge).",
        )
    if figures is None or at is None or figures.current is None or figures.baseline is None:
        shift = f"the canary's mean shift {_figure(canary)}" if canary else "the shadow judge"
        return Attribution("quiet", f"Nothing fired to attribute; {shift}.", canary, shadow)
    live = figures.current - figures.baseline
    said = f"live relevancy moved {live:+.2f}"
    if canary is not None and _moved(canary.delta, live):
        return Attribution(
            "judge",
            f"Suspect the judge: {said} and the judge's canary moved too (mean shift {_figure(canary)} the change).",
            canary,
            shadow,
        )
    if shadow is not None and shadow.delta is not None and not _moved(shadow.delta, live):
        return Attribution(
            "judge",
            f"Suspect the primary judge: {said}, but the shadow judge scored the same answers {shadow.delta:+.2f}.",
            canary,
            shadow,
        )
    held = []
    if canary is not None and canary.delta is not None:
        held.append(f"the judge's canary held (mean shift {_figure(canary)} the change)")
    if shadow is not None and shadow.delta is not None:
        held.append(f"the shadow judge moved {shadow.delta:+.2f} on the same answers")
    if not held:
        return Attribution(
            "unknown",
            f"Cannot tell yet: {said}, and neither the canary nor the shadow judge has figures on both sides of the "
            "change.",
            canary,
            shadow,
        )
    return Attribution(
        "product", f"The product changed, not the judge: {said} while {' and '.join(held)}.", canary, shadow
    )
