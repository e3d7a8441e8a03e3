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

    from monitor.alerts.backtest import BacktestReport, Episode, Progress, RuleSummary
    from monitor.alerts.engine import Evaluation, RoundReport
    from monitor.alerts.notifiers import Notifier
    from monitor.alerts.rules import Rule, RuleSet
    from monitor.canary.model import CanaryTick
    from monitor.canary.service import Canary
    from monitor.store.connection import ClickHouseStore


def register(subparsers: Any) -> None:
    """Add the `alerts` command group (run, check, accept, backtest) to the CLI's subparsers."""
    p = subparsers.add_parser(
        "alerts",
        help="alert on relevancy drops: run the evaluator, check once, or backtest rules over history",
        description="Evaluate alert rules (YAML) against the scores in ClickHouse. See docs/alerting.md.",
    )
    sub = p.add_subparsers(dest="alerts_command", required=True, metavar="ACTION")

    run = sub.add_parser(
        "run",
        help="evaluate the rules every --interval, keep state in ClickHouse, notify",
        description="Evaluate every rule each --interval, keep each segment's state in alert_state, and notify the webhook, Slack and "
        "Alertmanager targets configured. Logs one line per round; with --once, prints what it evaluated and sent.",
    )
    _common(run)
    run.add_argument("--interval", default=None, metavar="DURATION", help=_alert_help("interval", "time between rounds (30s, 1m, 5m)"))
    run.add_argument("--webhook-url", default=None, metavar="URL", help=_alert_help("webhook_url", "generic JSON webhook", secret=True))
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
    run.add_argument("--generator-url", default=None, metavar="URL", help=_alert_help("generator_url", "link sent as generatorURL (a dashboard)"))
    run.add_argument(
        "--notify-timeout",
        dest="notify_timeout_s",
        default=None,
        metavar="SECONDS",
        help=_alert_help("notify_timeout_s", "seconds per HTTP attempt of a notification (two retries on 429, 5xx and connection errors)"),
    )
    run.add_argument("--replica-id", default=None, metavar="NAME", help=_alert_help("replica_id", "name of this replica in the lease table"))
    run.add_argument(
        "--no-lease",
        action="store_true",
        help="evaluate without taking the lease in alert_leases: only when exactly one evaluator runs (default: take the lease)",
    )
    run.add_argument(
        "--metrics-port", default=None, metavar="PORT", help=_alert_help("metrics_port", "Prometheus /metrics, /healthz and /readyz port", "0 (off)")
    )
    run.add_argument(
        "--canary-interval",
        default=None,
        metavar="DURATION",
        help=_alert_help(
            "canary_interval", "how often the leader re-scores the canary's labelled pairs with the live judge (MONITOR_JUDGE*); 0 or off: never"
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
        help="run one round, print what was evaluated and sent, and exit, for cron; a canary run due is judged within the round "
        "(default: rounds until SIGTERM, canary runs in the background)",
    )
    run.set_defaults(func=cmd_run)

    check = sub.add_parser(
        "check",
        help="evaluate once and print every rule and segment (writes and notifies nothing)",
        description="Evaluate every rule once and print each rule and segment: state, value against baseline, sample sizes, p-value, and "
        "why a segment or a whole rule could not be decided. Reads the stored alert state; writes and notifies nothing.",
    )
    _common(check)
    check.add_argument("--json", action="store_true", help="one JSON object per line for each rule and segment (default: a table)")
    check.add_argument("--fail-on-firing", action="store_true", help="exit 1 if any segment is firing, for CI (default: exit 0)")
    check.add_argument(
        "--ignore-for", action="store_true", help="treat every rule's `for` as 0: fire on the first bad round (default: each rule's `for`)"
    )
    check.add_argument(
        "--no-state", action="store_true", help="ignore the stored alert state, start every segment inactive (default: read alert_state)"
    )
    check.add_argument(
        "--at", default=None, metavar="TIME", help="evaluate as of this time: ISO 8601 (UTC without offset) or relative as --at=-2h (default: now)"
    )
    check.set_defaults(func=cmd_check)

    acc = sub.add_parser(
        "accept",
        help="accept a detector segment's new level: resolve its episode and make the level since it started the reference",
        description="Resolve the open episode of a detector rule (relevancy_drop, low_score_share_rise) on one segment and take the "
        "level since the episode started as the segment's reference until the change has left the baseline. Records who and when. "
        "A level alert never resolves by taking the regression into its baseline: this is how a deliberate change is accepted.",
    )
    _common(acc)
    acc.add_argument("rule", metavar="RULE", help="the detector rule's name (required)")
    acc.add_argument("segment", metavar="SEGMENT", help="field=value pairs naming the segment: app=support-bot,prompt_version=v13 (required)")
    acc.add_argument("--by", default=None, metavar="NAME", help="who accepts it, recorded in the state (default: the login name)")
    acc.set_defaults(func=cmd_accept)

    bt = sub.add_parser(
        "backtest",
        help="replay the rules over stored history; never touches the live alert state",
        description="Evaluate the rules at every --step from --since to --until with state kept in memory, and print per rule the episodes "
        "that fired, the pending ones that cleared, and the delay to firing. Progress goes to stderr.",
    )
    _common(bt)
    bt.add_argument("--since", required=True, metavar="TIME", help="start: ISO 8601 (UTC without offset) or relative as --since=-7d (required)")
    bt.add_argument("--until", default="now", metavar="TIME", help="end: ISO 8601, relative (--until=-1d), or now (default: now)")
    bt.add_argument("--step", default="5m", metavar="DURATION", help="time between evaluations, at least 1m (default: 5m)")
    bt.add_argument("--rule", action="append", default=None, metavar="NAME", help="only this rule; repeat for several (default: every rule)")
    bt.add_argument("--json", action="store_true", help="print the report as one JSON object (default: tables)")
    bt.add_argument(
        "--per-step",
        action="store_true",
        help="query every rule at every step instead of reading each rule's history once: slow, to cross-check (default: off)",
    )
    bt.set_defaults(func=cmd_backtest)


def _common(p: argparse.ArgumentParser) -> None:
    from monitor.cli.flags import add_store_flags

    p.add_argument("--rules", default=None, metavar="FILE", help=_alert_help("rules", "rules YAML file"))
    p.add_argument(
        "--traffic-table",
        default=None,
        metavar="NAME",
        help=_alert_help("traffic_table", "table of consumed and sampled events per minute, in the database (coverage and upstream rules)"),
    )
    add_store_flags(p)


def _alert_help(name: str, what: str, default: str | None = None, *, secret: bool = False) -> str:
    """Help of an ALERTS_* flag: what it is, its variable and its default (the setting's own unless `default` says),
    written like the MONITOR_* flags' (`monitor.cli.flags.setting_help`)."""
    from monitor.devtools.config_reference import default_text

    shown = default or default_text(AlertSettings.model_fields[name]) or "unset"
    keep = "; keep it in the environment, flags show in ps" if secret else ""
    return f"{what} [env ALERTS_{name.upper()}; default: {shown}{keep}]".replace("`", "").replace("%", "%%")


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
    "canary_interval",
    "canary_file",
)


