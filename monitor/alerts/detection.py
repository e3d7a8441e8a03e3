"""Pure: one detector rule's decision for one segment, from its window's buckets, its baseline and its last state.

A segment pages when its CUSUM (`sequential.cusum`) reaches the threshold its baseline calibrates for its share of
the false-alarm budget. From then on its reference is frozen (`Frozen`), so the regression never becomes its
own baseline; the page resolves when the scores are back (`sequential.recovery`), when the segment stops
receiving traffic (a rolled-back or retired version), or when someone accepts the new level (`alerts accept`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from monitor.alerts.evaluator import AlertState, Frozen, Verdict
from monitor.alerts.observations import Observation, weighted_moments
from monitor.alerts.outcomes import Gap, Shortfall, describe_shortfalls
from monitor.alerts.rules import Rule
from monitor.alerts.sequential import (
    LOW_SHARE_VALUES,
    MIN_SPAN_S,
    WEEK_S,
    Buckets,
    Reference,
    calibrate,
    change_point,
    cusum,
    recovery,
    stopped_alone,
    stopped_beside,
)
from monitor.alerts.windows import SegmentData, SegmentKey, WindowStats

RESOLVE_WEEKS = 40.0  # a regression that stays resolves falsely less than once in this many weeks of its traffic
_EMPTY = Buckets(np.empty(0, np.int64), np.empty(0), np.empty(0), np.empty(0))


@dataclass(frozen=True, slots=True)
class Budget:
    """A rule's share of the false-alarm budget (`per_week`) and how many segments share it this round."""

    per_week: float
    segments: int

    def arl_events(self, events_per_s: float) -> float:
        """Events between false alarms that keep one segment of this rate within its share."""
        return events_per_s * WEEK_S * max(self.segments, 1) / self.per_week


@dataclass(frozen=True, slots=True)
class Detection:
    """The observation, verdict and frozen reference of one detector segment after a round."""

    observation: Observation
    verdict: Verdict
    frozen: Frozen | None
    reference: Reference | None = None
    events_per_min: float = 0.0


def _ms(t: datetime) -> int:
    return round(t.timestamp() * 1000)


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def events_per_s(buckets: Buckets, baseline: WindowStats) -> float:
    """The segment's judged rate: its own while it had traffic in the window (first to last minute, so that a
    segment gone quiet keeps its rate and its threshold), else its baseline's (effective events)."""
    if len(buckets.start_ms):
        span = max((int(buckets.start_ms[-1]) - int(buckets.start_ms[0])) / 1000 + 60.0, MIN_SPAN_S)
        return buckets.events / span
    m = weighted_moments(baseline.weighted)
    return m.n_eff / baseline.seconds if m is not None and baseline.seconds > 0 else 0.0


def reference_for(
    rule: Rule, baseline: WindowStats, arl_events: float, resolve_arl_events: float = 0.0
) -> Reference | None:
    """The calibrated reference from a baseline window; None when it holds fewer than `min_baseline_events`."""
    assert rule.detector is not None
    w = baseline.weighted
    m = weighted_moments(w)
    if m is None or baseline.ok < rule.min_baseline_events:
        return None
    if not rule.spec.share_detector:
        if not w.bins:
            return None
        return calibrate(
            w.bins, m.mean, m.variance, m.n_eff, rule.detector.shift, arl_events, resolve_arl_events=resolve_arl_events
        )
    share = min(max(w.low / w.weight, 0.0), 1.0)
    variance = share * (1 - share) * m.n_eff / max(m.n_eff - 1, 1)
    bins = (w.low, w.weight - w.low)
    return calibrate(
        bins, 1.0 - share, variance, m.n_eff, rule.detector.shift, arl_events, LOW_SHARE_VALUES, resolve_arl_events
    )


