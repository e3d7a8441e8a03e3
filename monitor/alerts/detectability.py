"""What an evaluation can protect, in words for `alerts check` and numbers for `--json` and the backtest: each
detector segment's judged rate and the drop it would page on within 15 minutes, the segments too thin to protect
(with the judged rate that would), and the false alarms a week the rules expect over the segments they have."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from monitor.alerts.detection import rate_words
from monitor.alerts.engine import Evaluation, SegmentResult
from monitor.alerts.rules import RuleSet
from monitor.alerts.spending import rule_spends

WEEK = timedelta(days=7)
HORIZON_MIN = 15.0  # "detects a 0.15 drop in ~15 min"
PROTECTED_DROP = 0.2  # a segment is protected when a drop this large pages within PROTECTED_WITHIN_MIN
PROTECTED_WITHIN_MIN = 60.0


@dataclass(frozen=True, slots=True)
class Detectability:
    """One detector segment: its judged rate, the drop it pages on within 15 min, and whether it is protected."""

    events_per_min: float
    drop_in_15_min: float
    protected: bool
    min_per_minute: float  # the judged rate at which a PROTECTED_DROP pages within PROTECTED_WITHIN_MIN
    change: str = "drop"  # what moves: a drop of the mean, a rise of the low-score (negative feedback) share
    watchable: bool = True  # False: the rule's drop would take the mean below the lowest score, so it cannot page
    counted: str = "judged"  # what the rate counts: judged answers, or users' feedback events

    def describe(self) -> str:
        """`2.1 judged/min, detects a 0.33 drop in ~15 min`, or why the segment is too thin and what would fix it."""
        rate = f"{self.events_per_min:.2g} {self.counted}/min"
        if not self.watchable:
            return (
                f"cannot be watched: {rate}, but the {self.change} the rule is tuned to would leave the scores' range"
            )
        need = (
            f"judge at least {self.min_per_minute:.2g}/min (min_per_segment: {{min_per_minute: "
            f"{self.min_per_minute:.2g}}})"
            if self.counted == "judged"
            else f"it needs at least {self.min_per_minute:.2g} feedback/min"
        )
        if not self.protected:
            return (
                f"too thin to protect: {rate}; a {PROTECTED_DROP:g} {self.change} would take over "
                f"{PROTECTED_WITHIN_MIN:.0f} min to page; {need}"
            )
        if math.isinf(self.drop_in_15_min):
            return (
                f"{rate}, detects a {PROTECTED_DROP:g} {self.change} within {PROTECTED_WITHIN_MIN:.0f} min, none "
                "within 15 min"
            )
        return f"{rate}, detects a {self.drop_in_15_min:.2f} {self.change} in ~{HORIZON_MIN:.0f} min"


def detectability(result: SegmentResult) -> Detectability | None:
    """The segment's detectability, for a detector rule whose reference is known (None otherwise)."""
    d = result.detection
    if d is None or d.reference is None:
        return None
    ref, rate = d.reference, d.events_per_min
    drop = ref.detectable(rate * HORIZON_MIN) if rate > 0 else math.inf
    needed = ref.delay_events(PROTECTED_DROP) / PROTECTED_WITHIN_MIN
    change = "rise" if result.rule.spec.share_detector else "drop"
    counted = rate_words(result.rule)
    return Detectability(rate, drop, rate >= needed and ref.watchable, needed, change, ref.watchable, counted)


def expected_by_rule(evaluation: Evaluation, rules: RuleSet) -> dict[str, float]:
    """False alarms a week each rule expects over the segments it had (`spending.rule_spends`): a detector rule its
    share of the budget, less the part of its segments that cannot page; a rule with a test its level times its
    looks a week (windows of its segments, or the rollouts counted over its lookback); a rule without a test, 0."""
    return {s.rule: s.expected_per_week for s in rule_spends(evaluation, rules)}


def expected_per_week(evaluation: Evaluation, rules: RuleSet) -> dict[str, float]:
    """`expected_by_rule` summed by severity."""
    severity = {r.name: r.severity for r in rules.rules}
    out: dict[str, float] = {}
    for name, n in expected_by_rule(evaluation, rules).items():
        out[severity[name]] = out.get(severity[name], 0.0) + n
    return out


def describe_expected(expected: dict[str, float], budget: Mapping[str, float] | None = None) -> str:
    """`expected false alarms a week over these segments: page 0.98 of 1, ticket 2.7 of 3` (`of`: the budget)."""
    if not any(expected.values()):
        return "expected false alarms a week: none (no rule with a test or a detector has a segment)"
    budget = budget or {}
    return "expected false alarms a week over these segments: " + ", ".join(
        f"{k} {v:.2g}" + (f" of {budget[k]:g}" if k in budget else "") for k, v in sorted(expected.items())
    )