def alert_settings(ns: argparse.Namespace) -> AlertSettings:
    """The alert settings: the flags given, over ALERTS_* variables; raises `ConfigError` naming the variable."""
    return load_alert_settings(**{name: getattr(ns, name, None) for name in _ALERT_FLAGS})


def _load(ns: argparse.Namespace) -> tuple[Settings, AlertSettings, RuleSet]:
    """Store settings, alert settings (flags over ALERTS_*) and rules; raises `ConfigError`."""
    from monitor.alerts.rules import load_rules
    from monitor.cli.flags import STORE_SETTINGS

    settings = load_settings(**{name: getattr(ns, name) for name in STORE_SETTINGS if getattr(ns, name, None) is not None})
    alert = alert_settings(ns)
    return settings, alert, load_rules(alert.rules)


def _open_store(settings: Settings, *tables: str, writes: bool = False) -> ClickHouseStore:
    """The existing store, with the scores table and `tables` present and its schema current; creates nothing and
    issues no DDL. Read-only (the engine refuses writes) unless `writes` (the alert service's state and leases). A
    schema behind this release is one line naming `migrate`: the rules read its newer tables."""
    from monitor.store.connection import ClickHouseStore
    from monitor.store.migrations import Migrations

    s = settings.store
    store = ClickHouseStore.from_settings(s)
    try:
        if writes:
            Migrations(store).ensure(migrate=False)
        else:
            store.open_for_reads(*tables)
            Migrations(store).require_current()
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
    from monitor.alerts.poster import JsonPoster

    out: list[Notifier] = []
    poster = JsonPoster(timeout_s=alert.notify_timeout_s)
    if alert.webhook_url:
        out.append(WebhookNotifier(alert.webhook_url, poster=poster))
    if alert.slack_webhook_url:
        out.append(SlackNotifier(alert.slack_webhook_url, poster=poster))
    if alert.alertmanager_url:
        # endsAt a few rounds ahead: a stopped evaluator's alerts expire by themselves in Alertmanager.
        ttl = max(alert.interval * 4, timedelta(minutes=3))
        out.append(AlertmanagerNotifier(alert.alertmanager_url, resend_ttl=ttl, generator_url=alert.generator_url, poster=poster))
    return out


