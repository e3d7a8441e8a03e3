"""`relevancy-monitor calibrate`: score a labelled set with the configured judge and report how far to trust it.

Settings as for `judge` (MONITOR_* and the same flags), judging as in the service (`GuardedJudge` with the flow
limits, text redacted as live traffic is). No Kafka; the store only with `--labels store`, which reads the reviewers'
labels from it (read-only) as `labels export` writes them. The report's tables are
`monitor.cli.calibration_tables`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

from monitor.calibration.labels import SCALES, LabelledPair, golden_path, ignored_fields, parse_labels, read_labels
from monitor.cli.flags import (
    JUDGE_ENV_ONLY,
    JUDGE_SETTINGS,
    add_setting_flags,
    add_store_flags,
    positive_int,
    settings_from_args,
)
from monitor.cli.time_flags import add_span_flags
from monitor.config import Settings
from schemas.errors import LabelsError, UsageError

if TYPE_CHECKING:
    from rich.progress import Progress as Bar
    from rich.progress import TaskID

    from monitor.calibration.run import Progress
    from monitor.judges.base import Judge
    from monitor.judges.settings import JudgeSettings

# The statistics (numpy) and the report's tables are imported by the command itself: building the parser for any
# other command stays cheap (every `relevancy-monitor ...` builds the whole parser).

PROG = "relevancy-monitor calibrate"
# The flow limits the service judges under, read here too so a large set meets the provider as `run` would.
FLOW_SETTINGS = (
    "judge_timeout_s",
    "judge_requests_per_minute",
    "judge_tokens_per_minute",
    "judge_event_attempts",
    "breaker_threshold",
    "breaker_cooldown_s",
    "redact",
)
LARGE_SET = 100  # pairs: from here a redirected stderr gets progress lines (a terminal always gets the bar)
STORE_LABELS = "store"  # `--labels store`: the reviewers' labels in the store, not a file

ProgressMode = Literal["bar", "lines", "none"]


_DESCRIPTION = (
    "Judge each labelled pair with the configured judge (as `judge` does, under the service's flow limits) and report "
    "agreement with the labels: Spearman rho and Kendall tau-b with bootstrap 95% intervals, quadratic-weighted "
    "Cohen's kappa on the 0-4 buckets, mean absolute error, a low/mid/high confusion table, per-category figures, the "
    "largest disagreements with the judge's reasons, failures and cost. The labels file has one JSON object per line: "
    '{"question": ..., "answer": ... (or "response"), "label": 0-4, "id": ..., "category": ...} ("id", "category" and '
    '"rationale" optional); blank lines are skipped, any other bad line stops with exit 2 naming it. '
    "Exit code 1 if any pair could not be judged (it is left out of the statistics, and listed)."
)


def register(subparsers: Any) -> None:
    """Add the `calibrate` subcommand to the CLI's subparsers."""
    p = subparsers.add_parser(
        "calibrate",
        help="score a labelled set with the configured judge and report how well it agrees with the labels",
        description=_DESCRIPTION,
    )
    _add_set_flags(p)
    p.add_argument("--json", action="store_true", help="print the report as one JSON document (default: tables)")
    _add_statistics_flags(p)
    add_setting_flags(p, "judge", JUDGE_SETTINGS, JUDGE_ENV_ONLY)
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="read the set and print what judging it would cost, judge nothing (needs no API key)",
    )
    add_setting_flags(p, "flow and privacy, as in the service", FLOW_SETTINGS)
    add_store_flags(p)
    p.set_defaults(func=cmd_calibrate)


def _add_set_flags(p: argparse.ArgumentParser) -> None:
    """The labelled set: a file or the golden set, and the scale of its labels."""
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--labels",
        metavar="FILE",
        help="JSONL file of labelled pairs, or `store`: the reviewers' labels in the store (the UI's review queue), "
        "read-only, exactly as `labels export` writes them (required unless --golden)",
    )
    source.add_argument(
        "--golden", action="store_true", help="use the golden set shipped with relevancy-monitor instead of --labels"
    )
    p.add_argument(
        "--label-scale",
        choices=SCALES,
        default="rubric",
        help="rubric: integer labels 0-4 as in the rubric judge; unit: labels 0-1, decimals allowed (default: rubric)",
    )
    add_span_flags(p, None, since_absent="every label (with --labels store only)")


