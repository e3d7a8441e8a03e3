"""`relevancy-monitor alerts run|check|accept|backtest`: the arguments, and what each action prints.

ClickHouse settings come from `monitor.config.Settings` (MONITOR_CLICKHOUSE_* or the flags below); the alert
options are flags or ALERTS_* environment variables (`monitor.alerts.settings.AlertSettings`), validated only by the
command that uses them, so a malformed ALERTS_* value never stops another command. Every action opens an existing
store (written by `run` or `migrate`) and never creates one or its schema. The evaluator itself is built in
`monitor.alerts.service`; the tables are `monitor.cli.alert_check_table` and `monitor.cli.alert_backtest_table`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys
import threading
from datetime import UTC, datetime, timedelta
from typing import IO, TYPE_CHECKING, Any

from monitor.alerts.settings import AlertSettings, load_alert_settings
from monitor.cli.time_flags import duration_flag, parse_time, span_from_args
from monitor.config import Settings, load_settings
from schemas.errors import UsageError

if TYPE_CHECKING:
    # Types only: each command imports what it runs, so building the parser stays cheap.
    from rich.console import Console

    from monitor.alerts.backtest import BacktestReport
    from monitor.alerts.rules import RuleSet
    from monitor.alerts.service import ServiceSettings


def register(subparsers: Any) -> None:
    """Add the `alerts` command group (run, check, accept, backtest) to the CLI's subparsers."""
    from monitor.cli.alerts_parser import add_alert_parsers

    actions = {"run": cmd_run, "check": cmd_check, "accept": cmd_accept, "backtest": cmd_backtest}
    add_alert_parsers(subparsers, actions)


# ---- helpers ---------------------------------------------------------------------------------------------


def alert_settings(ns: argparse.Namespace) -> AlertSettings:
    """The alert settings: the flags given, over ALERTS_* variables; raises `ConfigError` naming the variable."""
    return load_alert_settings(**{name: getattr(ns, name, None) for name in AlertSettings.model_fields})


def _load(ns: argparse.Namespace) -> tuple[Settings, AlertSettings, RuleSet]:
    """Store settings, alert settings (flags over ALERTS_*) and rules; raises `ConfigError`."""
    from monitor.alerts.rules import load_rules
    from monitor.cli.flags import STORE_SETTINGS

    settings = load_settings(
        **{name: getattr(ns, name) for name in STORE_SETTINGS if getattr(ns, name, None) is not None}
    )
    alert = alert_settings(ns)
    return settings, alert, load_rules(alert.rules)


# ---- run ---------------------------------------------------------------------------------------------------


def cmd_run(ns: argparse.Namespace) -> int:
    """`alerts run`: rounds until SIGTERM/SIGINT, or one round with --once."""
    return run_alerts(ns)


def run_alerts(ns: argparse.Namespace, out: IO[str] | None = None) -> int:
    """Run the evaluator named by `ns`; with --once, print what the round evaluated and sent to `out`."""
    from monitor.alerts.service import AlertService
    from monitor.cli.alert_round import round_summary
    from monitor.runtime.logs import configure_logging

    out = out or sys.stdout
    settings, alert, rules = _load(ns)
    configure_logging(settings.process.log_format, settings.process.log_level)
    with AlertService.build(service_settings(settings, alert), rules, once=ns.once, lease=not ns.no_lease) as service:
        if ns.once:
            report = service.run_once()
            out.write("\n".join(round_summary(report, service.replica, service.notifier_names)) + "\n")
            return 0 if report.failed == 0 else 1
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        service.run_until(stop)
        return 0


def service_settings(settings: Settings, alert: AlertSettings) -> ServiceSettings:
    """The slices the alert service is built from: the store's, and the live judge's for the canary."""
    from monitor.alerts.service import ServiceSettings

    redaction = settings.redaction
    return ServiceSettings(alert, settings.store, settings.judge, settings.flow, redaction)


# ---- check -------------------------------------------------------------------------------------------------

JUDGE_USER_SPAN = timedelta(days=7)  # the feedback `alerts check` sets the judge against: the last week's


def cmd_check(ns: argparse.Namespace) -> int:
    """`alerts check`: evaluate once, print, exit 1 with --fail-on-firing if anything fires."""
    return run_check(ns)


def run_check(ns: argparse.Namespace, out: IO[str] | None = None) -> int:
    """Evaluate once against the configured store and print every rule and segment to `out`."""
    from monitor.alerts.engine import evaluate_rules
    from monitor.alerts.queries import fetch_no_content
    from monitor.alerts.service import open_store
    from monitor.alerts.state import STATE_TABLE, StateStore
    from monitor.cli.alert_budget_table import budget_view, print_budget
    from monitor.cli.alert_check_table import check_rows, print_check, print_judge_users
    from monitor.cli.alert_text import NO_CONTENT_WINDOW, console_for, describe_no_content
    from monitor.feedback.agreement_queries import judge_user_agreement

    out = out or sys.stdout
    settings, alert, rules = _load(ns)
    now = parse_time("--at", ns.at, datetime.now(UTC)) if ns.at else datetime.now(UTC)
    if ns.ignore_for:
        rules = rules.model_copy(update={"rules": [r.model_copy(update={"for_": timedelta(0)}) for r in rules.rules]})
    store = open_store(settings.store, *(() if ns.no_state else (STATE_TABLE,)))
    try:
        previous = {} if ns.no_state else StateStore(store).load()
        evaluation = evaluate_rules(store, rules, now, previous, alert.traffic_table)
        no_content = fetch_no_content(store, alert.traffic_table, now - NO_CONTENT_WINDOW, now)
        agreement = [] if ns.json else judge_user_agreement(store, now - JUDGE_USER_SPAN, now)
    finally:
        store.close()
    budget = budget_view(evaluation, rules)
    rows = check_rows(evaluation, [r.name for r in rules.rules], budget)
    if ns.json:
        for row in rows:
            out.write(json.dumps(row, default=str) + "\n")
    else:
        console = console_for(out)
        print_check(rows, now, console)
        if no_content:
            console.print(describe_no_content(no_content), style="yellow")
        print_judge_users(agreement, now - JUDGE_USER_SPAN, now, console)
        print_budget(budget, console)
    firing = any(r["state"] == "firing" for r in rows)
    return 1 if (ns.fail_on_firing and firing) else 0


