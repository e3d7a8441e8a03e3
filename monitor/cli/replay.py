"""`relevancy-monitor replay`: score history (a time range of the topics, or text already stored) with the configured
judge, beside the live rows, showing the cost before judging and stopping at a cap.

Exit codes: 0 the range was scored (or only estimated, with --dry-run); 1 an error; 2 bad input or a refusal (the
estimate is above MONITOR_REPLAY_CONFIRM_USD without --yes, say); 3 stopped at --max-usd; 130 interrupted. A run
that stopped early says how to resume it."""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import signal
import sys
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any

from monitor.cli.flags import (
    JUDGE_ENV_ONLY,
    JUDGE_SETTINGS,
    KAFKA_CONNECTION_SETTINGS,
    KAFKA_ENV_ONLY,
    add_setting_flags,
    add_store_flags,
    positive_float,
    positive_int,
    settings_from_args,
)
from schemas.errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from consumers.time_range import TimeRange
    from monitor.config import Settings
    from monitor.judges.base import JudgeInfo
    from monitor.replay.run import Counted, ReplayOptions, ReplayOutcome, Snapshot

PROG = "relevancy-monitor replay"
EXIT_CAPPED = 3
EXIT_INTERRUPTED = 130
_SAMPLING_SETTINGS = ("sample_rate", "sample_key", "sampling_file", "replay_confirm_usd")
_FLOW_SETTINGS = (
    "judge_timeout_s",
    "judge_requests_per_minute",
    "judge_tokens_per_minute",
    "judge_event_attempts",
    "breaker_threshold",
    "breaker_cooldown_s",
    "shutdown_grace_s",
    "batch_max_rows",
)
_PRIVACY_SETTINGS = ("redact", "store_text", "retention_days")
# Flags that say what a run was; a resume hint repeats them (the judge's and the store's come from the environment).
_REPEATED = ("from_store", "where", "batch_api", "kafka_topics", "sample_rate", "judge", "judge_model", "clickhouse_url")


def register(subparsers: Any) -> None:
    """Add the `replay` subcommand to the CLI's subparsers."""
    p = subparsers.add_parser(
        "replay",
        # The settings' flags are listed by topic below; a usage line of every one would fill the screen.
        usage="%(prog)s --since TIME [--until TIME]\n         [--from-store [--where SQL]] [--resume] [--max-usd USD]\n"
        "         [--yes] [--dry-run] [--batch-api] [flags]",
        help="score history with the configured judge: a time range of the topics, or text already stored; cost shown first",
        description="Score the events of a time range through the same decode, sample, judge and sink path as live traffic, "
        "beside the live rows, each marked with the run's id (column replay_run). Kafka is read by explicit partition "
        "assignment in no consumer group, so the live group's offsets never move; nothing is added to traffic_counts, and alert "
        "rules leave replayed rows out unless a rule sets include_replays. The range is read once to count and estimate "
        "the cost, which is printed before anything is judged; above MONITOR_REPLAY_CONFIRM_USD it needs --yes. Events this "
        "judge already scored live are skipped; --resume skips those of earlier replays too. Exit codes: 0 done, 2 refused or "
        "bad input, 3 stopped at --max-usd, 130 interrupted (both say how to resume).",
    )
    p.add_argument("--since", required=True, metavar="TIME", help="start of the range: RFC 3339 (2026-11-30T00:00:00Z) or relative (--since=-24h)")
    p.add_argument(
        "--until", default="now", metavar="TIME", help="end of the range, excluded: RFC 3339, relative (--until=-1h) or now (default: now)"
    )
    p.add_argument(
        "--from-store",
        action="store_true",
        help="re-score the question and response text already in the store (by event time) instead of reading the topics: "
        "for history the topics no longer hold (needs MONITOR_STORE_TEXT to have kept the text)",
    )
    p.add_argument(
        "--where", metavar="SQL", help="with --from-store: a ClickHouse condition on the scores table's columns, e.g. \"app = 'support-bot'\""
    )
    p.add_argument(
        "--resume", action="store_true", help="skip the events this judge scored in any earlier replay (default: only those it scored live)"
    )
    p.add_argument("--max-usd", type=positive_float, metavar="USD", help="stop cleanly before the spend would pass this (default: no cap)")
    p.add_argument("--yes", action="store_true", help="go ahead whatever the estimate (default: ask above MONITOR_REPLAY_CONFIRM_USD)")
    p.add_argument("--dry-run", action="store_true", help="count the range and print the estimate, judge nothing")
    p.add_argument(
        "--batch-api",
        action="store_true",
        help="send the calls through Anthropic's Message Batches API: half the price, results within 24 hours (LLM judges only)",
    )
    p.add_argument("--batch-size", type=positive_int, default=1000, metavar="N", help="requests per Message Batch (default: 1000)")
    p.add_argument("--batch-poll-s", type=positive_float, default=30.0, metavar="SECONDS", help="how often a batch's status is asked (default: 30)")
    p.add_argument("--progress", choices=["auto", "bar", "lines", "none"], default="auto", help="auto: a bar on a terminal, lines otherwise")
    add_setting_flags(p, "judge", JUDGE_SETTINGS, JUDGE_ENV_ONLY)
    add_setting_flags(p, "sampling and cost", _SAMPLING_SETTINGS)
    add_setting_flags(p, "flow", _FLOW_SETTINGS)
    add_setting_flags(p, "privacy and retention", _PRIVACY_SETTINGS)
    add_setting_flags(p, "kafka", ("kafka_topics", *KAFKA_CONNECTION_SETTINGS, "max_event_bytes"), KAFKA_ENV_ONLY)
    add_store_flags(p)
    p.set_defaults(func=cmd_replay)


