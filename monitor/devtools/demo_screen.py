"""What the demo shows: the live panel while it runs, and the final screen with the alert that fired. Pure: each
function turns the demo's progress or outcome into rich renderables or lines, kept within 80 columns."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Iterator, Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from monitor.alerts.engine import SegmentResult
from monitor.alerts.evaluator import AlertState
from monitor.alerts.links import alert_path, ui_link
from monitor.devtools.demo import PLANTED_RULE, DemoOutcome, DemoPlan, DemoProgress, Example
from monitor.devtools.demo_feedback import feedback_lines
from monitor.devtools.demo_traffic import APPS, REGRESSED

UI_URL = "http://127.0.0.1:8787"  # where `relevancy-monitor ui` serves by default

JUDGE_TEXT = {
    "lexical": "lexical: a word-overlap heuristic, not an LLM (set ANTHROPIC_API_KEY, or MONITOR_JUDGE_PROVIDER and "
    "its settings, for the statements LLM judge)",
    "statements": "statements: the LLM splits each answer into statements and judges each (a judge is configured)",
}


def _num(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _segment(result: SegmentResult) -> str:
    return ", ".join(f"{k}={v}" for k, v in result.state.segment) or "all"


def live_view(progress: DemoProgress, plan: DemoPlan) -> RenderableType:
    """The panel shown while the demo runs: the counters, relevancy per app and prompt version, and any firing."""
    p = progress
    head = Text.assemble(
        (f"{p.phase}", "bold"),
        f" {p.live_elapsed_s:.0f}s (until the alert fires, at most {plan.duration_s:.0f}s)" if p.counting else "",
        f"\nconsumed {p.consumed}{plan.consumed_unit}  judged {p.judged}  in flight {p.in_flight}  "
        f"dead-lettered {p.dead_lettered}"
        if p.counting
        else "",
    )
    table = Table(box=None, pad_edge=False, header_style="dim")
    for col, justify in (
        ("app", "left"),
        ("prompt", "left"),
        ("history", "right"),
        ("live", "right"),
        ("alert", "left"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    firing = {(dict(r.state.segment).get("app"), dict(r.state.segment).get("prompt_version")) for r in p.firing}
    for app, version, n_hist, hist, n_live, live in p.segments:
        alert = "[bold red]FIRING[/]" if (app, version) in firing else ""
        table.add_row(app, version, f"{_num(hist)} n={n_hist}", f"{_num(live)} n={n_live}", alert)
    assert REGRESSED.new_version is not None
    rollout = f"{REGRESSED.name} rolls out prompt {REGRESSED.new_version} at {plan.regress_after_s:.0f}s"
    note = Text(f"{rollout}{' (now live)' if p.regressed else ''}", style="yellow" if p.regressed else "dim")
    return Group(head, table, note)


def final_lines(outcome: DemoOutcome, store_flag: str = "") -> Iterator[RenderableType]:
    """The final screen up to "Next, try:": what ran, the alert that fired (or that none did), the worst examples,
    users' feedback (the thumbs-down share by prompt version, the judge against users), where the report and the
    store are. `next_commands` follow it."""
    plan = outcome.plan
    yield Text.assemble(
        ("done", "bold"),
        f": {outcome.produced_history} events of history, {outcome.produced_live} live"
        + ("" if plan.input_format == "events" else f" (as {plan.input_format} spans)"),
    )
    yield Text(
        f"judged {outcome.judged}, dead-lettered {outcome.dead_lettered} (malformed on purpose); judge "
        f"{JUDGE_TEXT[plan.judge]}"
    )
    yield Text("")
    if not outcome.fired:
        yield Text("No alert fired. Run longer (--duration 90) or faster (--rate 80).", style="bold yellow")
    for result in outcome.fired:
        yield from _alert(result, outcome.examples.get(result.rule.name, []))
    results = outcome.evaluation.results if outcome.evaluation else []
    decided = [(dict(r.state.segment).get("app", ""), r.rule.name, r.state.state) for r in results]
    for line, style in app_decisions([a.name for a in APPS], decided):
        yield Text(line, style=style)
    for r in (r for r in results if r.state.state == "pending"):
        yield Text(f"pending: {r.rule.name} for {_segment(r)} (must hold {_duration(r)} before it pages)", style="dim")
    if outcome.feedback is not None:
        yield Text("")
        for line in feedback_lines(outcome.feedback):
            yield Text(line)
    yield Text("")
    if outcome.report_path is not None:
        yield Text.assemble("Report: ", (str(outcome.report_path), "bold"))
    else:
        yield Text(f"Report not written: {outcome.report_error}", style="red")
    yield Text(f"Store: {outcome.url}" + ("" if store_flag else " (the default store of `run` and `sql`)"))
    yield Text("\nNext, try:")


def app_decisions(apps: Iterable[str], decided: Iterable[tuple[str, str, str]]) -> Iterator[tuple[str, str]]:
    """Per app, what the last round decided (from (app, rule, state) of every rule and segment), with its style:
    the rules firing, pending, all inactive, or none that could decide."""
    by_app: dict[str, dict[str, set[str]]] = {}
    for app, rule, state in decided:
        by_app.setdefault(app, {}).setdefault(state, set()).add(rule)
    for app in apps:
        states = by_app.get(app, {})
        if states.get("firing"):
            yield f"{app}: firing {', '.join(sorted(states['firing']))}.", "bold red"
        elif states.get("pending"):
            yield f"{app}: no alert yet, pending {', '.join(sorted(states['pending']))}.", "yellow"
        elif states:
            rules = set().union(*states.values())
            yield (
                f"{app}: no alert ({len(rules)} rule{'' if len(rules) == 1 else 's'} evaluated, none firing).",
                "green",
            )
        else:
            yield f"{app}: no rule could decide (too few events, or no evaluation ran).", "dim"


def _duration(result: SegmentResult) -> str:
    seconds = int(result.rule.for_.total_seconds())
    return f"{seconds // 60}m" if seconds % 60 == 0 else f"{seconds}s"


_TESTS = {
    "welch_t": "Welch's t-test, weighted",
    "one_sample_t": "one-sample t-test",
    "two_proportion_z": "two-proportion z-test",
}


def _alert(result: SegmentResult, examples: list[Example]) -> Iterator[RenderableType]:
    o, rule = result.observation, result.rule
    segment = {k: v for k, v in result.state.segment if k != "judge_id"}
    change = "" if o.value is None or not o.baseline else f"{(o.value - o.baseline) / o.baseline:+.1%}"
    if rule.detector is not None and o.value is not None and o.baseline is not None:
        change = f"{o.value - o.baseline:+.3f}"
    tests = [t.strip() for t in o.test.split("/")] if o.test else []
    test = tests[0] if o.p_change is not None and tests else tests[-1] if tests else "none"
    yield Text.assemble(("ALERT FIRED ", "bold red"), (rule.name, "bold"), f" (severity {rule.severity})")
    what = "mean relevancy" if rule.metric != "low_score_share" else f"share of scores below {rule.low_score_below:g}"
    rows = [
        ("segment", ", ".join(f"{k}={v}" for k, v in segment.items())),
        ("current", f"{_num(o.value)} {what} of its {o.n_current} judged events in the last {_window(result)}"),
        ("baseline", f"{_num(o.baseline)}, n={o.n_baseline}: {_against(result)}"),
        ("change", f"{change}" + ("" if rule.detector is not None else " (fires at -10%)") if change else "-"),
        ("test", _test_line(result, test)),
        ("judge", f"{o.judge} ({dict(result.state.segment).get('judge_id', '')})"),
    ]
    yield _grid(("  ", label, value) for label, value in rows)
    if examples:
        yield Text("  lowest-scored answers of that segment (✓ relevant statement, ✗ not):", style="dim")
    lines: list[tuple[str, str, Text]] = []
    for ex in examples:
        lines.append(("    ", f"{ex.score:.2f}", Text(f"Q: {ex.question}")))
        for statement, verdict in zip(ex.statements, ex.verdicts, strict=False):
            mark = "✓" if verdict == "yes" else "✗" if verdict == "no" else "?"
            lines.append(
                (
                    "    ",
                    "",
                    Text(f"{mark} {statement}", style="green" if mark == "✓" else "red" if mark == "✗" else ""),
                )
            )
    if lines:
        yield _grid(lines)


def _test_line(result: SegmentResult, test: str) -> str:
    rule, o, d = result.rule, result.observation, result.detection
    if rule.detector is not None and d is not None and d.reference is not None:
        return (
            f"sequential detector (a likelihood-ratio CUSUM on the score histogram): {o.note}; its threshold holds "
            "false alarms to the rule's part of the budget for the whole deployment (false_alarms_per_week)"
        )
    alpha = f"{result.level.alpha:.2g}" if result.level is not None else f"{rule.alpha:g}"  # the round's level
    if test == "betting":
        return (
            f"always-valid betting test on bounded scores: p = {_p(o.p_value)} (alpha {alpha} per rollout, however "
            "often it looks)"
        )
    return f"{_TESTS.get(test, test)}, one-sided: p = {_p(o.p_value)} (alpha {alpha})"


def _grid(rows: Iterable[tuple[str, str, str | Text]]) -> Table:
    """Rows of (indent, label, text): a long text wraps within its own column, under itself."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(no_wrap=True, style="dim")
    grid.add_column(overflow="fold")
    for row in rows:
        grid.add_row(*row)
    return grid