def cmd_run(ns: argparse.Namespace) -> int:
    """`alerts run`: rounds until SIGTERM/SIGINT, or one round with --once."""
    return run_alerts(ns)


def run_alerts(ns: argparse.Namespace, out: IO[str] | None = None) -> int:
    """Run the evaluator named by `ns`; with --once, print what the round evaluated and sent to `out`."""
    from monitor.alerts.engine import AlertRunner
    from monitor.runtime.logs import configure_logging

    out = out or sys.stdout
    settings, alert, rules = _load(ns)
    configure_logging(settings.log_format, settings.log_level)
    notifiers = build_notifiers(alert)
    store = _open_store(settings, writes=True)
    try:
        canary = build_canary(settings, alert, store, background=not ns.once) if alert.canary_on else None
    except BaseException:
        store.close()
        raise
    runner = AlertRunner(
        store,
        rules,
        notifiers,
        traffic_table=alert.traffic_table,
        replica=alert.replica_id,
        lease_ttl=None if ns.no_lease else alert.interval * 3,
        canary=canary,
    )
    try:
        if ns.once:
            report = runner.run_once()
            out.write("\n".join(round_summary(report, runner.state_store.writer, [n.name for n in notifiers])) + "\n")
            return 0 if report.failed == 0 else 1
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        runner.run_forever(alert.interval, stop, metrics_port=alert.metrics_port)
        return 0
    finally:
        if canary is not None:
            canary.close()
        store.close()


def build_canary(settings: Settings, alert: AlertSettings, store: ClickHouseStore, *, background: bool) -> Canary:
    """The canary of `alerts run`: the live judge's settings (MONITOR_JUDGE*, the API key, flow limits, redaction) on
    ALERTS_CANARY_FILE or the shipped golden set; raises `ConfigError` (no API key) or `UsageError` (the labels file)."""
    import structlog

    from monitor.calibration.labels import golden_path
    from monitor.canary.service import Canary, CanarySettings

    canary_settings = CanarySettings(
        interval=alert.canary_interval,
        labels_file=alert.canary_file or golden_path(),
        judge=settings.judge_client,
        flow=settings.flow,
        redaction=settings.redaction if settings.redact else None,
    )
    canary = Canary(store, canary_settings, background=background)
    structlog.get_logger("monitor.canary").info(
        "canary on",
        judge_id=canary.judge.judge_id,
        labels=canary.labelled.name,
        pairs=len(canary.labelled.pairs),
        interval_s=alert.canary_interval.total_seconds(),
    )
    return canary


