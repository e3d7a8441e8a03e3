"""What the rules spend of the false-alarm budget in one evaluation: per rule, its share of its severity's
`false_alarms_per_week`, the false alarms a week it expects over the segments it had and the level its test decided
at; per severity, the whole deployment's expected false alarms a week against its budget."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from monitor.alerts.budget import Significance
from monitor.alerts.engine import Evaluation, SegmentResult
from monitor.alerts.rules import Rule, RuleSet

Spender = Literal["detector", "test", "none"]
NO_TEST = "no test: fires on the size of the change"


@dataclass(frozen=True, slots=True)
class RuleSpend:
    """One rule's part of the budget in a round: `share_per_week` of its severity's false alarms a week (by its
    `budget_share`), the false alarms a week it expects over the segments it had, and how it spends them."""

    rule: str
    severity: str
    spender: Spender  # a detector's threshold, a test's level, or nothing (no test)
    share_per_week: float
    expected_per_week: float
    level: Significance | None = None  # a test's level this round (None: no segment, a detector, no test)

    def describe(self) -> str:
        """How the rule spends its share, in words."""
        if self.spender == "none":
            return NO_TEST
        if self.spender == "detector":
            return "detector: its threshold is calibrated to the share"
        if self.level is None:
            return "test: no segment this round"
        return self.level.describe()


@dataclass(frozen=True, slots=True)
class SeveritySpend:
    """One severity over the whole deployment: its budget, the false alarms a week its rules expect, and the rules
    with an explicit `alpha` (the only ones that can spend more than their share)."""

    severity: str
    budget: float
    expected: float
    explicit: tuple[RuleSpend, ...] = ()

    @property
    def over(self) -> bool:
        """True when the rules expect more than the budget (explicit levels spend more than their shares)."""
        return self.expected > self.budget * (1 + 1e-9)

    def warning(self) -> str:
        """One line: the severity is over its budget, and which explicit levels spend it."""
        named = ", ".join(f"{s.rule} {s.expected_per_week:.2g}" for s in self.explicit)
        return (
            f"{self.severity}: the rules expect {self.expected:.2g} false alarms a week, over its budget of "
            f"{self.budget:g} (explicit alpha: {named or 'none'}); remove `alpha:` to derive it from budget_share"
        )


def rule_spends(evaluation: Evaluation, rules: RuleSet) -> list[RuleSpend]:
    """Every rule's spend in `evaluation`, in the rules' order. A detector expects its share less the part of its
    segments that cannot page (no reference yet, or a baseline with no room for the drop); a rule with a test expects
    its level times its looks a week (windows of its segments, or rollouts); a rule without a test, none."""
    by_rule: dict[str, list[SegmentResult]] = {}
    for r in evaluation.results:
        by_rule.setdefault(r.rule.name, []).append(r)
    return [_spend(rule, rules.budget(rule), by_rule.get(rule.name, [])) for rule in rules.rules]


def _spend(rule: Rule, share: float, found: list[SegmentResult]) -> RuleSpend:
    if rule.detector is not None:
        # Every segment of the round has an equal part of the share (`detection.Budget`); one that cannot page
        # spends none of it.
        paging = sum(1 for r in found if _can_page(r))
        expected = share * paging / len(found) if found else 0.0
        return RuleSpend(rule.name, rule.severity, "detector", share, expected)
    if not rule.spends_budget:
        return RuleSpend(rule.name, rule.severity, "none", 0.0, 0.0)
    level = next((r.level for r in found if r.level is not None), None)
    expected = level.per_week if level is not None else 0.0
    return RuleSpend(rule.name, rule.severity, "test", share, expected, level)


def _can_page(result: SegmentResult) -> bool:
    d = result.detection
    return d is not None and d.reference is not None and d.reference.watchable


def severity_spends(spends: list[RuleSpend], rules: RuleSet) -> list[SeveritySpend]:
    """Per severity (those the file budgets, then any other a rule spends in): the deployment's expected false alarms
    a week against its budget."""
    names = list(rules.false_alarms_per_week)
    names += sorted({s.severity for s in spends if s.spender != "none"} - set(names))
    out = []
    for severity in names:
        mine = [s for s in spends if s.severity == severity]
        explicit = tuple(s for s in mine if s.level is not None and s.level.explicit)
        total = sum(s.expected_per_week for s in mine)
        out.append(SeveritySpend(severity, rules.severity_budget(severity), total, explicit))
    return out
