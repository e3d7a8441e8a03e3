"""The arguments of `relevancy-monitor alerts run|check|accept|backtest`, and their help (what `monitor.cli.alerts`
runs is given to `add_alert_parsers`, so this module holds no command)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any

from monitor.alerts.settings import AlertSettings
from monitor.cli.time_flags import add_span_flags


def add_alert_parsers(subparsers: Any, actions: Mapping[str, Callable[[argparse.Namespace], int]]) -> None:
    """Add the `alerts` command group (run, check, accept, backtest) to the CLI's subparsers; `actions` runs each."""
    p = subparsers.add_parser(
        "alerts",
        help="alert on relevancy drops: run the evaluator, check once, or backtest rules over history",
        description="Evaluate alert rules (YAML) against the scores in ClickHouse. See docs/alerting.md.",
    )
    sub = p.add_subparsers(dest="alerts_command", required=True, metavar="ACTION")

    run = sub.add_parser(
        "run",
        help="evaluate the rules every --interval, keep state in ClickHouse, notify",
        description="Evaluate every rule each --interval, keep each segment's state in alert_state, and notify the "
        "webhook, Slack and "
        "Alertmanager targets configured. Logs one line per round; with --once, prints what it evaluated and sent.",
    )
    _common(run)
    run.add_argument(
        "--interval",
        default=None,
        metavar="DURATION",
        help=_alert_help("interval", "time between rounds (30s, 1m, 5m)"),
    )
    run.add_argument(
        "--webhook-url",
        default=None,
        metavar="URL",
        help=_alert_help("webhook_url", "generic JSON webhook", secret=True),
    )
    run.add_argument(
        "--slack-webhook-url",
        default=None,
        metavar="URL",
        help=_alert_help("slack_webhook_url", "Slack-compatible incoming webhook", secret=True),
    )
    run.add_argument(
        "--alertmanager-url",
        default=None,
        metavar="URL",
        help=_alert_help("alertmanager_url", "Alertmanager base URL; alerts go to /api/v2/alerts"),
    )
    run.add_argument(
        "--generator-url",
        default=None,
        metavar="URL",
        help=_alert_help("generator_url", "link sent as generatorURL (a dashboard)"),
    )
    run.add_argument(
        "--notify-timeout",
        dest="notify_timeout_s",
        default=None,
        metavar="SECONDS",
        help=_alert_help(
            "notify_timeout_s",
            "seconds per HTTP attempt of a notification (two retries on 429, 5xx and connection errors)",
        ),
    )
    run.add_argument(
        "--replica-id",
        default=None,
        metavar="NAME",
        help=_alert_help("replica_id", "name of this replica in the lease table"),
    )
    run.add_argument(
        "--no-lease",
        action="store_true",
        help="evaluate without taking the lease in alert_leases: only when exactly one evaluator runs (default: take "
        "the lease)",
    )
    run.add_argument(
        "--metrics-port",
        default=None,
        metavar="PORT",
        help=_alert_help("metrics_port", "Prometheus /metrics, /healthz and /readyz port", "0 (off)"),
    )
    run.add_argument(
        "--canary-interval",
        default=None,
        metavar="DURATION",
        help=_alert_help(
            "canary_interval",
            "how often the leader re-scores the canary's labelled pairs with the live judge (MONITOR_JUDGE*); 0 or "
            "off: never",
        ),
    )
    run.add_argument(
        "--canary-file",
        default=None,
        metavar="FILE",
        help=_alert_help("canary_file", "JSONL labelled pairs the canary re-scores (the format of calibrate --labels)"),
    )
    run.add_argument(
        "--once",
        action="store_true",
        help="run one round, print what was evaluated and sent, and exit, for cron; a canary run due is judged within "
        "the round "
        "(default: rounds until SIGTERM, canary runs in the background)",
    )
    run.set_defaults(func=actions["run"])

    check = sub.add_parser(
        "check",
        help="evaluate once and print every rule and segment (writes and notifies nothing)",
        description="Evaluate every rule once and print each rule and segment: state, value against baseline, sample "
        "sizes, p-value, and "
        "why a segment or a whole rule could not be decided. Reads the stored alert state; writes and notifies "
        "nothing.",
    )
    _common(check)
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
    check.set_defaults(func=actions["check"])

    acc = sub.add_parser(
        "accept",
        help="accept a detector segment's new level: resolve its episode and make the level since it started the "
        "reference",
        description="Resolve the open episode of a detector rule (relevancy_drop, low_score_share_rise) on one segment "
        "and take the "
        "level since the episode started as the segment's reference until the change has left the baseline. Records "
        "who and when. "
        "A level alert never resolves by taking the regression into its baseline: this is how a deliberate change is "
        "accepted.",
    )
    _common(acc)
    acc.add_argument("rule", metavar="RULE", help="the detector rule's name (required)")
    acc.add_argument(
        "segment",
        metavar="SEGMENT",
        help="field=value pairs naming the segment: app=support-bot,prompt_version=v13 (required)",
    )
    acc.add_argument(
        "--by", default=None, metavar="NAME", help="who accepts it, recorded in the state (default: the login name)"
    )
    acc.set_defaults(func=actions["accept"])

    bt = sub.add_parser(
        "backtest",
        help="replay the rules over stored history; never touches the live alert state",
        description="Evaluate the rules at every --step from --since to --until with state kept in memory, and print "
        "per rule the episodes "
        "that fired, the pending ones that cleared, and the delay to firing. Progress goes to stderr.",
    )
    _common(bt)
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
    bt.set_defaults(func=actions["backtest"])


def _common(p: argparse.ArgumentParser) -> None:
    from monitor.cli.flags import add_store_flags

    p.add_argument("--rules", default=None, metavar="FILE", help=_alert_help("rules", "rules YAML file"))
    p.add_argument(
        "--traffic-table",
        default=None,
        metavar="NAME",
        help=_alert_help(
            "traffic_table",
            "table of consumed and sampled events per minute, in the database (coverage and upstream rules)",
        ),
    )
    add_store_flags(p)


def _alert_help(name: str, what: str, default: str | None = None, *, secret: bool = False) -> str:
    """Help of an ALERTS_* flag: what it is, its variable and its default (the setting's own unless `default` says),
    written like the MONITOR_* flags' (`monitor.cli.flags.setting_help`)."""
    from monitor.devtools.config_reference import default_text

    shown = default or default_text(AlertSettings.model_fields[name]) or "unset"
    keep = "; keep it in the environment, flags show in ps" if secret else ""
    return f"{what} [env ALERTS_{name.upper()}; default: {shown}{keep}]".replace("`", "").replace("%", "%%")