def _add_statistics_flags(p: argparse.ArgumentParser) -> None:
    """The bootstrap and the disagreements listed."""
    p.add_argument(
        "--resamples",
        type=positive_int,
        default=2000,
        metavar="N",
        help="bootstrap resamples for the intervals (default: 2000)",
    )
    p.add_argument(
        "--seed", type=int, default=0, metavar="N", help="seed of the bootstrap, so a report repeats (default: 0)"
    )
    p.add_argument(
        "--top", type=positive_int, default=10, metavar="N", help="largest disagreements listed (default: 10)"
    )


def cmd_calibrate(ns: argparse.Namespace) -> int:
    """The `calibrate` command: configure logging (to stderr), judge the labelled set, print the report."""
    from monitor.runtime.logs import configure_logging

    settings = settings_from_args(ns)
    configure_logging(settings.process.log_format, settings.process.log_level)
    return run_calibrate(ns, settings)


def labels_source(ns: argparse.Namespace) -> Path:
    """The labels file `ns` names: --labels, or the packaged golden set for --golden."""
    if ns.golden:
        return golden_path()
    if ns.labels is None:
        raise UsageError("give --labels FILE or --golden")
    return Path(ns.labels)


def run_calibrate(
    ns: argparse.Namespace, settings: Settings | None = None, out: IO[str] | None = None, err: IO[str] | None = None
) -> int:
    """Judge the set `ns` names and print the report to `out`, progress and a failure summary to `err`; raises
    `LabelsError`, `UsageError` or `ConfigError` (exit 2) before any judging for bad input."""
    from monitor.calibration.agreement import Bootstrap
    from monitor.calibration.report import compare, document
    from monitor.calibration.run import judge_pairs
    from monitor.cli.calibration_tables import print_report, report_console
    from monitor.judges.factory import build_judge
    from monitor.privacy.redactor import build_redactor

    out = out or sys.stdout
    err = err or sys.stderr
    settings = settings or settings_from_args(ns)
    if ns.labels == STORE_LABELS:
        from monitor.store.urls import safe_url

        path: Path | str = f"the labels of {settings.store.database} at {safe_url(settings.store.url)}"
        pairs = store_pairs(ns)
    else:
        if ns.since is not None or ns.until != "now":
            raise UsageError("--since and --until choose labels of the store: give them with --labels store")
        path = labels_source(ns)
        if ns.golden and not path.is_file():
            raise LabelsError(f"the golden set is not installed (no {path})")
        pairs = read_labels(path, ns.label_scale)
        if ignored := ignored_fields(pairs):
            err.write(f"{path}: fields not used, ignored: {', '.join(ignored)}\n")
    redactor = build_redactor(settings.redaction)  # before the judge: a bad pattern leaks no client
    judge = build_judge(settings.judge, estimate_only=ns.dry_run)  # pricing the set needs no key
    if ns.dry_run:
        out.write(dry_run_text(pairs, judge, settings.judge, str(path)))
        return 0
    mode = progress_mode(_is_terminal(err), len(pairs))
    with _ProgressDisplay(mode, err, len(pairs)) as progress:
        run = asyncio.run(judge_pairs(pairs, judge, settings.flow, redactor, progress, settings.judge.context_window()))
    result = compare(run, Bootstrap(resamples=ns.resamples, seed=ns.seed), ns.top)
    if ns.json:
        out.write(json.dumps(document(run, result, str(path), ns.label_scale), ensure_ascii=False) + "\n")
    else:
        print_report(run, result, str(path), ns.label_scale, report_console(out))
    if run.failed:
        err.write(
            f"{PROG}: {len(run.failed)} of {len(pairs)} pairs could not be judged; they are left out of the "
            "statistics\n"
        )
        return 1
    return 0


