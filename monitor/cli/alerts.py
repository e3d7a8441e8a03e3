"""`relevancy-monitor alerts run|check|backtest`.

ClickHouse settings come from `monitor.config.Settings` (MONITOR_CLICKHOUSE_* or the flags below); the alert
options are flags or ALERTS_* environment variables (`monitor.config.AlertSettings`), validated only by the
command that uses them, so a malformed ALERTS_* value never stops another command. Every action opens an existing
store (written by `run` or `migrate`) and never creates one or its schema."""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys
import threading
from datetime import UTC, datetime, timedelta
from typing import IO, TYPE_CHECKING, Any, TypedDict

from monitor.config import AlertSettings, Settings, load_alert_settings, load_settings
from schemas.errors import UsageError

if TYPE_CHECKING:
    # Types only: each command imports what it runs, so building the parser stays cheap.
    from rich.console import Console

    from monitor.alerts.backtest import BacktestReport, Episode, RuleSummary
    from monitor.alerts.engine import Evaluation
    from monitor.alerts.notifiers import Notifier
    from monitor.alerts.rules import RuleSet
    from monitor.runtime.store import ClickHouseStore


def register(subparsers: Any) -> None:
    """Add the `alerts` command group (run, check, backtest) to the CLI's subparsers."""
    p = subparsers.add_parser(
        "alerts",
        help="alert on relevancy drops: run the evaluator, check once, or backtest rules over history",
        description="Evaluate alert rules (YAML) against the scores in ClickHouse. See docs/alerting.md.",
    )
    sub = p.add_subparsers(dest="alerts_command", required=True, metavar="ACTION")

    run = sub.add_parser("run", help="evaluate the rules every --interval, keep state in ClickHouse, notify")
    _common(run)
    run.add_argument("--interval", default=None, help="time between rounds [env ALERTS_INTERVAL, default 1m]")
    run.add_argument("--webhook-url", default=None, help="generic JSON webhook [env ALERTS_WEBHOOK_URL]")
    run.add_argument("--slack-webhook-url", default=None, help="Slack-compatible incoming webhook [env ALERTS_SLACK_WEBHOOK_URL]")
    run.add_argument("--alertmanager-url", default=None, help="Alertmanager base URL, alerts go to /api/v2/alerts [env ALERTS_ALERTMANAGER_URL]")
    run.add_argument("--generator-url", default=None, help="link sent as generatorURL (a dashboard) [env ALERTS_GENERATOR_URL]")
    run.add_argument("--notify-timeout", dest="notify_timeout_s", default=None, help="seconds per HTTP attempt [env ALERTS_NOTIFY_TIMEOUT_S]")
    run.add_argument("--replica-id", default=None, help="name of this replica in the lease table (default host:pid:random)")
    run.add_argument("--no-lease", action="store_true", help="do not take the lease (only when exactly one evaluator runs)")
    run.add_argument("--metrics-port", default=None, help="Prometheus /metrics port, 0 = off [env ALERTS_METRICS_PORT]")
    run.add_argument("--once", action="store_true", help="run one round and exit (cron)")
    run.set_defaults(func=cmd_run)

    check = sub.add_parser("check", help="evaluate once and print every rule and segment (writes and notifies nothing)")
    _common(check)
    check.add_argument("--json", action="store_true", help="one JSON object per rule and segment")
    check.add_argument("--fail-on-firing", action="store_true", help="exit 1 if any segment is firing (for CI)")
    check.add_argument("--ignore-for", action="store_true", help="treat every rule's `for` as 0 (fire on the first bad round)")
    check.add_argument("--no-state", action="store_true", help="ignore the stored alert state (start every segment inactive)")
    check.add_argument("--at", default=None, help="evaluate as of this time: ISO 8601, or relative as --at=-2h; default now")
    check.set_defaults(func=cmd_check)

    bt = sub.add_parser("backtest", help="replay the rules over stored history; never touches the live alert state")
    _common(bt)
    bt.add_argument("--since", required=True, help="start: ISO 8601, or relative as --since=-7d")
    bt.add_argument("--until", default="now", help="end: ISO 8601, relative (--until=-1d), or now (default)")
    bt.add_argument("--step", default="5m", help="time between evaluations (default 5m)")
    bt.add_argument("--rule", action="append", default=None, help="only this rule (repeatable)")
    bt.add_argument("--json", action="store_true", help="print the report as JSON")
    bt.set_defaults(func=cmd_backtest)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rules", default=None, help="rules YAML [env ALERTS_RULES; default: the shipped default rules]")
    p.add_argument("--traffic-table", default=None, help="traffic table in the database [env ALERTS_TRAFFIC_TABLE]")
    p.add_argument("--clickhouse-url", default=None, help="[env MONITOR_CLICKHOUSE_URL]")
    p.add_argument("--clickhouse-database", default=None, help="[env MONITOR_CLICKHOUSE_DATABASE]")
    p.add_argument("--clickhouse-table", default=None, help="[env MONITOR_CLICKHOUSE_TABLE]")