def _against(result: SegmentResult) -> str:
    """What the baseline is, in words: the segment's own past, or (a new version) the app's other versions."""
    source, rule = result.observation.baseline_from, result.rule
    trailing = rule.baseline.trailing if rule.baseline is not None else None
    hours = int(trailing.total_seconds() // 3600) if trailing is not None else 0
    span = (
        (f" over the previous {hours // 24} days" if hours % 24 == 0 and hours > 24 else f" over the previous {hours}h")
        if hours
        else ""
    )
    if source is None:
        return f"the same segment{span}"
    if source.kind == "parent":
        theirs = ", ".join(source.baseline_values)
        return (
            f"the app's {'/'.join(source.fields)} {theirs}{span}; {'/'.join(source.segment_values)} has no history of "
            "its own yet"
        )
    return source.describe()


def _window(result: SegmentResult) -> str:
    seconds = int(result.rule.window.total_seconds())
    if seconds % 3600 == 0:
        return f"{seconds // 3600}h"
    return f"{seconds // 60}m" if seconds % 60 == 0 else f"{seconds}s"


def _p(p: float | None) -> str:
    return "-" if p is None else f"{p:.1e}" if p < 0.001 else f"{p:.3f}"


def next_commands(outcome: DemoOutcome, cli: str, store_flag: str = "") -> list[str]:
    """Three commands to try next, against the demo's store (`store_flag` when it is not the default) and with its
    worst example."""
    sql = (
        "SELECT app, prompt_version, count() AS n, round(avg(score), 3) AS mean FROM {table} FINAL GROUP BY ALL ORDER "
        "BY ALL"
    )
    commands = [f"{cli} sql{store_flag} {shlex.quote(sql)}", f"{cli} alerts check{store_flag}"]
    worst = next((ex for examples in outcome.examples.values() for ex in examples), None)
    if worst is not None:
        answer = " ".join(worst.statements)
        commands.append(f"{cli} judge --verbose -q {shlex.quote(worst.question)} -a {shlex.quote(answer)}")
    else:
        commands.append(f"{cli} report --since=-7h")
    return commands


def ui_lines(fired: Sequence[AlertState], cli: str, store_flag: str = "") -> list[str]:
    """The closing lines: the command that serves the web UI on the demo's store and the page to open, the alert page
    of the headline alert (the planted rule's, else the first that fired) or, with none, the overview."""
    headline = next((s for s in fired if s.rule == PLANTED_RULE), fired[0] if fired else None)
    page = "/" if headline is None else alert_path(headline.rule, headline.key[1])
    what = "the overview" if headline is None else "the alert's page (its worst answers a click away)"
    return [
        f"\nOr serve the web UI and open {what}; --reviewer names you on the review queue (keys 0–4 label):",
        f'  {cli} ui{store_flag} --reviewer "${{USER:-me}}"',
        f"  {ui_link(UI_URL, page)}",
    ]
