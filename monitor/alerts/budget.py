"""Pure: the significance level a rule's test decides at in a round, derived from the rule's share of its severity's
false-alarm budget (`RuleSet.budget`), and the false alarms a week that level implies.

A test at level alpha fires falsely with probability at most alpha each time it looks at something new, so over a
week a rule expects at most alpha times its looks a week (a union bound). A threshold or change rule looks at an
independent window WEEK / window times a week in each segment; an always-valid rollout test looks once per rollout
however often it is evaluated. Its level is therefore its share over those looks, so that its false alarms a week
are its share. A detector spends its share through its calibrated threshold instead (`detection.Budget`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from monitor.alerts.rules import Rule
from monitor.alerts.windows import SegmentKey, VersionStats

WEEK = timedelta(days=7)
# The loosest level a derived test decides at: where a rule's share is large against its looks (a severity with a
# big budget and few rules, a week with a single rollout), a looser test would page on one event in a few that is
# merely unlucky. The rule then spends less than its share, and the expected false alarms say so.
MAX_ALPHA = 0.05


class Per(StrEnum):
    """What one alpha of a test covers."""

    EVALUATION = "evaluation"  # one window of one segment
    ROLLOUT = "rollout"  # a rollout's whole life (an always-valid test)


@dataclass(frozen=True, slots=True)
class Significance:
    """The level a rule's test decided at in a round, what one alpha covers, and how many of those a week it had."""

    alpha: float
    per: Per
    looks_per_week: float  # independent windows a week times segments, or rollouts a week
    explicit: bool  # the rules file's `alpha:`, not derived from the rule's share

    @property
    def per_week(self) -> float:
        """The false alarms a week the level implies (alpha times the looks: a union bound)."""
        return self.alpha * self.looks_per_week

    def describe(self) -> str:
        """`alpha 1.4e-05 per evaluation (derived; 7392 windows a week)`."""
        how = "from the rules file" if self.explicit else "derived"
        looks = "windows" if self.per == Per.EVALUATION else "rollouts"
        return f"alpha {self.alpha:.2g} per {self.per} ({how}; {self.looks_per_week:.4g} {looks} a week)"


def windows_per_week(rule: Rule) -> float:
    """The independent windows of one segment in a week."""
    return WEEK / rule.window


def evaluation_level(rule: Rule, share_per_week: float, segments: int) -> Significance:
    """A threshold or change rule's level: its share over its independent windows a week in `segments` segments
    (at least one segment, so that a rule whose segments appear later does not start at a loose level)."""
    looks = windows_per_week(rule) * segments
    return _level(rule, share_per_week, looks, windows_per_week(rule) * max(segments, 1), Per.EVALUATION)


def rollout_level(rule: Rule, share_per_week: float, rollouts_per_week: float) -> Significance:
    """A rollout rule's level: its share over the deployment's rollouts a week (at least one)."""
    return _level(rule, share_per_week, rollouts_per_week, max(rollouts_per_week, 1.0), Per.ROLLOUT)


def _level(rule: Rule, share: float, looks: float, divisor: float, per: Per) -> Significance:
    if rule.explicit_alpha is not None:
        return Significance(rule.explicit_alpha, per, looks, explicit=True)
    return Significance(min(share / divisor, MAX_ALPHA), per, looks, explicit=False)


def rollouts_per_week(rule: Rule, versions: Mapping[SegmentKey, Sequence[VersionStats]]) -> float:
    """A rollout rule's rollouts a week over the deployment, from the versions the round read over `rollout.lookback`
    (those with rows in the window): a version is a rollout when its segment's earliest version started at least
    `rollout.min_gap` before it. A version older than the lookback starts at its first row inside it, so one with
    sparse traffic may count: more rollouts, a stricter level."""
    if rule.rollout is None:
        return 0.0
    gap = rule.rollout.min_gap
    count = 0
    for found in versions.values():
        if found:
            first = min(v.first_seen for v in found)
            count += sum(1 for v in found if v.first_seen - first >= gap)
    return count * (WEEK / rule.rollout.lookback)


def significance(
    rule: Rule, share_per_week: float, segments: int, versions: Mapping[SegmentKey, Sequence[VersionStats]]
) -> Significance | None:
    """The level `rule`'s test decides at this round, with `segments` segments and (for a rollout rule) the versions
    read; None for a detector (its threshold spends the share) or a rule without a test."""
    if rule.detector is not None or not rule.spends_budget:
        return None
    if rule.spec.compares_versions:
        return rollout_level(rule, share_per_week, rollouts_per_week(rule, versions))
    return evaluation_level(rule, share_per_week, segments)