# ---- helpers ---------------------------------------------------------------------------------------------

_ALERT_FLAGS = (
    "rules",
    "traffic_table",
    "interval",
    "webhook_url",
    "slack_webhook_url",
    "alertmanager_url",
    "generator_url",
    "notify_timeout_s",
    "replica_id",
    "metrics_port",
)


def alert_settings(ns: argparse.Namespace) -> AlertSettings:
    """The alert settings: the flags given, over ALERTS_* variables; raises `ConfigError` naming the variable."""
    return load_alert_settings(**{name: getattr(ns, name, None) for name in _ALERT_FLAGS})


def _load(ns: argparse.Namespace) -> tuple[Settings, AlertSettings, RuleSet]:
    """Store settings, alert settings (flags over ALERTS_*) and rules; raises `ConfigError`."""
    from monitor.alerts.rules import load_rules

    settings = load_settings(clickhouse_url=ns.clickhouse_url, clickhouse_database=ns.clickhouse_database, clickhouse_table=ns.clickhouse_table)
    alert = alert_settings(ns)
    return settings, alert, load_rules(alert.rules)


def _open_store(settings: Settings, *tables: str) -> ClickHouseStore:
    """The existing store, with the scores table and `tables` present; creates nothing and issues no DDL."""
    from monitor.runtime.store import ClickHouseStore

    s = settings.store
    store = ClickHouseStore.from_settings(s)
    try:
        store.open_existing(*tables)
    except BaseException:
        store.close()
        raise
    return store


def _duration(flag: str, value: str) -> timedelta:
    from monitor.alerts.durations import parse_duration

    try:
        d = parse_duration(value)
    except ValueError as e:
        raise UsageError(f"{flag}: {e}") from None
    if d.total_seconds() <= 0:
        raise UsageError(f"{flag}: must be positive")
    return d


def parse_time(flag: str, value: str, now: datetime) -> datetime:
    """ISO 8601 (UTC when no offset), `now`, or a relative duration like `-2d` / `2d` (before now)."""
    from monitor.alerts.durations import parse_duration

    text = value.strip()
    if text == "now":
        return now
    try:
        return now - parse_duration(text.lstrip("-"))
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{flag}: {value!r} is neither ISO 8601 (2026-11-29T09:00:00Z) nor relative (-2h, -7d)") from None
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def _num(v: float | None, digits: int = 4) -> str:
    return "" if v is None else f"{v:.{digits}g}"


# ---- run ---------------------------------------------------------------------------------------------------


def build_notifiers(alert: AlertSettings) -> list[Notifier]:
    """Notifiers named by the alert settings."""
    from monitor.alerts.notifiers import AlertmanagerNotifier, SlackNotifier, WebhookNotifier

    out: list[Notifier] = []
    timeout = alert.notify_timeout_s
    if alert.webhook_url:
        out.append(WebhookNotifier(alert.webhook_url, timeout=timeout))
    if alert.slack_webhook_url:
        out.append(SlackNotifier(alert.slack_webhook_url, timeout=timeout))
    if alert.alertmanager_url:
        # endsAt a few rounds ahead: a stopped evaluator's alerts expire by themselves in Alertmanager.
        ttl = max(alert.interval * 4, timedelta(minutes=3))
        out.append(AlertmanagerNotifier(alert.alertmanager_url, resend_ttl=ttl, generator_url=alert.generator_url, timeout=timeout))
    return out


def cmd_run(ns: argparse.Namespace) -> int:
    """`alerts run`: rounds until SIGTERM/SIGINT."""
    from monitor.alerts.engine import AlertRunner
    from monitor.alerts.state import LEASE_TABLE, STATE_TABLE
    from monitor.runtime.logs import configure_logging

    settings, alert, rules = _load(ns)
    configure_logging(settings.log_format, settings.log_level)
    notifiers = build_notifiers(alert)
    store = _open_store(settings, STATE_TABLE, *(() if ns.no_lease else (LEASE_TABLE,)))
    runner = AlertRunner(
        store, rules, notifiers, traffic_table=alert.traffic_table, replica=alert.replica_id, lease_ttl=None if ns.no_lease else alert.interval * 3
    )
    try:
        if ns.once:
            report = runner.run_once()
            return 0 if report.failed == 0 else 1
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        runner.run_forever(alert.interval, stop, metrics_port=alert.metrics_port)
        return 0
    finally:
        store.close()


