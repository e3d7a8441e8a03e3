"""Pure decisions: is an observation bad (fire and clear levels, significance), and the state transitions
(inactive -> pending -> firing -> resolved) with the `for` duration and hysteresis."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from monitor.alerts.observations import Observation
from monitor.alerts.outcomes import Gap, Shortfall
from monitor.alerts.rules import Rule
from monitor.alerts.sequential import Reference
from monitor.alerts.windows import SegmentKey

StateName = Literal["inactive", "pending", "firing", "resolved"]
NoticeKind = Literal["firing", "resolved", "repeat"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """`fire`: bad by the fire levels and significant; `bad`: still bad by the clear levels (keeps an
    active alert active); `sufficient`: enough data to judge at all (if not, nothing changes)."""

    fire: bool
    bad: bool
    sufficient: bool
    reason: str = ""
    shortfalls: tuple[Shortfall, ...] = ()  # when not sufficient: why, as data


def _beyond(value: float, level: float, direction: str) -> bool:
    return value < level if direction == "down" else value > level


def decide(rule: Rule, obs: Observation, alpha: float | None = None) -> Verdict:
    """The verdict on one observation of `rule`, its test at level `alpha` (the round's, `budget.significance`;
    None: the rule's own `alpha`)."""
    if not obs.sufficient or obs.value is None:
        return Verdict(
            False, False, False, obs.note or "insufficient data", obs.shortfalls or (Shortfall(Gap.NO_VALUE),)
        )
    level = rule.alpha if alpha is None else alpha
    if rule.spec.silence:
        return _silence_verdict(obs, obs.value, level)
    return _condition_verdict(rule, obs, obs.value, level)


def _significant(obs: Observation, p: float | None, alpha: float) -> bool:
    # A metric without a test (lag, cost) relies on min_events; with a test, a missing p is not evidence.
    return True if not obs.test else (p is not None and p < alpha)


def _silence_verdict(obs: Observation, value: float, alpha: float) -> Verdict:
    silent = value == 0
    fire = silent and _significant(obs, obs.p_change, alpha)
    why = f"silent; {obs.n_baseline} events in the baseline, {obs.baseline or 0:.1f} expected" if silent else ""
    return Verdict(fire, silent, True, why)


def _condition_verdict(rule: Rule, obs: Observation, value: float, alpha: float) -> Verdict:
    direction = rule.bad_direction
    cond = rule.condition
    fires: list[bool] = []
    bads: list[bool] = []
    reasons: list[str] = []
    if cond.threshold is not None:
        f = _beyond(value, cond.threshold.fire, direction)
        fires.append(f and _significant(obs, obs.p_threshold, alpha))
        bads.append(_beyond(value, cond.threshold.clear_level, direction))
        if f:
            reasons.append(f"{value:.4g} beyond threshold {cond.threshold.fire:g}")
    if cond.uses_baseline and obs.baseline is not None:
        delta = (obs.baseline - value) if direction == "down" else (value - obs.baseline)
        if cond.change is not None:
            f = delta >= cond.change.fire
            fires.append(f and _significant(obs, obs.p_change, alpha))
            bads.append(delta >= cond.change.clear_level and delta > 0)
            if f:
                reasons.append(f"changed by {delta:.4g} (>= {cond.change.fire:g})")
        if cond.relative_change is not None:
            rel = delta / abs(obs.baseline) if obs.baseline else (math.inf if delta > 0 else 0.0)
            f = rel >= cond.relative_change.fire
            fires.append(f and _significant(obs, obs.p_change, alpha))
            bads.append(rel >= cond.relative_change.clear_level and delta > 0)
            if f:
                reasons.append(f"changed by {rel:.1%} (>= {cond.relative_change.fire:.0%})")
    if not fires:
        return Verdict(False, False, False, "no baseline", (Shortfall(Gap.NO_BASELINE),))
    combine = any if cond.combine == "any" else all
    fire, bad = combine(fires), combine(bads)
    if reasons and not fire and obs.test:
        reasons.append(
            f"not significant (p={obs.p_value if obs.p_value is not None else float('nan'):.3g}, alpha={alpha:g})"
        )
    return Verdict(fire, bad or fire, True, "; ".join(reasons))


def segment_key_json(segment: SegmentKey) -> str:
    """The segment as a stable string key (JSON of the ordered pairs)."""
    return json.dumps([list(p) for p in segment], separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class Frozen:
    """A detector's reference, frozen when an episode starts so that a regression never becomes its own baseline,
    and kept until the episode has left the baseline (`until`); or set by `alerts accept`, who and when."""

    reference: Reference
    until: datetime
    accepted_by: str = ""
    accepted_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class AlertState:
    """The state of one rule for one segment, as kept in the `alert_state` table."""

    rule: str
    segment: SegmentKey
    state: StateName = "inactive"
    since: datetime | None = None  # start of the current pending/firing episode
    fired_at: datetime | None = None
    resolved_at: datetime | None = None
    last_eval_at: datetime | None = None
    last_notified_at: datetime | None = None
    notified: dict[str, str] = field(default_factory=dict)  # notifier name -> the state it last delivered
    value: float | None = None
    baseline: float | None = None
    n_current: int = 0
    n_baseline: int = 0
    p_value: float | None = None
    severity: str = ""
    note: str = ""
    frozen: Frozen | None = None  # detector rules only

    @property
    def key(self) -> tuple[str, str]:
        """(rule, segment key) identifying the state."""
        return (self.rule, segment_key_json(self.segment))

    @property
    def active(self) -> bool:
        """Pending or firing."""
        return self.state in ("pending", "firing")


def step(rule: Rule, prev: AlertState | None, obs: Observation, verdict: Verdict, now: datetime) -> AlertState:
    """The next state of one segment after an evaluation at `now`."""
    s = prev or AlertState(rule=rule.name, segment=obs.segment, severity=rule.severity)
    s = dataclasses.replace(s, last_eval_at=now, severity=rule.severity)
    # The note says which baseline was used whenever it is not the segment's own history.
    source = obs.baseline_from.describe() if obs.baseline_from is not None else ""
    if not verdict.sufficient:
        # Missing data never reads as fine: nothing changes, the last values stay, the note says why.
        return dataclasses.replace(s, note=_joined(f"no decision: {verdict.reason}", source))
    s = dataclasses.replace(
        s,
        value=obs.value,
        baseline=obs.baseline,
        n_current=obs.n_current,
        n_baseline=obs.n_baseline,
        p_value=obs.p_value,
        note=_joined(verdict.reason, source),
    )
    if s.state in ("inactive", "resolved"):
        if not verdict.fire:
            return s
        if rule.for_.total_seconds() <= 0:
            return dataclasses.replace(s, state="firing", since=now, fired_at=now, resolved_at=None)
        return dataclasses.replace(s, state="pending", since=now, fired_at=None)
    if s.state == "pending":
        if not verdict.bad:
            return dataclasses.replace(s, state="inactive", since=None)
        since = s.since or now
        if verdict.fire and now - since >= rule.for_:
            return dataclasses.replace(s, state="firing", fired_at=now, resolved_at=None)
        return s
    # firing
    if not verdict.bad:
        return dataclasses.replace(s, state="resolved", resolved_at=now)
    return s


def _joined(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def notification_due(
    state: AlertState, notifier: str, rule: Rule, now: datetime, resend_while_firing: bool
) -> NoticeKind | None:
    """What `notifier` should be told about `state` now, if anything."""
    delivered = state.notified.get(notifier)
    if state.state == "firing":
        if delivered != "firing":
            return "firing"
        if resend_while_firing:
            return "repeat"
        if state.last_notified_at is not None and now - state.last_notified_at >= rule.repeat_interval:
            return "repeat"
        return None
    if state.state == "resolved" and delivered == "firing":
        return "resolved"
    return None
