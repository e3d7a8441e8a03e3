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
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

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
from monitor.cli.replay_screen import ReplayScreen, header_lines, rfc3339
from monitor.cli.time_flags import add_span_flags
from schemas.errors import UsageError

if TYPE_CHECKING:
    from consumers.time_range import TimeRange
    from monitor.replay.run import ReplayOptions, ReplayOutcome

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
_REPEATED = (
    "from_store",
    "where",
    "batch_api",
    "kafka_topics",
    "sample_rate",
    "judge",
    "judge_model",
    "clickhouse_url",
)


_USAGE = (
    "%(prog)s --since TIME [--until TIME]\n         [--from-store [--where SQL]] [--resume] [--max-usd USD]\n"
    "         [--yes] [--dry-run] [--batch-api] [flags]"
)
_DESCRIPTION = (
    "Score the events of a time range through the same decode, sample, judge and sink path as live traffic, beside "
    "the live rows, each marked with the run's id (column replay_run). Kafka is read by explicit partition assignment "
    "in no consumer group, so the live group's offsets never move; nothing is added to traffic_counts, and alert rules "
    "leave replayed rows out unless a rule sets include_replays. The range is read once to count and estimate the "
    "cost, which is printed before anything is judged; above MONITOR_REPLAY_CONFIRM_USD it needs --yes. Events this "
    "judge already scored live are skipped; --resume skips those of earlier replays too. Exit codes: 0 done, 2 "
    "refused or bad input, 3 stopped at --max-usd, 130 interrupted (both say how to resume)."
)


def register(subparsers: Any) -> None:
    """Add the `replay` subcommand to the CLI's subparsers."""
    p = subparsers.add_parser(
        "replay",
        # The settings' flags are listed by topic below; a usage line of every one would fill the screen.
        usage=_USAGE,
        help="score history with the configured judge: a time range of the topics, or text already stored; cost shown "
        "first",
        description=_DESCRIPTION,
    )
    add_span_flags(p, None)
    _add_source_flags(p)
    _add_spend_flags(p)
    _add_batch_flags(p)
    p.add_argument(
        "--progress",
        choices=["auto", "bar", "lines", "none"],
        default="auto",
        help="auto: a bar on a terminal, lines otherwise",
    )
    _add_settings_flags(p)
    p.set_defaults(func=cmd_replay)


def _add_source_flags(p: argparse.ArgumentParser) -> None:
    """What is read: the topics or the store's text, and which events are skipped."""
    p.add_argument(
        "--from-store",
        action="store_true",
        help="re-score the question and response text already in the store (by event time) instead of reading the "
        "topics: for history the topics no longer hold (needs MONITOR_STORE_TEXT to have kept the text)",
    )
    p.add_argument(
        "--where",
        metavar="SQL",
        help="with --from-store: a ClickHouse condition on the scores table's columns, e.g. \"app = 'support-bot'\"",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="skip the events this judge scored in any earlier replay (default: only those it scored live)",
    )


def _add_spend_flags(p: argparse.ArgumentParser) -> None:
    """The cap, the confirmation and the estimate-only run."""
    p.add_argument(
        "--max-usd",
        type=positive_float,
        metavar="USD",
        help="stop cleanly before the spend would pass this (default: no cap)",
    )
    p.add_argument(
        "--yes",
        action="store_true",
        help="go ahead whatever the estimate (default: ask above MONITOR_REPLAY_CONFIRM_USD)",
    )
    p.add_argument("--dry-run", action="store_true", help="count the range and print the estimate, judge nothing")


def _add_batch_flags(p: argparse.ArgumentParser) -> None:
    """The Message Batches path."""
    p.add_argument(
        "--batch-api",
        action="store_true",
        help="send the calls through Anthropic's Message Batches API: half the price, results within 24 hours (LLM "
        "judges only)",
    )
    p.add_argument(
        "--batch-size", type=positive_int, default=1000, metavar="N", help="requests per Message Batch (default: 1000)"
    )
    p.add_argument(
        "--batch-poll-s",
        type=positive_float,
        default=30.0,
        metavar="SECONDS",
        help="how often a batch's status is asked (default: 30)",
    )


def _add_settings_flags(p: argparse.ArgumentParser) -> None:
    """The flags of the settings a replay reads, by topic."""
    add_setting_flags(p, "judge", JUDGE_SETTINGS, JUDGE_ENV_ONLY)
    add_setting_flags(p, "sampling and cost", _SAMPLING_SETTINGS)
    add_setting_flags(p, "flow", _FLOW_SETTINGS)
    add_setting_flags(p, "privacy and retention", _PRIVACY_SETTINGS)
    add_setting_flags(p, "kafka", ("kafka_topics", *KAFKA_CONNECTION_SETTINGS, "max_event_bytes"), KAFKA_ENV_ONLY)
    add_store_flags(p)


def cmd_replay(ns: argparse.Namespace) -> int:
    """`replay`: check, count, estimate, confirm, score; the exit code says how it ended."""
    from consumers.time_range import TimeRange
    from monitor.cli.time_flags import span_from_args
    from monitor.replay.run import ReplayOptions

    now = datetime.now(UTC)
    span = TimeRange(*span_from_args(ns, now))
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
    level = settings.process.log_level if "MONITOR_LOG_LEVEL" in os.environ else "warning"
    configure_logging(settings.process.log_format, level)
    judge = build_judge(settings.judge, estimate_only=options.dry_run)  # pricing a backfill needs no key
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


def resume_command(ns: argparse.Namespace, outcome: ReplayOutcome, span: TimeRange) -> str | None:
    """The command that carries on where a run stopped early (the same absolute range, --resume, the same cap: a cap
    holds per run), or None."""
    if outcome.status not in ("capped", "interrupted") or outcome.run_id is None:
        return None
    words = [
        "relevancy-monitor",
        "replay",
        f"--since={rfc3339(span.since)}",
        f"--until={rfc3339(span.until)}",
        "--resume",
    ]
    for name in _REPEATED:
        value = getattr(ns, name, None)
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        words += [flag] if value is True else [flag, ",".join(value) if isinstance(value, list) else str(value)]
    if ns.max_usd is not None:
        words += ["--max-usd", f"{ns.max_usd:g}"]
    return shlex.join(words)
