"""`alerts backtest` for people: its progress on stderr, then per rule and per fired episode, as tables that fit
the console; and the episodes as rows (the JSON's too)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, TypedDict

from monitor.cli.alert_text import number, segment_text, too_narrow

if TYPE_CHECKING:
    from rich.console import Console

    from monitor.alerts.backtest import BacktestReport, Episode, Progress, RuleSummary


class BacktestProgress:
    """A rich progress display of a backtest: the history queries, then the steps with the time being evaluated."""

    def __init__(self, console: Console) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

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

    def __enter__(self) -> BacktestProgress:
        # Only on a terminal, where it is erased when done; elsewhere its stop would leave a blank line in the output.
        if self.bar.console.is_terminal:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar.live.is_started:
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


def print_backtest(
    report: BacktestReport,
    step: str,
    summary: list[RuleSummary],
    episodes: list[EpisodeRow],
    console: Console,
) -> None:
    """The backtest as two tables that fit the console (80 columns and up): per rule, then the fired episodes."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    if too_narrow(console, "the tables"):
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
        resolved = _short_time(e["resolved_at"]) or "still firing"
        times = "\n".join((_short_time(e["pending_at"]), _short_time(e["fired_at"]), resolved))
        base = f"\nvs {number(e['baseline'])}" if e["baseline"] is not None else ""
        p = f"\np {number(e['p_value'], 2)}" if e["p_value"] is not None else ""
        e_t.add_row(
            f"[bold]{escape(e['rule'])}[/bold]\n{escape(segment_text(e['segment']))}{note}",
            times,
            f"{number(e['value'])}{base}",
            f"{e['n']}/{e['n_baseline']}{p}",
            end_section=i < len(episodes) - 1,
        )
    console.print(e_t)


def _short_time(iso: str | None) -> str:
    return datetime.fromisoformat(iso).strftime("%m-%d %H:%M") if iso else ""
