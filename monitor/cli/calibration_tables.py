"""`calibrate`'s report for people: the judge, the set and the cost, the agreement statistics, the confusion and
category tables, the largest disagreements with the judge's reasons, and the pairs that could not be judged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO, TYPE_CHECKING

from monitor.calibration.agreement import GROUPS, MIN_CATEGORY_PAIRS, Agreement, CategoryRow, Statistic, bucket
from monitor.calibration.labels import LabelledPair, Scale
from monitor.calibration.run import CalibrationRun, PairOutcome
from monitor.judges.base import JudgeFailure, JudgeInfo

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

CLIP_CHARS = 300  # question and answer shown per disagreement in the table (--json has them in full)
MAX_STATEMENTS = 8  # a long answer's statements would bury the next disagreement


def report_console(out: IO[str]) -> Console:
    """A rich console on `out` for the report, without highlighting."""
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
    if result.tags:
        console.print()
        console.print(_tags_table(result))
        console.print(Text(TAGS_NOTE))
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
        ("Cohen's κ, quadratic (0–4 buckets)", result.kappa, True),
        ("mean absolute error (0..1)", result.mae, False),
    ]
    for name, s, with_ci in rows:
        table.add_row(name, _value_text(s), Text(_ci_text(s, with_ci)))
    return table


def _statistics_note(result: Agreement) -> str:
    boot = result.bootstrap
    over = f"{boot.resamples:,} resamples of the pairs"
    return f"{boot.confidence:.0%} intervals: percentile bootstrap over {over}, seed {boot.seed}."


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
    return _rows_table("By category", "category", result.categories, "(none)")


def _tags_table(result: Agreement) -> Table:
    return _rows_table("By tag", "tag", result.tags, "(untagged)")


def _rows_table(title: str, what: str, rows: tuple[CategoryRow, ...], unnamed: str) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, title_justify="left")
    table.add_column(what, overflow="fold")
    for col in ("n", "mean label", "mean judge", "MAE", "ρ"):
        table.add_column(col, justify="right")
    for c in rows:
        rho = "—" if c.spearman.value is None else f"{c.spearman.value:.3f}"
        name = unnamed if c.category is None else c.category
        table.add_row(Text(name), str(c.n), f"{c.mean_reference:.3f}", f"{c.mean_score:.3f}", f"{c.mae:.3f}", rho)
    return table


CATEGORIES_NOTE = f"Labels and scores on the 0..1 scale; ρ for categories of {MIN_CATEGORY_PAIRS} pairs or more."
TAGS_NOTE = "A pair with several tags counts under each; multi_turn pairs are judged with their earlier turns."


def _print_disagreements(run: CalibrationRun, result: Agreement, scale: Scale, console: Console) -> None:
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    scored = run.scored
    if not result.disagreements:
        console.print(Text("No disagreements: the judge's score equals the label on every judged pair."))
        return
    heading = f"Largest disagreements ({len(result.disagreements)} of {len(scored)} judged pairs)"
    console.print(Text(heading, style="bold"))
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
    gap = abs(o.pair.label_unit - j.score)
    return f"{_where(o.pair)}: label {label}, judge {j.score:.2f} (bucket {bucket(j.score)}), gap {gap:.2f}"


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

    heading = f"Pairs the judge could not score ({len(failed)}; left out of every statistic above)"
    console.print(Text(heading, style="bold"))
    for o in failed:
        verdict = o.verdict
        message = verdict.message if isinstance(verdict, JudgeFailure) else ""
        console.print(Padding(Text(f"{_where(o.pair)}: {message}"), (0, 0, 0, 3), expand=False))


def _clip(text: str, limit: int = CLIP_CHARS) -> str:
    one_line = " ".join(text.split())  # the texts' own line breaks would make each disagreement hard to scan
    return one_line if len(one_line) <= limit else one_line[: limit - 1] + "…"