def cmd_accept(ns: argparse.Namespace) -> int:
    """`alerts accept RULE SEGMENT`: resolve a detector episode and record the accepted level, who and when."""
    return run_accept(ns)


def run_accept(ns: argparse.Namespace, out: IO[str] | None = None) -> int:
    """Accept the new level of one detector segment and save its state; prints one line."""
    import getpass

    from monitor.alerts.accept import accept, parse_segment
    from monitor.alerts.service import open_store
    from monitor.alerts.sources import StoreData
    from monitor.alerts.state import StateStore
    from monitor.cli.alert_text import segment_text

    out = out or sys.stdout
    settings, alert, rules = _load(ns)
    rule = next((r for r in rules.rules if r.name == ns.rule), None)
    if rule is None:
        raise UsageError(f"no rule named {ns.rule} in {alert.rules or 'the default rules'}")
    wanted = parse_segment(ns.segment)
    now = datetime.now(UTC)
    store = open_store(settings.store, writes=True)
    try:
        states = StateStore(store)
        state = accept(
            StoreData(store, alert.traffic_table), rule, states.load(), wanted, ns.by or getpass.getuser(), now
        )
        states.save([state], now)
    finally:
        store.close()
    out.write(f"{rule.name} {segment_text(dict(state.segment))}: {state.note}\n")
    return 0


# ---- backtest ----------------------------------------------------------------------------------------------


def cmd_backtest(ns: argparse.Namespace) -> int:
    """`alerts backtest`: replay rules over history and print when they would have fired and resolved."""
    return run_backtest_cmd(ns)


def run_backtest_cmd(
    ns: argparse.Namespace, out: IO[str] | None = None, progress_console: Console | None = None
) -> int:
    """Run the backtest named by `ns`, showing progress on stderr (or `progress_console`), and print the report to
    `out`."""
    from rich.console import Console

    from monitor.alerts.backtest import check_span, run_backtest
    from monitor.alerts.service import open_store
    from monitor.cli.alert_backtest_table import BacktestProgress

    settings, alert, rules = _load(ns)
    since, until = span_from_args(ns, datetime.now(UTC))
    step = duration_flag("--step", ns.step)
    check_span(since, until, step)  # before the progress display, whose stop would print a blank line first
    rules = _chosen_rules(rules, ns.rule)
    store = open_store(settings.store)
    try:
        with BacktestProgress(progress_console or Console(stderr=True)) as shown:
            report = run_backtest(
                store, rules, since, until, step, alert.traffic_table, progress=shown.update, per_step=ns.per_step
            )
    finally:
        store.close()
    _print_backtest(ns, report, rules, out or sys.stdout)
    return 0


def _chosen_rules(rules: RuleSet, names: list[str] | None) -> RuleSet:
    """The rules named by --rule (all when none is), each keeping its share of the file's budget; raises
    `UsageError` naming the unknown ones."""
    if not names:
        return rules
    unknown = sorted(set(names) - {r.name for r in rules.rules})
    if unknown:
        raise UsageError(f"--rule: no rule named {', '.join(unknown)}")
    return rules.chosen(names)


def _print_backtest(ns: argparse.Namespace, report: BacktestReport, rules: RuleSet, out: IO[str]) -> None:
    """The report: one JSON object with --json, else tables and the false alarms a week expected."""
    from monitor.alerts.engine import Evaluation
    from monitor.cli.alert_backtest_table import episode_row, print_backtest
    from monitor.cli.alert_budget_table import budget_view, print_budget
    from monitor.cli.alert_text import console_for

    summary = report.summary(rules.rules)
    episodes = [episode_row(e) for e in report.fired()]
    # The segments of the last step: what the rules had at the end (none when nothing was evaluated).
    budget = budget_view(report.last or Evaluation(report.until, [], []), rules)
    if ns.json:
        document = {
            "since": report.since.isoformat(),
            "until": report.until.isoformat(),
            "step_s": report.step.total_seconds(),
            "evaluations": report.evaluations,
            "rules": [dataclasses.asdict(r) for r in summary],
            "episodes": episodes,
            "expected_false_alarms_per_week": {k: v["expected_per_week"] for k, v in budget.deployment.items()},
            "deployment": budget.deployment,
            "budget": list(budget.rules.values()),
        }
        out.write(json.dumps(document, default=str) + "\n")
        return
    console = console_for(out)
    print_backtest(report, ns.step, summary, episodes, console)
    print_budget(budget, console, " (the segments of the last step)")
