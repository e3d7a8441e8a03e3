"""The false-alarm budget as `alerts check` and `alerts backtest` show it: each rule's share of its severity's
`false_alarms_per_week` and what it expects, the whole deployment's expected false pages and tickets a week, and one
line for a severity that explicit levels take over its budget; as rows for --json and as a table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from monitor.cli.alert_text import too_narrow

if TYPE_CHECKING:
    from rich.console import Console

    from monitor.alerts.engine import Evaluation
    from monitor.alerts.rules import RuleSet
    from monitor.alerts.spending import RuleSpend, SeveritySpend


class RuleBudgetRow(TypedDict):
    """One rule's part of the budget in a round, as printed and as JSON."""

    rule: str
    severity: str
    spends: str  # "detector" (its threshold), "test" (its level) or "none" (no test: fires on the size of the change)
    share_per_week: float  # its part of the severity's false_alarms_per_week, by budget_share
    expected_per_week: float  # the false alarms a week it expects over the segments it had
    alpha: float | None  # a test's level this round (None: a detector, no test, or no segment)
    alpha_per: str  # "evaluation" (one window of one segment) or "rollout"; "" without a level
    alpha_from: str  # "derived" (from the share) or "rules file" (an explicit alpha); "" without a level
    how: str  # the same in words


class SeverityBudgetRow(TypedDict):
    """One severity over the whole deployment: its budget and what the rules expect, as JSON."""

    budget_per_week: float
    expected_per_week: float
    over_budget: bool


@dataclass(frozen=True, slots=True)
class BudgetView:
    """A round's spend: per rule (in the rules' order) and per severity, and the over-budget lines."""

    rules: dict[str, RuleBudgetRow]
    deployment: dict[str, SeverityBudgetRow]
    warnings: list[str]

    def describe(self) -> str:
        """`expected false alarms a week over these segments: page 0.98 of 1, ticket 2.7 of 3`."""
        from monitor.alerts.detectability import describe_expected

        expected = {k: v["expected_per_week"] for k, v in self.deployment.items()}
        return describe_expected(expected, {k: v["budget_per_week"] for k, v in self.deployment.items()})


def budget_view(evaluation: Evaluation, rules: RuleSet) -> BudgetView:
    """What every rule of `rules` spent in `evaluation`, and the deployment's totals."""
    from monitor.alerts.spending import rule_spends, severity_spends

    spends = rule_spends(evaluation, rules)
    severities = severity_spends(spends, rules)
    return BudgetView(
        {s.rule: _rule_row(s) for s in spends},
        {s.severity: _severity_row(s) for s in severities},
        [s.warning() for s in severities if s.over],
    )


def _rule_row(s: RuleSpend) -> RuleBudgetRow:
    level = s.level
    return RuleBudgetRow(
        rule=s.rule,
        severity=s.severity,
        spends=s.spender,
        share_per_week=s.share_per_week,
        expected_per_week=s.expected_per_week,
        alpha=level.alpha if level is not None else None,
        alpha_per=str(level.per) if level is not None else "",
        alpha_from=("rules file" if level.explicit else "derived") if level is not None else "",
        how=s.describe(),
    )


def _severity_row(s: SeveritySpend) -> SeverityBudgetRow:
    return SeverityBudgetRow(budget_per_week=s.budget, expected_per_week=s.expected, over_budget=s.over)


def print_budget(view: BudgetView, console: Console, suffix: str = "") -> None:
    """The rules' parts of the budget as a table, then the deployment's totals (with `suffix`) and any over-budget
    line."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    if not too_narrow(console, "the budget table"):
        t = Table(title="false alarms a week", box=box.SIMPLE_HEAD, pad_edge=False, expand=True)
        t.add_column("rule", ratio=1, overflow="fold")
        t.add_column("severity", no_wrap=True)
        t.add_column("share", justify="right", no_wrap=True)
        t.add_column("expects", justify="right", no_wrap=True)
        t.add_column("how", ratio=2, overflow="fold")
        for r in view.rules.values():
            t.add_row(
                escape(r["rule"]),
                escape(r["severity"]),
                f"{r['share_per_week']:.2g}",
                f"{r['expected_per_week']:.2g}",
                escape(r["how"]),
            )
        console.print(t)
    console.print(view.describe() + suffix, style="dim")
    for line in view.warnings:
        console.print(line, style="yellow")