def cmd_replay(ns: argparse.Namespace) -> int:
    """`replay`: check, count, estimate, confirm, score; the exit code says how it ended."""
    from consumers.time_range import TimeRange
    from monitor.cli.time_flags import parse_time
    from monitor.replay.run import ReplayOptions

    now = datetime.now(UTC)
    since, until = parse_time("--since", ns.since, now), parse_time("--until", ns.until, now)
    try:
        span = TimeRange(since, until)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if ns.where and not ns.from_store:
        raise UsageError("--where filters stored rows: it needs --from-store")
    if ns.batch_size > 100_000:
        raise UsageError("--batch-size: a Message Batch holds at most 100,000 requests")
    options = ReplayOptions(
        span=span,
        from_store=ns.from_store,
        where=ns.where,
        resume=ns.resume,
        batch_api=ns.batch_api,
        max_usd=ns.max_usd,
        yes=ns.yes,
        dry_run=ns.dry_run,
        batch_size=ns.batch_size,
        batch_poll_s=ns.batch_poll_s,
    )
    return asyncio.run(_replay(ns, options))


async def _replay(ns: argparse.Namespace, options: ReplayOptions) -> int:
    from monitor.judges.factory import build_judge
    from monitor.replay.run import Replay
    from monitor.runtime.logs import configure_logging
    from monitor.store.async_store import AsyncStore

    settings = settings_from_args(ns)
    view = ReplayScreen(ns.progress, options.max_usd)
    # The screen is the progress report: info lines would tear the bar or bury the lines, so they show only when
    # MONITOR_LOG_LEVEL asks for them.
    level = settings.log_level if "MONITOR_LOG_LEVEL" in os.environ else "warning"
    configure_logging(settings.log_format, level)
    judge = build_judge(settings.judge_client)
    store = AsyncStore.from_settings(settings.store)
    view.header(header_lines(settings, options, judge.info))
    replay = Replay(settings, options, judge, store, view)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, view.interrupted(replay.stop))
    try:
        outcome = await replay.run()
    finally:
        view.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await judge.aclose()
        await store.close()
    view.summary(outcome, resume_command(ns, outcome, options.span))
    return exit_code(outcome)