def round_summary(report: RoundReport, replica: str, notifiers: list[str]) -> list[str]:
    """What one round evaluated and sent, in a few lines for people (`run --once`)."""
    now = report.evaluation.now if report.evaluation is not None else datetime.now(UTC)
    head = f"alerts run at {now.isoformat(timespec='seconds')} (replica {replica})"
    if not report.leader or report.evaluation is None:
        return [head, "not the leader: another replica holds the lease (alert_leases); nothing evaluated or sent"]
    c = report.evaluation.counts()
    quiet = c.segments - c.firing - c.pending - c.resolved
    lines = [
        head,
        f"evaluated {_plural(c.rules, 'rule')}, {_plural(c.segments, 'segment')}: {c.firing} firing ({c.newly_firing} new), {c.pending} pending, "
        f"{c.resolved} resolved this round, {quiet} quiet",
        f"no decision (too little data): {_plural(c.no_decision, 'segment')}, and {_plural(c.empty_rules, 'rule')} without any segment"
        " (`alerts check` says why)",
    ]
    if report.canary is not None:
        lines.append(canary_line(report.canary))
    lines += [f"rule {e.rule.name} failed: {e.error}" for e in report.evaluation.errors]
    if not notifiers:
        lines.append("no notifier configured: nothing sent (set --webhook-url, --slack-webhook-url or --alertmanager-url, or ALERTS_*)")
        return lines
    sent = []
    for d in report.deliveries:
        text = f"{d.notifier} {d.sent} sent"
        if d.failed:
            text += f", {d.failed} failed ({d.error})"
        sent.append(text)
    lines.append(f"notifications: {'; '.join(sent)}; state rows saved: {report.saved}")
    return lines


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def canary_line(tick: CanaryTick) -> str:
    """What the canary did in a round, in one line: the run written with its figures and cost, one judging, or when
    the next is due; and what failed."""
    parts = []
    w = tick.written
    if w is not None:
        f = w.figures
        if w.heuristic:
            cost = "no cost (an offline heuristic)"
        else:
            usd = "unknown (no price for the model)" if w.cost_usd is None else f"${w.cost_usd:.4f}"
            cost = f"cost {usd} for {_plural(w.calls, 'judge call')}"
        parts.append(
            f"run {w.run_id} written ({w.judge} judge {w.judge_id}, {w.labels}): {_plural(f.pairs, 'pair')}, {_plural(f.errors, 'error')}; "
            f"rho {_figure(f.spearman)}, kappa {_figure(f.kappa)}, mean shift {_figure(f.mean_shift, signed=True)}; {cost}, {w.seconds:.1f}s"
        )
    if tick.running:
        parts.append("a run is judging in the background (written at a later round)")
    elif tick.next_due is not None:
        parts.append(f"next run due at {tick.next_due.isoformat(timespec='seconds')}")
    if tick.failed:
        parts.append(f"failed: {tick.failed}")
    return "canary: " + ("; ".join(parts) or "nothing to do")


def _figure(v: float | None, *, signed: bool = False) -> str:
    if v is None:
        return "undefined"
    return f"{v:+.3f}" if signed else f"{v:.3f}"


# ---- check -------------------------------------------------------------------------------------------------


def cmd_check(ns: argparse.Namespace) -> int:
    """`alerts check`: evaluate once, print, exit 1 with --fail-on-firing if anything fires."""
    return run_check(ns)


def run_check(ns: argparse.Namespace, out: IO[str] | None = None) -> int:
    """Evaluate once against the configured store and print every rule and segment to `out`."""
    from monitor.alerts.detectability import describe_expected, expected_by_rule, expected_per_week
    from monitor.alerts.engine import evaluate_rules
    from monitor.alerts.state import STATE_TABLE, StateStore

    out = out or sys.stdout
    settings, alert, rules = _load(ns)
    now = parse_time("--at", ns.at, datetime.now(UTC)) if ns.at else datetime.now(UTC)
    if ns.ignore_for:
        rules = rules.model_copy(update={"rules": [r.model_copy(update={"for_": timedelta(0)}) for r in rules.rules]})
    store = _open_store(settings, *(() if ns.no_state else (STATE_TABLE,)))
    try:
        previous = {} if ns.no_state else StateStore(store).load()
        evaluation = evaluate_rules(store, rules, now, previous, alert.traffic_table)
    finally:
        store.close()
    rows = check_rows(evaluation, [r.name for r in rules.rules], expected_by_rule(evaluation, rules))
    if ns.json:
        for row in rows:
            out.write(json.dumps(row, default=str) + "\n")
    else:
        expected = expected_per_week(evaluation, rules)
        console = _console(out)
        print_check(rows, now, console)
        console.print(describe_expected(expected), style="dim")
    firing = any(r["state"] == "firing" for r in rows)
    return 1 if (ns.fail_on_firing and firing) else 0


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
    detects: str  # detector rules: the judged rate and the drop it pages on within 15 min, or why it is too thin
    expected_per_week: float | None  # detector and rollout rules: the false alarms a week the rule expects


