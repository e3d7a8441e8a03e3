"""What `replay` shows: the source, judge and store it replays to, the count and estimate before judging, progress
on stderr (a rich bar on a terminal, a line every 5 s otherwise), and how the run ended."""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from monitor.config import Settings
    from monitor.judges.base import JudgeInfo
    from monitor.replay.run import Counted, ReplayOptions, ReplayOutcome, Snapshot

INDENT = " " * 10  # under the labels ("read      ", "left out  ", ...)
INTERRUPTED = "\ninterrupted: finishing the calls already sent, then writing their rows (once more to force)\n"


def rfc3339(dt: datetime) -> str:
    """`dt` in UTC as RFC 3339 with milliseconds and a Z."""
    return dt.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class ReplayScreen:
    """The replay's progress and summary on stderr and stdout: a rich bar on a terminal, a line every 5 s otherwise."""

    def __init__(
        self,
        mode: str,
        max_usd: float | None,
        out: IO[str] | None = None,
        err: IO[str] | None = None,
    ) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.mode = ("bar" if self.err.isatty() else "lines") if mode == "auto" else mode
        self.max_usd = max_usd
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._phase = ""
        self._last_line = 0.0
        self._console: Console | None = None

    def interrupted(self, stop: asyncio.Event) -> Any:
        """The signal handler: the first signal stops reading (in-flight calls finish), and says so."""

        def handler() -> None:
            if not stop.is_set():
                self.err.write(INTERRUPTED)
                stop.set()
            else:
                raise KeyboardInterrupt

        return handler

    def header(self, lines: list[str]) -> None:
        """Print what is about to be replayed."""
        print("\n".join(lines), file=self.out, flush=True)

    def estimated(self, counted: Counted) -> None:
        """Print the count and the estimate, before anything is judged."""
        self._end_bar()
        print("\n".join(estimate_lines(counted, self.max_usd)), file=self.out, flush=True)

    def progress(self, snapshot: Snapshot) -> None:
        """Show how far the phase got."""
        if self.mode == "none":
            return
        if self.mode == "lines":
            self._line(snapshot)
            return
        self._draw(snapshot)

    def _line(self, s: Snapshot) -> None:
        import time

        now = time.monotonic()
        if now - self._last_line < 5.0 and s.phase == self._phase:
            return
        self._phase, self._last_line = s.phase, now
        print(progress_line(s), file=self.err, flush=True)

    def _draw(self, s: Snapshot) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        if self._bar is None or s.phase != self._phase:
            self._end_bar()
            self._console = Console(file=self.err)
            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[detail]}"),
                console=self._console,
                transient=False,
            )
            self._bar.start()
            self._task = self._bar.add_task("counting" if s.phase == "count" else "scoring", total=None, detail="")
            self._phase = s.phase
        assert self._task is not None
        done = s.read if s.phase == "count" else s.tally.judged
        # The count's total is the offsets' rough figure: never show more read than expected.
        total = max(s.expected, done) if s.expected else None
        self._bar.update(self._task, completed=done, total=total, detail=progress_detail(s))

    def _end_bar(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def close(self) -> None:
        """Stop drawing."""
        self._end_bar()

    def summary(self, outcome: ReplayOutcome, resume: str | None) -> None:
        """Print how the run ended and what to do next."""
        print("\n".join(summary_lines(outcome, resume)), file=self.out, flush=True)


def _usd(value: float | None) -> str:
    if value is None:
        return "unknown (no price for the judge model: MONITOR_JUDGE_PRICES)"
    if 0 < value < 0.01:
        return f"${value:.2g}"  # per-event figures: two significant digits, not $0.0001
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def _skips(tally: Any) -> str:
    from monitor.replay.triage import Skip

    labels = {
        Skip.MALFORMED: "malformed",
        Skip.ERASED: "erased by forget",
        Skip.EXPIRED: "older than the retention",
        Skip.NOT_SAMPLED: "not sampled",
        Skip.ALREADY_SCORED: "already scored by this judge",
        Skip.NO_TEXT: "without stored text",
    }
    parts = [f"{tally.skipped[k]:,} {label}" for k, label in labels.items() if tally.skipped[k]]
    return ", ".join(parts) or "none"


def header_lines(settings: Settings, options: ReplayOptions, judge: JudgeInfo) -> list[str]:
    """What is replayed: the source and range, the judge, where the rows go."""
    span = f"from {rfc3339(options.span.since)} to {rfc3339(options.span.until)}"
    if options.from_store:
        source = f"stored text of {settings.store.database}.{settings.store.table} {span} (event times)" + (
            f", where {options.where}" if options.where else ""
        )
    else:
        topics = settings.kafka.topics
        noun = "topics" if len(topics) > 1 else "topic"
        source = f"{noun} {', '.join(topics)} {span} (record times), in no consumer group"
    kind = "a word-overlap heuristic, no API calls" if judge.heuristic else f"model {judge.model}"
    return [
        f"replay    {source}",
        f"judge     {judge.method} ({judge.judge_id}), {kind}",
        f"store     {settings.store.database}.{settings.store.table} at {settings.redacted()['clickhouse_url']}",
    ]


def estimate_lines(counted: Counted, max_usd: float | None) -> list[str]:
    """The count and the cost estimate, as printed before judging."""
    e, t = counted.estimate, counted.tally
    lines = [
        f"read      {t.read:,} events in the range",
        f"left out  {_skips(t)}",
    ]
    if t.before_start:
        skipped = f"{t.before_start:,} records older than --since were read past its offset and left out"
        lines.append(f"{INDENT}{skipped} (the broker's time index is coarse)")
    if t.malformed:
        reasons = ", ".join(f"{r} {n:,}" for r, n in t.malformed.most_common())
        lines.append(f"{INDENT}malformed by reason: {reasons} (dead-lettered when they came)")
    if not e.calls:
        lines.append(f"to score  {e.events:,} events, no API calls: free")
    else:
        how = " through the Message Batches API (half price)" if e.batch else ""
        lines.append(f"to score  {e.events:,} events: {e.calls:,} judge calls{how}")
        lines.append(f"tokens    about {e.input_tokens:,} input and {e.output_tokens:,} output")
        per = e.per_event_usd
        each = f" ({_usd(per)} an event)" if per else ""
        lines.append(f"estimate  {_usd(e.usd)}{each}, list prices; the run reports what it spends")
    if max_usd is not None:
        lines.append(f"cap       ${max_usd:,.2f} (--max-usd): judging stops before the spend would pass it")
    return lines


def progress_detail(s: Snapshot) -> str:
    """The counters beside the bar."""
    t = s.tally
    if s.phase == "count":
        return f"left out {sum(t.skipped.values()):,}"
    spent = f"${s.spent_usd:,.4f}" + (f" of ${s.max_usd:,.2f}" if s.max_usd is not None else "")
    return f"ok {t.scored:,} · failed {t.failed:,} · in flight {s.in_flight} · {spent}"


def progress_line(s: Snapshot) -> str:
    """One progress line for a log or a pipe."""
    if s.phase == "count":
        of = f" of about {s.expected:,}" if s.expected > s.read else ""
        return f"counting: read {s.read:,}{of}, left out {sum(s.tally.skipped.values()):,}"
    return f"scoring: {s.tally.judged:,} of {s.expected:,} written ({progress_detail(s)})"


def summary_lines(outcome: ReplayOutcome, resume: str | None) -> list[str]:
    """How the run ended, what it wrote and spent, and how to resume one that stopped early."""
    if outcome.status == "estimated":
        return ["dry run: nothing judged (drop --dry-run to score)"]
    t = outcome.tally
    head = {
        "finished": "done",
        "capped": "stopped at the cap",
        "interrupted": "interrupted",
        "running": "stopped",
        "failed": "failed",
    }[outcome.status]
    spent = _usd(t.spent_usd if t.priced else None) if outcome.counted.estimate.calls else "nothing (no API calls)"
    scored = f"{t.scored:,} rows scored, {t.failed:,} failed, of {outcome.counted.to_score:,} to score"
    estimate = f" (estimate {_usd(outcome.counted.estimate.usd)})" if outcome.counted.estimate.calls else ""
    lines = [f"{head}: {scored}; spent {spent}{estimate}"]
    if outcome.run_id:
        run_id = outcome.run_id
        lines.append(f"run       {run_id} (its rows have replay_run = '{run_id}'; the run is in replay_runs)")
    if outcome.left_in_batches:
        lines.append(
            f"{INDENT}{outcome.left_in_batches:,} requests are still in Message Batches at the provider: "
            "a run with --resume collects their results without paying again"
        )
    if outcome.cancelled:
        lines.append(f"{INDENT}{outcome.cancelled} calls were still out when the grace period ended: they have no row")
    if outcome.overshoot_usd > 0:
        overshoot = f"${outcome.overshoot_usd:,.4f}"
        lines.append(f"{INDENT}the calls already out when the cap was reached cost {overshoot} more than it")
    if resume:
        lines.append(f"resume    {resume}")
    return lines
