"""`alerts check` for people and programs: one row per rule and segment (why nothing was decided, in words and as
data), printed as a table that fits the console."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict

from monitor.cli.alert_text import number, plural, segment_text, too_narrow

if TYPE_CHECKING:
    from rich.console import Console

    from monitor.alerts.engine import Evaluation, SegmentResult
    from monitor.alerts.outcomes import EmptyRule
    from monitor.alerts.rules import Rule
    from monitor.cli.alert_budget_table import BudgetView, RuleBudgetRow, SeverityBudgetRow
    from monitor.feedback.agreement_queries import JudgeUserAgreement


class CheckRow(TypedDict):
    """One rule and segment of `alerts check` (or a rule without segments, or whose data could not be read), as
    printed and as JSON."""

    rule: str
    severity: str
    metric: str
    segment: dict[str, str] | None  # None: the row is about the whole rule, which had no segment
    judge: str
    state: str  # the alert state, or "error"
    since: str | None
    value: float | None
    baseline: float | None
    n_current: int
    n_baseline: int
    p_value: float | None
    test: str
    sufficient: bool  # whether a decision was made
    reason: str  # why no decision was made, in plain words ("" when one was)
    no_decision: list[dict[str, Any]]  # the same as data: [{"gap": "few_baseline_events", "have": 0, "need": 200}]
    window: dict[str, str]  # the current window evaluated, [start, end)
    note: str  # the state's note: the verdict, and which baseline was used when not the segment's own
    suspect: str  # a live score alert whose judge's canaries fire: "canaries moved too: suspect the judge (...)"
    detects: str  # detector rules: the judged rate and the drop it pages on within 15 min, or why it is too thin
    expected_per_week: float | None  # the false alarms a week the rule expects over its segments (0: no test)
    budget: RuleBudgetRow | None  # the rule's share of its severity's budget, its test's level, how it spends it
    deployment: dict[str, SeverityBudgetRow]  # per severity: the whole deployment's budget and expected false alarms


def check_rows(
    evaluation: Evaluation,
    order: list[str] | None = None,
    budget: BudgetView | None = None,
) -> list[CheckRow]:
    """One row per rule and segment, per rule without segments, and per failed rule, in the rules' `order`; with
    `budget`, each rule's part of the false-alarm budget and the deployment's totals on its rows."""
    now = evaluation.now
    spent = budget.rules if budget is not None else {}
    deployment = budget.deployment if budget is not None else {}
    rows = [_segment_row(r, now, spent.get(r.rule.name), deployment) for r in evaluation.results]
    rows += [_empty_rule_row(e, now, spent.get(e.rule.name), deployment) for e in evaluation.empty]
    rows += [
        _rule_row(err.rule, "error", err.error, [{"gap": "query_failed"}], {}, spent.get(err.rule.name), deployment)
        for err in evaluation.errors
    ]
    rank = {name: i for i, name in enumerate(order or [])}
    rows.sort(key=lambda row: rank.get(row["rule"], len(rank)))  # stable: segments keep their order
    return rows


def _segment_row(
    r: SegmentResult, now: datetime, budget: RuleBudgetRow | None, deployment: dict[str, SeverityBudgetRow]
) -> CheckRow:
    """The row of one rule and segment evaluated: its state, figures, and why no decision was made."""
    from monitor.alerts.detectability import detectability
    from monitor.alerts.outcomes import describe_shortfalls

    s, o, v = r.state, r.observation, r.verdict
    gaps = [] if v.sufficient else [{"gap": str(f.gap), "have": f.have, "need": f.need} for f in v.shortfalls]
    return CheckRow(
        rule=r.rule.name,
        severity=s.severity or r.rule.severity,  # a suspect judge's alert is a ticket
        metric=r.rule.metric,
        segment=dict(s.segment),
        judge=o.judge,
        state=s.state,
        since=s.since.isoformat() if s.since else None,
        value=o.value,
        baseline=o.baseline,
        n_current=o.n_current,
        n_baseline=o.n_baseline,
        p_value=o.p_value,
        test=o.test,
        sufficient=v.sufficient,
        reason="" if v.sufficient else describe_shortfalls(v.shortfalls, r.rule, r.windows, now) or v.reason,
        no_decision=gaps,
        window=_window(r.windows.current),
        note=s.note,
        suspect=r.suspect.text() if r.suspect is not None else "",
        detects=(d.describe() if (d := detectability(r)) is not None else ""),
        expected_per_week=budget["expected_per_week"] if budget is not None else None,
        budget=budget,
        deployment=deployment,
    )


def _empty_rule_row(
    e: EmptyRule, now: datetime, budget: RuleBudgetRow | None, deployment: dict[str, SeverityBudgetRow]
) -> CheckRow:
    """The row of a rule that found no segment to evaluate, saying why."""
    from monitor.alerts.outcomes import describe_empty

    gap: dict[str, Any] = {"gap": str(e.gap)}
    if e.newest is not None:
        gap["newest"] = e.newest.at.isoformat() if e.newest.at is not None else None
    if e.single_version or e.started_together:
        gap.update(single_version=e.single_version, started_together=e.started_together)
    return _rule_row(e.rule, "inactive", describe_empty(e, now), [gap], _window(e.windows.current), budget, deployment)


def _window(w: tuple[datetime, datetime]) -> dict[str, str]:
    return {"start": w[0].isoformat(), "end": w[1].isoformat()}


def _rule_row(
    rule: Rule,
    state: str,
    reason: str,
    gaps: list[dict[str, Any]],
    window: dict[str, str],
    budget: RuleBudgetRow | None,
    deployment: dict[str, SeverityBudgetRow],
) -> CheckRow:
    return CheckRow(
        rule=rule.name,
        severity=rule.severity,
        metric=rule.metric,
        segment=None,
        judge="",
        state=state,
        since=None,
        value=None,
        baseline=None,
        n_current=0,
        n_baseline=0,
        p_value=None,
        test="",
        sufficient=False,
        reason=reason,
        no_decision=gaps,
        window=window,
        note="",
        suspect="",
        detects="",
        expected_per_week=budget["expected_per_week"] if budget is not None else None,
        budget=budget,
        deployment=deployment,
    )


_STATE_STYLE = {"firing": "bold red", "pending": "yellow", "resolved": "green", "error": "magenta", "no data": "dim"}


def print_check(rows: list[CheckRow], now: datetime, console: Console) -> None:
    """The check as a table that fits the console (80 columns and up): one section per rule, a segment per row,
    the reason or note under the segment; narrower consoles get one line pointing at --json."""
    from rich import box
    from rich.console import Group
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    if too_narrow(console, "the table"):
        return
    table = Table(
        title=f"alert rules at {now.isoformat(timespec='seconds')} (times UTC)",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        expand=True,
    )
    table.add_column("rule / segment", ratio=1, overflow="fold")
    table.add_column("state", no_wrap=True)
    table.add_column("value · n · p", no_wrap=True)
    rules: dict[str, list[CheckRow]] = {}
    for r in rows:
        rules.setdefault(r["rule"], []).append(r)
    for name, group in rules.items():
        # The rule's severity: a row of a suspect judge shows its own drop to ticket below its segment.
        severity = next((r["severity"] for r in group if not r["suspect"]), group[0]["severity"])
        head = Text.assemble((name, "bold"), (f" ({severity}, {group[0]['metric']})", "dim"))
        if len(group) == 1 and group[0]["segment"] is None:
            r = group[0]
            reason = Padding(Text(r["reason"], style="dim"), (0, 0, 0, 2))
            table.add_row(Group(head, reason), _state(r), "", end_section=True)
            continue
        table.add_row(head, "", "")
        for i, r in enumerate(group):
            parts = [Padding(Text(segment_text(r["segment"] or {})), (0, 0, 0, 2))]
            if r["suspect"]:
                suspect = Text(f"{r['severity']}, not a page: {r['suspect']}", style="yellow")
                parts.append(Padding(suspect, (0, 0, 0, 4)))
            why = r["reason"] or r["note"].removeprefix(r["suspect"]).removeprefix("; ")
            if why:
                parts.append(Padding(Text(why, style="dim"), (0, 0, 0, 4)))
            if r["detects"]:
                parts.append(Padding(Text(r["detects"], style="dim"), (0, 0, 0, 4)))
            table.add_row(Group(*parts), _state(r), _numbers(r), end_section=i == len(group) - 1)
    console.print(table)
    console.print(_check_counts(rows, len(rules)), style="dim")


def _check_counts(rows: list[CheckRow], n_rules: int) -> str:
    segments = [r for r in rows if r["segment"] is not None]
    states: dict[str, int] = {}
    for r in segments:
        if r["sufficient"]:
            states[r["state"]] = states.get(r["state"], 0) + 1
    undecided = sum(1 for r in segments if not r["sufficient"])
    empty = sum(1 for r in rows if r["segment"] is None and r["state"] != "error")
    failed = sum(1 for r in rows if r["state"] == "error")
    parts = [", ".join(f"{n} {k}" for k, n in sorted(states.items())) or "nothing decided"]
    if undecided or empty:
        parts.append(f"no decision: {plural(undecided, 'segment')} and {plural(empty, 'rule')} without any segment")
    if failed:
        parts.append(f"{plural(failed, 'rule')} failed")
    return f"{plural(n_rules, 'rule')}, {plural(len(segments), 'segment')}: " + "; ".join(parts)


def _state_word(r: CheckRow) -> str:
    # A segment without a decision keeps its stored state (a firing alert keeps firing): shown beside it.
    if r["sufficient"] or r["state"] == "error":
        return r["state"]
    return "no data" if r["state"] == "inactive" else f"{r['state']}, no data"


def _state(r: CheckRow) -> str:
    word = _state_word(r)
    style = _STATE_STYLE.get(r["state"] if r["state"] != "inactive" else word, "")
    return f"[{style}]{word}[/{style}]" if style else word


def _numbers(r: CheckRow) -> str:
    if r["value"] is None and r["n_current"] == 0 and r["n_baseline"] == 0:
        return ""
    value = number(r["value"]) or "-"
    base = f" vs {number(r['baseline'])}" if r["baseline"] is not None else ""
    paired = r["baseline"] is not None or r["n_baseline"]
    n = f"n {r['n_current']}/{r['n_baseline']}" if paired else f"n {r['n_current']}"
    # A p-value without a decision tests nothing anyone acts on.
    p = f"\np {number(r['p_value'], 2)}" if r["p_value"] is not None and r["sufficient"] else ""
    return f"{value}{base}\n{n}{p}"


def print_judge_users(
    agreement: Sequence[JudgeUserAgreement], since: datetime, until: datetime, console: Console
) -> None:
    """The judge-against-users block: per judge, over the feedback given in [since, until), the AUC of its score for
    thumbs and ρ against ratings, for all segments and then each segment; or one line when no feedback was joined to
    a judged answer. Stored names are printed as text (never as console markup) and wrap to the console."""
    from rich.padding import Padding
    from rich.text import Text

    from monitor.feedback.agreement_text import AUC_MEANING, RHO_MEANING, agreement_line, segment_name

    span = f"{since:%Y-%m-%d %H:%M} – {until:%Y-%m-%d %H:%M} UTC"
    overall = [a for a in agreement if a.week is None]
    if not overall:
        console.print(Text(f"judge against users: no feedback given {span} was joined to a judged answer", "dim"))
        return
    console.print(Text(f"judge against users: feedback given {span}", "bold"))
    console.print(Padding(Text(f"{AUC_MEANING}; {RHO_MEANING}", "dim"), (0, 0, 0, 2)))
    for a in overall:
        indent = 2 if a.all_segments else 4
        name = f"judge {a.judge_id}, all segments" if a.all_segments else segment_name(a)
        console.print(Padding(Text(name), (0, 0, 0, indent)))
        console.print(Padding(Text(agreement_line(a)), (0, 0, 0, indent + 2)))