def check_rows(evaluation: Evaluation, order: list[str] | None = None, expected: dict[str, float] | None = None) -> list[CheckRow]:
    """One row per rule and segment, per rule without segments, and per failed rule, in the rules' `order`; with
    `expected`, the false alarms a week of each detector and rollout rule on its rows."""
    expected = expected or {}
    from monitor.alerts.detectability import detectability
    from monitor.alerts.outcomes import describe_empty, describe_shortfalls

    now = evaluation.now
    rows: list[CheckRow] = []
    for r in evaluation.results:
        s, o, v = r.state, r.observation, r.verdict
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
                sufficient=v.sufficient,
                reason="" if v.sufficient else describe_shortfalls(v.shortfalls, r.rule, r.windows, now) or v.reason,
                no_decision=[] if v.sufficient else [{"gap": str(f.gap), "have": f.have, "need": f.need} for f in v.shortfalls],
                window=_window(r.windows.current),
                note=s.note,
                detects=(d.describe() if (d := detectability(r)) is not None else ""),
                expected_per_week=expected.get(r.rule.name),
            )
        )
    for e in evaluation.empty:
        gap: dict[str, Any] = {"gap": str(e.gap)}
        if e.newest is not None:
            gap["newest"] = e.newest.at.isoformat() if e.newest.at is not None else None
        if e.single_version or e.started_together:
            gap.update(single_version=e.single_version, started_together=e.started_together)
        rows.append(_rule_row(e.rule, "inactive", describe_empty(e, now), [gap], _window(e.windows.current), expected.get(e.rule.name)))
    for err in evaluation.errors:
        rows.append(_rule_row(err.rule, "error", err.error, [{"gap": "query_failed"}], {}))
    rank = {name: i for i, name in enumerate(order or [])}
    rows.sort(key=lambda row: rank.get(row["rule"], len(rank)))  # stable: segments keep their order
    return rows


def _window(w: tuple[datetime, datetime]) -> dict[str, str]:
    return {"start": w[0].isoformat(), "end": w[1].isoformat()}


def _rule_row(rule: Rule, state: str, reason: str, gaps: list[dict[str, Any]], window: dict[str, str], expected: float | None = None) -> CheckRow:
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
        detects="",
        expected_per_week=expected,
    )


_STATE_STYLE = {"firing": "bold red", "pending": "yellow", "resolved": "green", "error": "magenta", "no data": "dim"}
# Below this the wrapped first column gets too narrow to read: say so and point at --json instead.
MIN_WIDTH = 60


