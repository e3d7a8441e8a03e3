"""`relevancy-monitor calibrate`: score a labelled set with the configured judge and report how far to trust it.

Settings as for `judge` (MONITOR_* and the same flags), judging as in the service (`GuardedJudge` with the flow
limits, text redacted as live traffic is). No Kafka, no store."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

from monitor.calibration.agreement import GROUPS, MIN_CATEGORY_PAIRS, Agreement, Bootstrap, Statistic, bucket
from monitor.calibration.labels import SCALES, LabelledPair, Scale, golden_path, read_labels
from monitor.calibration.report import compare, document
from monitor.calibration.run import CalibrationRun, PairOutcome, Progress
from monitor.cli.flags import JUDGE_ENV_ONLY, JUDGE_SETTINGS, add_setting_flags, positive_int, settings_from_args
from monitor.config import Settings
from monitor.judges.base import JudgeFailure, JudgeInfo
from schemas.errors import LabelsError, UsageError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress as Bar
    from rich.progress import TaskID
    from rich.table import Table

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
CLIP_CHARS = 300  # question and answer shown per disagreement in the table (--json has them in full)
MAX_STATEMENTS = 8  # a long answer's statements would bury the next disagreement

ProgressMode = Literal["bar", "lines", "none"]


def register(subparsers: Any) -> None:
    """Add the `calibrate` subcommand to the CLI's subparsers."""
    p = subparsers.add_parser(
        "calibrate",
        help="score a labelled set with the configured judge and report how well it agrees with the labels",
        description="Judge each labelled pair with the configured judge (as `judge` does, under the service's flow limits) "
        "and report agreement with the labels: Spearman rho and Kendall tau-b with bootstrap 95% intervals, quadratic-weighted "
        "Cohen's kappa on the 0-4 buckets, mean absolute error, a low/mid/high confusion table, per-category figures, the "
        "largest disagreements with the judge's reasons, failures and cost. The labels file has one JSON object per line: "
        '{"question": ..., "answer": ... (or "response"), "label": 0-4, "id": ..., "category": ...} ("id", "category" and '
        '"rationale" optional); blank lines are skipped, any other bad line stops with exit 2 naming it. '
        "Exit code 1 if any pair could not be judged (it is left out of the statistics, and listed).",
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--labels", metavar="FILE", help="JSONL file of labelled pairs (required unless --golden)")
    source.add_argument("--golden", action="store_true", help="use the golden set shipped with relevancy-monitor instead of --labels")
    p.add_argument(
        "--label-scale",
        choices=SCALES,
        default="rubric",
        help="rubric: integer labels 0-4 as in the rubric judge; unit: labels 0-1, decimals allowed (default: rubric)",
    )
    p.add_argument("--json", action="store_true", help="print the report as one JSON document (default: tables)")
    p.add_argument("--resamples", type=positive_int, default=2000, metavar="N", help="bootstrap resamples for the intervals (default: 2000)")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="seed of the bootstrap, so a report repeats (default: 0)")
    p.add_argument("--top", type=positive_int, default=10, metavar="N", help="largest disagreements listed (default: 10)")
    add_setting_flags(p, "judge", JUDGE_SETTINGS, JUDGE_ENV_ONLY)
    add_setting_flags(p, "flow and privacy, as in the service", FLOW_SETTINGS)
    p.set_defaults(func=cmd_calibrate)


def cmd_calibrate(ns: argparse.Namespace) -> int:
    """The `calibrate` command: configure logging (to stderr), judge the labelled set, print the report."""
    from monitor.runtime.logs import configure_logging

    settings = settings_from_args(ns)
    configure_logging(settings.log_format, settings.log_level)
    return run_calibrate(ns, settings)


def labels_source(ns: argparse.Namespace) -> Path:
    """The labels file `ns` names: --labels, or the packaged golden set for --golden."""
    if ns.golden:
        return golden_path()
    if ns.labels is None:
        raise UsageError("give --labels FILE or --golden")
    return Path(ns.labels)