def exit_code(outcome: ReplayOutcome) -> int:
    """0 done or estimated, 3 stopped at the cap, 130 interrupted."""
    return {"capped": EXIT_CAPPED, "interrupted": EXIT_INTERRUPTED}.get(outcome.status, 0)


def rfc3339(dt: datetime) -> str:
    """`dt` in UTC as RFC 3339 with milliseconds and a Z."""
    return dt.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def resume_command(ns: argparse.Namespace, outcome: ReplayOutcome, span: TimeRange) -> str | None:
    """The command that carries on where a run stopped early (the same absolute range, --resume, the same cap: a cap
    holds per run), or None."""
    if outcome.status not in ("capped", "interrupted") or outcome.run_id is None:
        return None
    words = ["relevancy-monitor", "replay", f"--since={rfc3339(span.since)}", f"--until={rfc3339(span.until)}", "--resume"]
    for name in _REPEATED:
        value = getattr(ns, name, None)
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        words += [flag] if value is True else [flag, ",".join(value) if isinstance(value, list) else str(value)]
    if ns.max_usd is not None:
        words += ["--max-usd", f"{ns.max_usd:g}"]
    return shlex.join(words)


class ReplayScreen:
    """The replay's progress and summary on stderr and stdout: a rich bar on a terminal, a line every 5 s otherwise."""

    def __init__(self, mode: str, max_usd: float | None, out: IO[str] | None = None, err: IO[str] | None = None) -> None:
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
                self.err.write("\ninterrupted: finishing the calls already sent, then writing their rows (once more to force)\n")
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
        self._bar.update(self._task, completed=done, total=max(s.expected, done) if s.expected else None, detail=progress_detail(s))

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
        source = (
            f"topic{'s' if len(settings.kafka.topics) > 1 else ''} {', '.join(settings.kafka.topics)} {span} (record times), in no consumer group"
        )
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
        lines.append(
            f"          {t.before_start:,} records older than --since were read past its offset and left out (the broker's time index is coarse)"
        )
    if t.malformed:
        lines.append(
            "          malformed by reason: " + ", ".join(f"{r} {n:,}" for r, n in t.malformed.most_common()) + " (dead-lettered when they came)"
        )
    if not e.calls:
        lines.append(f"to score  {e.events:,} events, no API calls: free")
    else:
        how = " through the Message Batches API (half price)" if e.batch else ""
        lines.append(f"to score  {e.events:,} events: {e.calls:,} judge calls{how}")
        lines.append(f"tokens    about {e.input_tokens:,} input and {e.output_tokens:,} output")
        per = e.per_event_usd
        lines.append(f"estimate  {_usd(e.usd)}" + (f" ({_usd(per)} an event)" if per else "") + ", list prices; the run reports what it spends")
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
    lines = [
        f"{head}: {t.scored:,} rows scored, {t.failed:,} failed, of {outcome.counted.to_score:,} to score; spent {spent}"
        + (f" (estimate {_usd(outcome.counted.estimate.usd)})" if outcome.counted.estimate.calls else ""),
    ]
    if outcome.run_id:
        lines.append(f"run       {outcome.run_id} (its rows have replay_run = '{outcome.run_id}'; the run is in replay_runs)")
    if outcome.left_in_batches:
        lines.append(
            f"          {outcome.left_in_batches:,} requests are still in Message Batches at the provider: a run with --resume "
            "collects their results without paying again"
        )
    if outcome.cancelled:
        lines.append(f"          {outcome.cancelled} calls were still out when the grace period ended: they have no row")
    if outcome.overshoot_usd > 0:
        lines.append(f"          the calls already out when the cap was reached cost ${outcome.overshoot_usd:,.4f} more than it")
    if resume:
        lines.append(f"resume    {resume}")
    return lines
