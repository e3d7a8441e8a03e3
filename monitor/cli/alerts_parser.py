"""The arguments of `relevancy-monitor alerts run|check|accept|backtest`, and their help (what `monitor.cli.alerts`
runs is given to `add_alert_parsers`, so this module holds no command).

The flags of the alert settings are made from `AlertSettings` by `monitor.cli.flags`, as the MONITOR_* ones are from
their slices: `alerts run` takes every one, the other actions those they read. Only each action's own switches and
arguments are written here."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from monitor.alerts.settings import AlertSettings
from monitor.cli.flags import ALERT_EVALUATION_SETTINGS, add_alert_setting_flags, add_renamed_flag, add_store_flags
from monitor.cli.time_flags import add_span_flags

Action = Callable[[argparse.Namespace], int]


def add_alert_parsers(subparsers: Any, actions: Mapping[str, Action]) -> None:
    """Add the `alerts` command group (run, check, accept, backtest) to the CLI's subparsers; `actions` runs each."""
    p = subparsers.add_parser(
        "alerts",
        help="alert on relevancy drops: run the evaluator, check once, or backtest rules over history",
        description="Evaluate alert rules (YAML) against the scores in ClickHouse. See docs/alerting.md.",
    )
    sub = p.add_subparsers(dest="alerts_command", required=True, metavar="ACTION")
    for name, add in (("run", _add_run), ("check", _add_check), ("accept", _add_accept), ("backtest", _add_backtest)):
        add(sub).set_defaults(func=actions[name])


def _add_run(sub: Any) -> argparse.ArgumentParser:
    run: argparse.ArgumentParser = sub.add_parser(
        "run",
        help="evaluate the rules every --interval, keep state in ClickHouse, notify",
        description="Evaluate every rule each --interval, keep each segment's state in alert_state, and notify the "
        "webhook, Slack and Alertmanager targets configured. Logs one line per round; with --once, prints what it "
        "evaluated and sent.",
    )
    _settings_flags(run, AlertSettings.model_fields)
    add_renamed_flag(run, "--notify-timeout", "--notify-timeout-s", "notify_timeout_s")
    run.add_argument(
        "--no-lease",
        action="store_true",
        help="evaluate without taking the lease in alert_leases: only when exactly one evaluator runs (default: take "
        "the lease)",
    )
    run.add_argument(
        "--once",
        action="store_true",
        help="run one round, print what was evaluated and sent, and exit, for cron; a canary run due is judged within "
        "the round (default: rounds until SIGTERM, canary runs in the background)",
    )
    return run


def _add_check(sub: Any) -> argparse.ArgumentParser:
    check: argparse.ArgumentParser = sub.add_parser(
        "check",
        help="evaluate once and print every rule and segment (writes and notifies nothing)",
        description="Evaluate every rule once and print each rule and segment: state, value against baseline, sample "
        "sizes, p-value, and why a segment or a whole rule could not be decided. Reads the stored alert state; "
        "writes and notifies nothing.",
    )
    _settings_flags(check)
    check.add_argument(
        "--json", action="store_true", help="one JSON object per line for each rule and segment (default: a table)"
    )
    check.add_argument(
        "--fail-on-firing", action="store_true", help="exit 1 if any segment is firing, for CI (default: exit 0)"
    )
    check.add_argument(
        "--ignore-for",
        action="store_true",
        help="treat every rule's `for` as 0: fire on the first bad round (default: each rule's `for`)",
    )
    check.add_argument(
        "--no-state",
        action="store_true",
        help="ignore the stored alert state, start every segment inactive (default: read alert_state)",
    )
    check.add_argument(
        "--at",
        default=None,
        metavar="TIME",
        help="evaluate as of this time: ISO 8601 (UTC without offset) or relative as --at=-2h (default: now)",
    )
    return check


def _add_accept(sub: Any) -> argparse.ArgumentParser:
    acc: argparse.ArgumentParser = sub.add_parser(
        "accept",
        help="accept a detector segment's new level: resolve its episode and make the level since it started the "
        "reference",
        description="Resolve the open episode of a detector rule (relevancy_drop, low_score_share_rise) on one segment "
        "and take the level since the episode started as the segment's reference until the change has left the "
        "baseline. Records who and when. A level alert never resolves by taking the regression into its baseline: "
        "this is how a deliberate change is accepted.",
    )
    _settings_flags(acc)
    acc.add_argument("rule", metavar="RULE", help="the detector rule's name (required)")
    acc.add_argument(
        "segment",
        metavar="SEGMENT",
        help="field=value pairs naming the segment: app=support-bot,prompt_version=v13 (required)",
    )
    acc.add_argument(
        "--by", default=None, metavar="NAME", help="who accepts it, recorded in the state (default: the login name)"
    )
    return acc


def _add_backtest(sub: Any) -> argparse.ArgumentParser:
    bt: argparse.ArgumentParser = sub.add_parser(
        "backtest",
        help="replay the rules over stored history; never touches the live alert state",
        description="Evaluate the rules at every --step from --since to --until with state kept in memory, and print "
        "per rule the episodes that fired, the pending ones that cleared, and the delay to firing. Progress goes to "
        "stderr.",
    )
    _settings_flags(bt)
    add_span_flags(bt, None)
    bt.add_argument(
        "--step", default="5m", metavar="DURATION", help="time between evaluations, at least 1m (default: 5m)"
    )
    bt.add_argument(
        "--rule",
        action="append",
        default=None,
        metavar="NAME",
        help="only this rule; repeat for several (default: every rule)",
    )
    bt.add_argument("--json", action="store_true", help="print the report as one JSON object (default: tables)")
    bt.add_argument(
        "--per-step",
        action="store_true",
        help="query every rule at every step instead of reading each rule's history once: slow, to cross-check "
        "(default: off)",
    )
    return bt


def _settings_flags(p: argparse.ArgumentParser, names: Iterable[str] = ALERT_EVALUATION_SETTINGS) -> None:
    """The flags of the alert settings `names` (made from `AlertSettings`) and the store's."""
    add_alert_setting_flags(p, names)
    add_store_flags(p)