def store_pairs(ns: argparse.Namespace) -> list[LabelledPair]:
    """The reviewers' labels of the store as labelled pairs: the lines `labels export` writes, parsed as a file's
    (one pair per label, by event id and reviewer), so the file and the store give the same report."""
    from monitor.cli.labels import read_store_lines

    if ns.label_scale != "rubric":
        raise UsageError("--labels store: the reviewers' labels are on the rubric scale 0-4; drop --label-scale")
    lines = read_store_lines(ns, datetime.now(UTC))
    return parse_labels("\n".join(lines).encode("utf-8"), "rubric", "store labels")


# ---- progress ---------------------------------------------------------------------------------------------------


def progress_mode(stderr_is_terminal: bool, pairs: int) -> ProgressMode:
    """How to show progress: a live bar on a terminal, plain lines for a large set on a redirected stderr (a CI
    log), else nothing. Never on stdout, which may carry the JSON document."""
    if stderr_is_terminal:
        return "bar"
    return "lines" if pairs >= LARGE_SET else "none"


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class _ProgressDisplay:
    """The progress callback for `mode`, on `err`, started and stopped around judging."""

    def __init__(self, mode: ProgressMode, err: IO[str], total: int) -> None:
        self._mode, self._err, self._total = mode, err, total
        self._bar: Bar | None = None
        self._task: TaskID | None = None
        self._tenths = 0

    def __enter__(self) -> Progress | None:
        if self._mode == "none":
            return None
        if self._mode == "lines":
            return self._line
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
        from rich.progress import Progress as Bar

        self._bar = Bar(
            TextColumn("judging"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=Console(file=self._err),
            transient=True,
            # stdout is the report's (the JSON document's); only stderr's log lines go above the bar
            redirect_stdout=False,
        )
        self._task = self._bar.add_task("judging", total=self._total)
        self._bar.start()
        return self._advance

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def _advance(self, done: int, total: int) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=done, total=total)

    def _line(self, done: int, total: int) -> None:
        # One line per tenth of the set: enough to see it move in a log, few enough to read.
        tenths = done * 10 // total
        if tenths > self._tenths or done == total:
            self._tenths = tenths
            self._err.write(f"{PROG}: judged {done} of {total} pairs\n")
            self._err.flush()


def _read_with_question(pair: LabelledPair, settings: JudgeSettings) -> int:
    """The characters the judge reads besides the answer: the question, and a multi-turn case's earlier turns and
    brief as the settings' context window cuts them."""
    from monitor.calibration.run import pair_event

    event = pair_event(pair, datetime.now(UTC), settings.context_window())
    return len(event.question) + sum(len(t.text) for t in event.context) + len(event.system)


def dry_run_text(pairs: Sequence[LabelledPair], judge: Judge, settings: JudgeSettings, source: str) -> str:
    """What --dry-run prints: the set, the judge and the estimated calls, tokens and cost of judging it."""
    from monitor.replay.estimate import CostModel, estimate

    cost = estimate(
        CostModel.of(judge, settings),
        len(pairs),
        sum(_read_with_question(p, settings) for p in pairs),
        sum(len(p.answer) for p in pairs),
    )
    info = judge.info
    kind = "a word-overlap heuristic, no API calls" if info.heuristic else f"model {info.model}"
    lines = [
        f"set       {len(pairs):,} labelled pairs from {source}",
        f"judge     {info.method} ({info.judge_id}), {kind}",
    ]
    if not cost.calls:
        lines.append(f"to judge  {len(pairs):,} pairs, no API calls: free")
    else:
        usd = "unknown (no price for this model: MONITOR_JUDGE_PRICES)" if cost.usd is None else f"${cost.usd:,.4f}"
        lines += [
            f"to judge  {len(pairs):,} pairs: {cost.calls:,} judge calls",
            f"tokens    about {cost.input_tokens:,} input and {cost.output_tokens:,} output",
            f"estimate  {usd}, list prices",
        ]
    lines.append("nothing was judged (--dry-run)")
    return "\n".join(lines) + "\n"