def detect(
    rule: Rule,
    segment: SegmentKey,
    data: SegmentData | None,
    buckets: Buckets | None,
    prev: AlertState | None,
    window: tuple[datetime, datetime],
    budget: Budget,
    around: Beside | None = None,
) -> Detection:
    """The decision of detector `rule` on one segment for the window ending at `window[1]`; `around` is the traffic
    beside it (silence counts only while other segments are still judged)."""
    assert rule.detector is not None
    assert rule.baseline is not None
    assert rule.baseline.trailing is not None
    start, end = window
    b = buckets if buckets is not None else _EMPTY
    active = prev is not None and prev.active
    frozen = (
        prev.frozen if prev is not None and prev.frozen is not None and (active or end < prev.frozen.until) else None
    )
    base = data.baseline if data is not None else WindowStats(0.0)
    rate = events_per_s(b, base)
    resolve_arl = rate * WEEK_S * RESOLVE_WEEKS
    ref = frozen.reference if frozen is not None else reference_for(rule, base, budget.arl_events(rate), resolve_arl)
    restart = _restart(prev, frozen)
    run = b.since(_ms(restart)) if restart is not None else b
    source = data.baseline_from if data is not None else None
    if ref is None:
        gap = (Shortfall(Gap.FEW_BASELINE_EVENTS, base.ok, rule.min_baseline_events),)
        why = describe_shortfalls(gap, rule)
        obs = Observation(
            rule.name, segment, run.mean(), None, round(run.events), base.ok, False, note=why, shortfalls=gap
        )
        if active:
            return Detection(obs, _gone(segment, b, start, around) or Verdict(False, True, False, why, gap), frozen)
        return Detection(obs, Verdict(False, False, False, why, gap), None)
    stat = cusum(run, ref)
    shown = _shown(rule, run.mean())
    obs = Observation(
        rule.name,
        segment,
        shown,
        _shown(rule, ref.baseline_mean),
        round(run.events),
        base.ok,
        True,
        test="cusum",
        judge=data.judge if data is not None else "",
        baseline_from=source,
        note=f"CUSUM {stat:.1f} of {ref.threshold:.1f}" if ref.watchable else _unwatchable(rule, ref),
    )
    verdict = _verdict(rule, segment, ref, stat, b, prev, start, around) if active else _fresh(rule, ref, stat, rate)
    if verdict.fire and not active and around is not None and _gone(segment, b, start, around) is not None:
        verdict = Verdict(False, False, True, "no more traffic: a segment that stopped receiving traffic does not page")
    if verdict.fire and not active and (began := change_point(run, ref)) is not None:
        verdict = dataclasses.replace(verdict, reason=f"{verdict.reason}; the change began about {_at(began):%H:%M}")
    keep = end + rule.baseline.trailing
    if active or verdict.fire:
        frozen = Frozen(ref, keep, frozen.accepted_by, frozen.accepted_at) if frozen is not None else Frozen(ref, keep)
    return Detection(obs, verdict, frozen, ref, rate * 60)


def _restart(prev: AlertState | None, frozen: Frozen | None) -> datetime | None:
    """After a resolution or an acceptance the statistic starts again: the evidence before it was used up."""
    marks = []
    if prev is not None and prev.state == "resolved" and prev.resolved_at is not None:
        marks.append(prev.resolved_at)
    if frozen is not None and frozen.accepted_at is not None:
        marks.append(frozen.accepted_at)
    return max(marks) if marks else None


def _shown(rule: Rule, oriented: float | None) -> float | None:
    """The value people read: the mean score, or the low-score (negative feedback) share (the detector works on 1 -
    share)."""
    if oriented is None:
        return None
    return 1.0 - oriented if rule.spec.share_detector else oriented


def change_words(rule: Rule) -> str:
    """What the detector pages on, in words: a drop, or a rise of the share it watches."""
    if rule.metric == "feedback_negative_share":
        return "rise of the negative feedback share"
    return "rise of the low-score share" if rule.spec.share_detector else "drop"


def rate_words(rule: Rule) -> str:
    """What the detector's rate counts: judged answers, or users' feedback events."""
    return "feedback" if rule.spec.table == "feedback" else "judged"