def print_check(rows: list[CheckRow], now: datetime, console: Console) -> None:
    """The check as a table that fits the console (80 columns and up): one section per rule, a segment per row,
    the reason or note under the segment; narrower consoles get one line pointing at --json."""
    from rich import box
    from rich.console import Group
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    if console.width < MIN_WIDTH:
        console.print(f"too narrow for the table ({console.width} columns, {MIN_WIDTH} needed): use --json", soft_wrap=True)
        return
    table = Table(title=f"alert rules at {now.isoformat(timespec='seconds')} (times UTC)", box=box.SIMPLE_HEAD, pad_edge=False, expand=True)
    table.add_column("rule / segment", ratio=1, overflow="fold")
    table.add_column("state", no_wrap=True)
    table.add_column("value · n · p", no_wrap=True)
    rules: dict[str, list[CheckRow]] = {}
    for r in rows:
        rules.setdefault(r["rule"], []).append(r)
    for name, group in rules.items():
        head = Text.assemble((name, "bold"), (f" ({group[0]['severity']}, {group[0]['metric']})", "dim"))
        if len(group) == 1 and group[0]["segment"] is None:
            r = group[0]
            table.add_row(Group(head, Padding(Text(r["reason"], style="dim"), (0, 0, 0, 2))), _state(r), "", end_section=True)
            continue
        table.add_row(head, "", "")
        for i, r in enumerate(group):
            parts = [Padding(Text(_segment_text(r["segment"] or {})), (0, 0, 0, 2))]
            why = r["reason"] or r["note"]
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
        parts.append(f"no decision: {_plural(undecided, 'segment')} and {_plural(empty, 'rule')} without any segment")
    if failed:
        parts.append(f"{_plural(failed, 'rule')} failed")
    return f"{_plural(n_rules, 'rule')}, {_plural(len(segments), 'segment')}: " + "; ".join(parts)


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
    value = _num(r["value"]) or "-"
    base = f" vs {_num(r['baseline'])}" if r["baseline"] is not None else ""
    n = f"n {r['n_current']}/{r['n_baseline']}" if r["baseline"] is not None or r["n_baseline"] else f"n {r['n_current']}"
    # A p-value without a decision tests nothing anyone acts on.
    p = f"\np {_num(r['p_value'], 2)}" if r["p_value"] is not None and r["sufficient"] else ""
    return f"{value}{base}\n{n}{p}"


def _segment_text(segment: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in segment.items()) or "all traffic"


def _console(out: IO[str]) -> Console:
    from rich.console import Console

    # The terminal's width when `out` is one (else 80, or $COLUMNS): the tables wrap to fit it.
    return Console(file=out)


def cmd_accept(ns: argparse.Namespace) -> int:
    """`alerts accept RULE SEGMENT`: resolve a detector episode and record the accepted level, who and when."""
    return run_accept(ns)


def run_accept(ns: argparse.Namespace, out: IO[str] | None = None) -> int:
    """Accept the new level of one detector segment and save its state; prints one line."""
    import getpass

    from monitor.alerts.accept import accept, parse_segment
    from monitor.alerts.sources import StoreData
    from monitor.alerts.state import StateStore

    out = out or sys.stdout
    settings, alert, rules = _load(ns)
    rule = next((r for r in rules.rules if r.name == ns.rule), None)
    if rule is None:
        raise UsageError(f"no rule named {ns.rule} in {alert.rules or 'the default rules'}")
    wanted = parse_segment(ns.segment)
    now = datetime.now(UTC)
    store = _open_store(settings, writes=True)
    try:
        states = StateStore(store)
        state = accept(StoreData(store, alert.traffic_table), rule, states.load(), wanted, ns.by or getpass.getuser(), now)
        states.save([state], now)
    finally:
        store.close()
    out.write(f"{rule.name} {_segment_text(dict(state.segment))}: {state.note}\n")
    return 0


# ---- backtest ----------------------------------------------------------------------------------------------


def cmd_backtest(ns: argparse.Namespace) -> int:
    """`alerts backtest`: replay rules over history and print when they would have fired and resolved."""
    return run_backtest_cmd(ns)


def run_backtest_cmd(ns: argparse.Namespace, out: IO[str] | None = None, progress_console: Console | None = None) -> int:
    """Run the backtest named by `ns`, showing progress on stderr (or `progress_console`), and print the report to `out`."""
    from rich.console import Console

    from monitor.alerts.backtest import run_backtest
    from monitor.alerts.detectability import describe_expected, expected_per_week

    out = out or sys.stdout
    settings, alert, rules = _load(ns)
    now = datetime.now(UTC)
    since, until = parse_time("--since", ns.since, now), parse_time("--until", ns.until, now)
    step = _duration("--step", ns.step)
    if ns.rule:
        unknown = sorted(set(ns.rule) - {r.name for r in rules.rules})
        if unknown:
            raise UsageError(f"--rule: no rule named {', '.join(unknown)}")
        rules = rules.model_copy(update={"rules": [r for r in rules.rules if r.name in ns.rule]})
    store = _open_store(settings)
    try:
        with _BacktestProgress(progress_console or Console(stderr=True)) as shown:
            report = run_backtest(store, rules, since, until, step, alert.traffic_table, progress=shown.update, per_step=ns.per_step)
    finally:
        store.close()
    summary = report.summary(rules.rules)
    episodes = [episode_row(e) for e in report.fired()]
    expected = expected_per_week(report.last, rules) if report.last is not None else {}
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
                    "expected_false_alarms_per_week": expected,
                },
                default=str,
            )
            + "\n"
        )
    else:
        console = _console(out)
        print_backtest(report, ns.step, summary, episodes, console)
        console.print(describe_expected(expected) + " (the segments of the last step)", style="dim")
    return 0


