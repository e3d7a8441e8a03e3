"""What one round of `alerts run --once` evaluated and sent, and what its canary did, in lines for people."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from monitor.cli.alert_text import plural

if TYPE_CHECKING:
    from monitor.alerts.engine import RoundReport
    from monitor.canary.model import CanaryTick

_NOTIFIER_FLAGS = "--webhook-url, --slack-webhook-url or --alertmanager-url"
NO_NOTIFIER = f"no notifier configured: nothing sent (set {_NOTIFIER_FLAGS}, or ALERTS_*)"


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
        f"evaluated {plural(c.rules, 'rule')}, {plural(c.segments, 'segment')}: {c.firing} firing "
        f"({c.newly_firing} new), {c.pending} pending, {c.resolved} resolved this round, {quiet} quiet",
        f"no decision (too little data): {plural(c.no_decision, 'segment')}, and {plural(c.empty_rules, 'rule')} "
        "without any segment (`alerts check` says why)",
    ]
    if report.canary is not None:
        lines.append(canary_line(report.canary))
    lines += [f"rule {e.rule.name} failed: {e.error}" for e in report.evaluation.errors]
    if not notifiers:
        lines.append(NO_NOTIFIER)
        return lines
    sent = []
    for d in report.deliveries:
        text = f"{d.notifier} {d.sent} sent"
        if d.failed:
            text += f", {d.failed} failed ({d.error})"
        sent.append(text)
    lines.append(f"notifications: {'; '.join(sent)}; state rows saved: {report.saved}")
    return lines


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
            cost = f"cost {usd} for {plural(w.calls, 'judge call')}"
        parts.append(
            f"run {w.run_id} written ({w.judge} judge {w.judge_id}, {w.labels}): {plural(f.pairs, 'pair')}, "
            f"{plural(f.errors, 'error')}; rho {_figure(f.spearman)}, kappa {_figure(f.kappa)}, "
            f"mean shift {_figure(f.mean_shift, signed=True)}; {cost}, {w.seconds:.1f}s"
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