# ---- check -------------------------------------------------------------------------------------------------


def cmd_check(ns: argparse.Namespace) -> int:
    """`alerts check`: evaluate once, print, exit 1 with --fail-on-firing if anything fires."""
    return run_check(ns)


def run_check(ns: argparse.Namespace, out: IO[str] | None = None) -> int:
    """Evaluate once against the configured store and print every rule and segment to `out`."""
    from monitor.alerts.engine import evaluate_rules
    from monitor.alerts.rules import RuleSet
    from monitor.alerts.state import STATE_TABLE, StateStore

    out = out or sys.stdout
    settings, alert, rules = _load(ns)
    now = parse_time("--at", ns.at, datetime.now(UTC)) if ns.at else datetime.now(UTC)
    if ns.ignore_for:
        rules = RuleSet(rules=[r.model_copy(update={"for_": timedelta(0)}) for r in rules.rules])
    store = _open_store(settings, *(() if ns.no_state else (STATE_TABLE,)))
    try:
        previous = {} if ns.no_state else StateStore(store).load()
        evaluation = evaluate_rules(store, rules, now, previous, alert.traffic_table)
    finally:
        store.close()
    rows = check_rows(evaluation)
    if ns.json:
        for row in rows:
            out.write(json.dumps(row, default=str) + "\n")
    else:
        _print_check(rows, now, out)
    firing = any(r["state"] == "firing" for r in rows)
    return 1 if (ns.fail_on_firing and firing) else 0


class CheckRow(TypedDict):
    """One rule and segment of `alerts check` (or a rule whose data could not be read), as printed and as JSON."""

    rule: str
    severity: str
    metric: str
    segment: dict[str, str]
    judge: str
    state: str  # the alert state, or "error"
    since: str | None
    value: float | None
    baseline: float | None
    n_current: int
    n_baseline: int
    p_value: float | None
    test: str
    sufficient: bool
    note: str


def check_rows(evaluation: Evaluation) -> list[CheckRow]:
    """One row per rule and segment (and per failed rule) for printing."""
    rows: list[CheckRow] = []
    for r in evaluation.results:
        s, o = r.state, r.observation
        rows.append(
            CheckRow(
                rule=r.rule.name,
                severity=r.rule.severity,
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
                sufficient=o.sufficient,
                note=s.note,
            )
        )
    for e in evaluation.errors:
        rows.append(
            CheckRow(
                rule=e.rule.name,
                severity=e.rule.severity,
                metric=e.rule.metric,
                segment={},
                judge="",
                state="error",
                since=None,
                value=None,
                baseline=None,
                n_current=0,
                n_baseline=0,
                p_value=None,
                test="",
                sufficient=False,
                note=e.error,
            )
        )
    return rows


_STATE_STYLE = {"firing": "bold red", "pending": "yellow", "resolved": "green", "error": "magenta", "inactive": ""}


def _print_check(rows: list[CheckRow], now: datetime, out: IO[str]) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"alert rules at {now.isoformat(timespec='seconds')}", show_lines=False)
    for col in ("rule", "severity", "segment", "state", "value", "baseline", "n now/base", "p", "note"):
        table.add_column(col, overflow="fold")
    for r in rows:
        style = _STATE_STYLE.get(r["state"], "")
        state = r["state"] if r["sufficient"] or r["state"] == "error" else f"{r['state']} (no data)"
        table.add_row(
            r["rule"],
            r["severity"],
            escape(_segment_text(r["segment"])),
            f"[{style}]{state}[/{style}]" if style else state,
            _num(r["value"]),
            _num(r["baseline"]),
            f"{r['n_current']}/{r['n_baseline']}",
            _num(r["p_value"], 2),
            escape(r["note"] or ""),
        )
    console = _console(out)
    console.print(table)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    console.print(", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no segments", style="dim")


def _segment_text(segment: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in segment.items()) or "all"


def _console(out: IO[str]) -> Console:
    from rich.console import Console

    return Console(file=out, width=max(160, Console(file=out).width))