class _BacktestProgress:
    """A rich progress display of a backtest: the history queries, then the steps with the time being evaluated."""

    def __init__(self, console: Console) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[at]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        )
        self.reading = self.bar.add_task("reading history", total=None, at="")
        self.evaluating = self.bar.add_task("evaluating", total=None, at="", start=False)

    def __enter__(self) -> _BacktestProgress:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def update(self, p: Progress) -> None:
        """Show where the backtest is (the `progress` callback of `run_backtest`)."""
        if p.phase == "reading":
            self.bar.update(self.reading, completed=p.done, total=p.total)
            return
        if p.done == 1:
            self.bar.start_task(self.evaluating)
        at = p.at.strftime("%Y-%m-%d %H:%M") if p.at is not None else ""
        self.bar.update(self.evaluating, completed=p.done, total=p.total, at=at)


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


def print_backtest(report: BacktestReport, step: str, summary: list[RuleSummary], episodes: list[EpisodeRow], console: Console) -> None:
    """The backtest as two tables that fit the console (80 columns and up): per rule, then the fired episodes."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    if console.width < MIN_WIDTH:
        console.print(f"too narrow for the tables ({console.width} columns, {MIN_WIDTH} needed): use --json", soft_wrap=True)
        return
    t = Table(
        title=f"backtest {report.since.isoformat(timespec='minutes')} .. {report.until.isoformat(timespec='minutes')}, "
        f"step {step}, {report.evaluations} evaluations",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    t.add_column("rule", overflow="fold")
    for col in ("fired", "still firing", "cleared before firing", "mean delay", "errors"):
        t.add_column(col, justify="right", max_width=9)
    for s in summary:
        delay = "" if s.mean_delay_s is None else f"{s.mean_delay_s / 60:.1f} min"
        t.add_row(s.rule, str(s.fired), str(s.still_firing), str(s.suppressed), delay, str(s.errors))
    console.print(t)
    if not episodes:
        return
    e_t = Table(title="episodes (times UTC)", box=box.SIMPLE_HEAD, pad_edge=False, expand=True)
    e_t.add_column("rule / segment / note", ratio=1, overflow="fold")
    e_t.add_column("pending\nfired\nresolved", no_wrap=True)
    e_t.add_column("value\nvs base", justify="right", no_wrap=True)
    e_t.add_column("n\np", justify="right", no_wrap=True)
    for i, e in enumerate(episodes):
        note = f"\n[dim]{escape(e['note'])}[/dim]" if e["note"] else ""
        times = "\n".join((_short_time(e["pending_at"]), _short_time(e["fired_at"]), _short_time(e["resolved_at"]) or "still firing"))
        base = f"\nvs {_num(e['baseline'])}" if e["baseline"] is not None else ""
        p = f"\np {_num(e['p_value'], 2)}" if e["p_value"] is not None else ""
        e_t.add_row(
            f"[bold]{escape(e['rule'])}[/bold]\n{escape(_segment_text(e['segment']))}{note}",
            times,
            f"{_num(e['value'])}{base}",
            f"{e['n']}/{e['n_baseline']}{p}",
            end_section=i < len(episodes) - 1,
        )
    console.print(e_t)


def _short_time(iso: str | None) -> str:
    return datetime.fromisoformat(iso).strftime("%m-%d %H:%M") if iso else ""