def _unwatchable(rule: Rule, ref: Reference) -> str:
    """Why a segment cannot page: the drop it is tuned to would take its mean below the lowest score."""
    assert rule.detector is not None
    change = change_words(rule)
    base = _shown(rule, ref.baseline_mean)
    return f"cannot page: a {change} of {rule.detector.shift:g} from a baseline of {base:.3g} leaves the scores' range"


def _fresh(rule: Rule, ref: Reference, stat: float, rate: float) -> Verdict:
    assert rule.detector is not None
    fire = stat >= ref.threshold
    if not fire:
        return Verdict(False, False, True, "")
    if ref.bank is not None:
        # The histogram's detector is tuned to no single drop: the rule's shift only sets the recovery's level.
        why = f"CUSUM {stat:.1f} >= {ref.threshold:.1f}: scores moved down from the baseline's histogram"
    else:
        why = f"CUSUM {stat:.1f} >= {ref.threshold:.1f}: a {change_words(rule)} of {rule.detector.shift:g} or more"
    return Verdict(True, True, True, f"{why}, at {rate * 60:.2g} {rate_words(rule)}/min")


def _verdict(
    rule: Rule,
    segment: SegmentKey,
    ref: Reference,
    stat: float,
    b: Buckets,
    prev: AlertState | None,
    start: datetime,
    around: Beside | None,
) -> Verdict:
    """While pending or firing: resolved by silence, or by evidence that the scores are back; firing otherwise."""
    gone = _gone(segment, b, start, around)
    if gone is not None:
        return gone
    assert prev is not None
    since = prev.fired_at or prev.since
    back = recovery(b.since(_ms(since)) if since is not None else b, ref)
    if back >= ref.resolve_threshold:
        return Verdict(
            False,
            False,
            True,
            f"scores back within {ref.slack:.3g} of the baseline (recovery {back:.1f} >= {ref.resolve_threshold:.1f})",
        )
    if prev.state == "pending":
        fire = stat >= ref.threshold
        return Verdict(fire, True, True, f"CUSUM {stat:.1f} of {ref.threshold:.1f}")
    return Verdict(
        True,
        True,
        True,
        f"firing until the scores are back: recovery {back:.1f} of {ref.resolve_threshold:.1f}; CUSUM {stat:.1f}",
    )


def _gone(segment: SegmentKey, b: Buckets, start: datetime, beside: Beside | None) -> Verdict | None:
    """Resolved, when the segment stopped receiving traffic while the rule's other segments did not (a stalled judge
    silences all of them, and resolves nothing): none in the window, or a silence beyond chance."""
    what = describe_segment(segment)
    if beside is None or beside.latest_ms is None:
        return None
    if not len(b.start_ms):
        return Verdict(False, False, True, f"resolved: no more traffic on {what} since before {start:%Y-%m-%d %H:%M}")
    first, last = int(b.start_ms[0]), int(b.start_ms[-1])
    silent = (beside.latest_ms - last) / 1000
    during, after = beside.around(first, last)
    if stopped_beside(b.events, during, after, silent) or stopped_alone(b.events, (last - first) / 1000 + 60.0, silent):
        return Verdict(False, False, True, f"resolved: no more traffic on {what} since {_at(last):%H:%M}")
    return None


@dataclass(frozen=True, slots=True)
class Beside:
    """The traffic beside one segment: the other segments of its app (same judge), bucket by bucket, and the
    newest bucket of any segment of the rule (`latest_ms`)."""

    siblings: tuple[Buckets, ...]
    latest_ms: int | None

    def around(self, first_ms: int, last_ms: int) -> tuple[float, float]:
        """The siblings' effective events in the buckets from `first_ms` to `last_ms` (the segment's own life in the
        window: its share of the app's traffic), and after it."""
        during = after = 0.0
        for s in self.siblings:
            n = s.n_eff
            lo = int(np.searchsorted(s.start_ms, first_ms, side="left"))
            hi = int(np.searchsorted(s.start_ms, last_ms, side="right"))
            during += float(n[lo:hi].sum())
            after += float(n[hi:].sum())
        return during, after