# ---- backtest ----------------------------------------------------------------------------------------------


def cmd_backtest(ns: argparse.Namespace) -> int:
    """`alerts backtest`: replay rules over history and print when they would have fired and resolved."""
    return run_backtest_cmd(ns)


def run_backtest_cmd(ns: argparse.Namespace, out: IO[str] | None = None) -> int:
    """Run the backtest named by `ns` and print the report to `out`."""
    from monitor.alerts.backtest import run_backtest
    from monitor.alerts.rules import RuleSet

    out = out or sys.stdout
    settings, alert, rules = _load(ns)
    now = datetime.now(UTC)
    since, until = parse_time("--since", ns.since, now), parse_time("--until", ns.until, now)
    step = _duration("--step", ns.step)
    if ns.rule:
        unknown = sorted(set(ns.rule) - {r.name for r in rules.rules})
        if unknown:
            raise UsageError(f"--rule: no rule named {', '.join(unknown)}")
        rules = RuleSet(rules=[r for r in rules.rules if r.name in ns.rule])
    store = _open_store(settings)
    try:
        report = run_backtest(store, rules, since, until, step, alert.traffic_table)
    finally:
        store.close()
    summary = report.summary(rules.rules)
    episodes = [episode_row(e) for e in report.fired()]
    if ns.json:
        out.write(
            json.dumps(
                {
                    "since": since.isoformat(),
                    "until": until.isoformat(),
                    "step_s": step.total_seconds(),
                    "evaluations": report.evaluations,
                    "rules": [dataclasses.asdict(r) for r in summary],
                    "episodes": episodes,
                },
                default=str,
            )
            + "\n"
        )
    else:
        _print_backtest(report, ns.step, summary, episodes, out)
    return 0


class EpisodeRow(TypedDict):
    """One fired episode of `alerts backtest`, as printed and as JSON."""

    rule: str
    segment: dict[str, str]
    severity: str
    pending_at: str
    fired_at: str | None
    resolved_at: str | None  # None while still firing at the end
    delay_s: float
    value: float | None
    baseline: float | None
    p_value: float | None
    n: int
    n_baseline: int
    note: str  # at the time it fired: which baseline was used (its own, a parent's, the version before)


def episode_row(e: Episode) -> EpisodeRow:
    """The row of one episode: times in ISO 8601, the values at the time it fired."""
    return EpisodeRow(
        rule=e.rule,
        segment=dict(e.segment),
        severity=e.severity,
        pending_at=e.pending_at.isoformat(),
        fired_at=e.fired_at.isoformat() if e.fired_at else None,
        resolved_at=e.resolved_at.isoformat() if e.resolved_at else None,
        delay_s=e.delay.total_seconds() if e.delay else 0.0,
        value=e.value_at_fire,
        baseline=e.baseline_at_fire,
        p_value=e.p_value_at_fire,
        n=e.n_at_fire,
        n_baseline=e.n_baseline_at_fire,
        note=e.note_at_fire,
    )


def _print_backtest(report: BacktestReport, step: str, summary: list[RuleSummary], episodes: list[EpisodeRow], out: IO[str]) -> None:
    from rich.markup import escape
    from rich.table import Table

    console = _console(out)
    t = Table(
        title=f"backtest {report.since.isoformat(timespec='minutes')} .. {report.until.isoformat(timespec='minutes')}, "
        f"step {step}, {report.evaluations} evaluations"
    )
    for col in ("rule", "fired", "still firing", "suppressed (pending, cleared)", "mean delay", "errors"):
        t.add_column(col)
    for s in summary:
        delay = "" if s.mean_delay_s is None else f"{s.mean_delay_s / 60:.1f} min"
        t.add_row(s.rule, str(s.fired), str(s.still_firing), str(s.suppressed), delay, str(s.errors))
    console.print(t)
    if episodes:
        e_t = Table(title="episodes")
        for col in ("rule", "segment", "pending at", "fired at", "resolved at", "value", "baseline", "n now/base", "p", "note"):
            e_t.add_column(col, overflow="fold")
        for e in episodes:
            e_t.add_row(
                e["rule"],
                escape(_segment_text(e["segment"])),
                e["pending_at"],
                e["fired_at"] or "",
                e["resolved_at"] or "(still firing)",
                _num(e["value"]),
                _num(e["baseline"]),
                f"{e['n']}/{e['n_baseline']}",
                _num(e["p_value"], 2),
                escape(e["note"]),
            )
        console.print(e_t)