def run_calibrate(ns: argparse.Namespace, settings: Settings | None = None, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    """Judge the set `ns` names and print the report to `out`, progress and a failure summary to `err`; raises
    `LabelsError`, `UsageError` or `ConfigError` (exit 2) before any judging for bad input."""
    from monitor.calibration.run import judge_pairs
    from monitor.judges.factory import build_judge
    from monitor.privacy.redactor import build_redactor

    out = out or sys.stdout
    err = err or sys.stderr
    path = labels_source(ns)
    if ns.golden and not path.is_file():
        raise LabelsError(f"the golden set is not installed (no {path})")
    pairs = read_labels(path, ns.label_scale)
    settings = settings or settings_from_args(ns)
    redactor = build_redactor(settings.redaction)  # before the judge: a bad pattern leaks no client
    judge = build_judge(settings.judge_client)
    mode = progress_mode(_is_terminal(err), len(pairs))
    with _ProgressDisplay(mode, err, len(pairs)) as progress:
        run = asyncio.run(judge_pairs(pairs, judge, settings.flow, redactor, progress))
    result = compare(run, Bootstrap(resamples=ns.resamples, seed=ns.seed), ns.top)
    if ns.json:
        out.write(json.dumps(document(run, result, str(path), ns.label_scale), ensure_ascii=False) + "\n")
    else:
        print_report(run, result, str(path), ns.label_scale, _console(out))
    if run.failed:
        err.write(f"{PROG}: {len(run.failed)} of {len(pairs)} pairs could not be judged; they are left out of the statistics\n")
        return 1
    return 0


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
            redirect_stdout=False,  # stdout is the report's (the JSON document's); only stderr's log lines go above the bar
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


# ---- the report as tables ------------------------------------------------------------------------------------


def _console(out: IO[str]) -> Console:
    from rich.console import Console

    # The terminal's width when `out` is one (else 80, or $COLUMNS): every table wraps to fit it.
    return Console(file=out, highlight=False)


def print_report(run: CalibrationRun, result: Agreement, source: str, scale: Scale, console: Console) -> None:
    """The report for people: the judge, the set, cost, the statistics, the largest disagreements, failures."""
    from rich.text import Text

    for line in header_lines(run, source, scale, len(run.outcomes)):
        console.print(Text(line))
    console.print()
    console.print(_statistics_table(result))
    console.print(Text(_statistics_note(result)))
    console.print()
    console.print(_confusion_table(result))
    console.print(Text(CONFUSION_NOTE))
    if any(c.category is not None for c in result.categories):
        console.print()
        console.print(_categories_table(result))
        console.print(Text(CATEGORIES_NOTE))
    console.print()
    _print_disagreements(run, result, scale, console)
    if run.failed:
        console.print()
        _print_failures(run.failed, console)


def header_lines(run: CalibrationRun, source: str, scale: Scale, total: int) -> list[str]:
    """The lines above the tables: which judge, which set, how many judged, what it cost."""
    scale_text = "rubric scale 0–4" if scale == "rubric" else "unit scale 0–1"
    failed = len(run.failed)
    judged = f"judged {total - failed} of {total} pairs"
    if failed:
        judged += f"; {failed} failed (left out of the statistics, listed at the end)"
    return [
        f"Calibration of the {_judge_text(run.judge)}",
        f"judge_id: {run.judge.judge_id}",
        f"labels: {source} ({total} pairs, {scale_text})",
        judged,
        *_cost_lines(run),
    ]


def _judge_text(info: JudgeInfo) -> str:
    if info.heuristic:
        return f"{info.method} judge (a word-overlap heuristic, not an LLM)"
    return f"{info.method} judge (model {info.model})"


def _cost_lines(run: CalibrationRun) -> list[str]:
    s = run.spend
    if run.judge.heuristic:
        return ["cost: none (an offline heuristic: no API calls)"]
    usd = "unknown (no price for the model; see MONITOR_JUDGE_PRICES)" if s.cost_usd is None else f"${s.cost_usd:.6f}"
    return [
        f"cost: {usd} for {s.calls:,} judge calls, failed ones included",
        f"tokens: {s.tokens:,} (in {s.input_tokens:,}, out {s.output_tokens:,}, cache read {s.cache_read_tokens:,}, "
        f"cache write {s.cache_write_tokens:,})",
    ]


def _value_text(s: Statistic) -> str:
    return "undefined" if s.value is None else f"{s.value:.3f}"


def _ci_text(s: Statistic, with_ci: bool) -> str:
    if s.value is None:
        return f"({s.undefined})"
    if not with_ci:
        return ""
    if s.ci is None:
        return "(no usable resample)"
    return f"{s.ci[0]:.3f} to {s.ci[1]:.3f}"


def _statistics_table(result: Agreement) -> Table:
    from rich.table import Table
    from rich.text import Text

    level = f"{result.bootstrap.confidence:.0%}"
    table = Table(title=f"Agreement with the labels over {result.n} judged pairs", title_justify="left")
    table.add_column("statistic")
    table.add_column("value", justify="right")
    table.add_column(f"{level} interval")
    rows = [
        ("Spearman ρ", result.spearman, True),
        ("Kendall τ-b", result.kendall, True),
        ("Cohen's κ, quadratic (0–4 buckets)", result.kappa, False),
        ("mean absolute error (0..1)", result.mae, False),
    ]
    for name, s, with_ci in rows:
        table.add_row(name, _value_text(s), Text(_ci_text(s, with_ci)))
    return table


def _statistics_note(result: Agreement) -> str:
    boot = result.bootstrap
    return f"{boot.confidence:.0%} intervals: percentile bootstrap over {boot.resamples:,} resamples of the pairs, seed {boot.seed}."


def _confusion_table(result: Agreement) -> Table:
    from rich.table import Table

    table = Table(title="Labels (rows) against the judge (columns)", title_justify="left")
    table.add_column("label \\ judge")
    for g in GROUPS:
        table.add_column(g, justify="right")
    table.add_column("total", justify="right")
    for g, row in zip(GROUPS, result.confusion, strict=True):
        table.add_row(g, *(str(c) for c in row), str(sum(row)))
    return table


CONFUSION_NOTE = "low = buckets 0–1, mid = 2, high = 3–4; the judge's bucket is round(score × 4)."


def _categories_table(result: Agreement) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(title="By category", title_justify="left")
    table.add_column("category", overflow="fold")
    for col in ("n", "mean label", "mean judge", "MAE", "ρ"):
        table.add_column(col, justify="right")
    for c in result.categories:
        rho = "—" if c.spearman.value is None else f"{c.spearman.value:.3f}"
        name = "(none)" if c.category is None else c.category
        table.add_row(Text(name), str(c.n), f"{c.mean_reference:.3f}", f"{c.mean_score:.3f}", f"{c.mae:.3f}", rho)
    return table


CATEGORIES_NOTE = f"Labels and scores on the 0..1 scale; ρ for categories of {MIN_CATEGORY_PAIRS} pairs or more."


def _print_disagreements(run: CalibrationRun, result: Agreement, scale: Scale, console: Console) -> None:
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    scored = run.scored
    if not result.disagreements:
        console.print(Text("No disagreements: the judge's score equals the label on every judged pair."))
        return
    console.print(Text(f"Largest disagreements ({len(result.disagreements)} of {len(scored)} judged pairs)", style="bold"))
    for rank, index in enumerate(result.disagreements, start=1):
        o = scored[index]
        console.print(Text(f"{rank}. {disagreement_heading(o, scale)}"))
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column()
        grid.add_row("Q:", Text(_clip(o.pair.question)))
        grid.add_row("A:", Text(_clip(o.pair.answer)))
        grid.add_row("judge:", Text(_reasoning(o)))
        statements = _statements(o)
        for verdict, statement, reason in statements[:MAX_STATEMENTS]:
            text = _clip(statement) + (f" ({_clip(reason)})" if reason else "")
            grid.add_row(Text(verdict, style=_VERDICT_STYLE.get(verdict, "")), Text(text))
        if len(statements) > MAX_STATEMENTS:
            grid.add_row("", Text(f"… {len(statements) - MAX_STATEMENTS} more statements (--json lists them all)"))
        console.print(Padding(grid, (0, 0, 0, 3), expand=False))


_VERDICT_STYLE = {"yes": "green", "no": "red", "idk": "yellow"}


def disagreement_heading(o: PairOutcome, scale: Scale) -> str:
    """One disagreement's first line: which pair, its label, the judge's score and bucket, and the gap."""
    j = o.judgement
    assert j is not None
    label = f"{o.pair.label:g} ({o.pair.label_unit:.2f})" if scale == "rubric" else f"{o.pair.label:.2f}"
    return f"{_where(o.pair)}: label {label}, judge {j.score:.2f} (bucket {bucket(j.score)}), gap {abs(o.pair.label_unit - j.score):.2f}"


def _where(pair: LabelledPair) -> str:
    where = f"{pair.id}, line {pair.line}" if pair.id is not None else f"line {pair.line}"
    return f"{where} [{pair.category}]" if pair.category is not None else where


def _reasoning(o: PairOutcome) -> str:
    j = o.judgement
    return j.reasoning if j is not None and j.reasoning else "(no reasoning given)"


def _statements(o: PairOutcome) -> Sequence[tuple[str, str, str]]:
    j = o.judgement
    if j is None:
        return ()
    return [(v, s, r) for s, v, r in zip(j.statements, j.verdicts, j.verdict_reasons, strict=True)]


def _print_failures(failed: Sequence[PairOutcome], console: Console) -> None:
    from rich.padding import Padding
    from rich.text import Text

    console.print(Text(f"Pairs the judge could not score ({len(failed)}; left out of every statistic above)", style="bold"))
    for o in failed:
        verdict = o.verdict
        message = verdict.message if isinstance(verdict, JudgeFailure) else ""
        console.print(Padding(Text(f"{_where(o.pair)}: {message}"), (0, 0, 0, 3), expand=False))


def _clip(text: str, limit: int = CLIP_CHARS) -> str:
    one_line = " ".join(text.split())  # the texts' own line breaks would make each disagreement hard to scan
    return one_line if len(one_line) <= limit else one_line[: limit - 1] + "…"