def _scope(segment: SegmentKey) -> tuple[str | None, str | None]:
    fields = dict(segment)
    return fields.get("app"), fields.get("judge_id")


@dataclass(frozen=True, slots=True)
class Neighbours:
    """A rule's buckets grouped by app and judge_id, and the newest bucket of any: every segment's `Beside` from one
    pass over them (a search per segment made a round quadratic in its segments: 1.1 s of 2.1 at 500)."""

    groups: Mapping[tuple[str | None, str | None], tuple[tuple[SegmentKey, Buckets], ...]]
    latest_ms: int | None

    def of(self, segment: SegmentKey) -> Beside:
        """What is beside `segment`: the other segments of its app and judge_id."""
        return Beside(tuple(b for key, b in self.groups.get(_scope(segment), ()) if key != segment), self.latest_ms)


def neighbours(buckets: Mapping[SegmentKey, Buckets]) -> Neighbours:
    """The `Neighbours` of a rule's `buckets`."""
    groups: dict[tuple[str | None, str | None], list[tuple[SegmentKey, Buckets]]] = {}
    for key, b in buckets.items():
        groups.setdefault(_scope(key), []).append((key, b))
    latest = max((int(b.start_ms[-1]) for b in buckets.values() if len(b.start_ms)), default=None)
    return Neighbours({k: tuple(v) for k, v in groups.items()}, latest)


def beside(segment: SegmentKey, buckets: Mapping[SegmentKey, Buckets]) -> Beside:
    """What is beside `segment` among a rule's `buckets`: the segments of the same app and judge_id."""
    return neighbours(buckets).of(segment)


def rollout_stopped(
    rule: Rule, segment: SegmentKey, buckets: Mapping[SegmentKey, Buckets], start: datetime
) -> Verdict | None:
    """Resolved, when a rollout's newest version stopped receiving traffic while the app's other versions did not."""
    gone = _gone(segment, buckets.get(segment, _EMPTY), start, beside(segment, buckets))
    if gone is None:
        return None
    return dataclasses.replace(gone, reason="rollout over: " + gone.reason.removeprefix("resolved: "))


def rollout_recovered(rule: Rule, data: SegmentData, buckets: Buckets | None, prev: AlertState) -> Verdict | None:
    """Resolved, when a firing rollout's new version has scored like the version before it since the page: the
    reverse CUSUM over its buckets since then, against the old version's mean less half the change that fires,
    reaches the threshold the old version's scores calibrate for one false resolution in `RESOLVE_WEEKS` weeks."""
    since = prev.fired_at or prev.since
    if prev.state == "inactive":
        return None
    cond = rule.condition.relative_change
    w = data.baseline.weighted
    m = weighted_moments(w)
    if buckets is None or since is None or cond is None or m is None or not w.bins:
        return None
    recent = buckets.since(_ms(since))
    rate = (
        recent.events / max((recent.start_ms[-1] - recent.start_ms[0]) / 1000 + 60.0, MIN_SPAN_S)
        if len(recent.start_ms)
        else 0.0
    )
    ref = calibrate(
        w.bins,
        m.mean,
        m.variance,
        m.n_eff,
        cond.fire * m.mean,
        1 / rule.alpha,
        resolve_arl_events=rate * WEEK_S * RESOLVE_WEEKS,
    )
    back = recovery(recent, ref)
    if back < ref.resolve_threshold:
        return None
    return Verdict(
        False,
        False,
        True,
        f"the new version scores like the one before it again (recovery {back:.1f} >= {ref.resolve_threshold:.1f})",
    )


def describe_segment(segment: SegmentKey) -> str:
    """`prompt_version v2` (the fields below the app), or the app when there are none."""
    below = [f"{k} {v}" for k, v in segment if k not in ("app", "judge_id")]
    return ", ".join(below) or " ".join(f"{k} {v}" for k, v in segment if k == "app") or "all traffic"
