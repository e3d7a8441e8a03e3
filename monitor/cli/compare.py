"""`relevancy-monitor compare`: how two judges agree on the events both scored ok, for a shadow judge against the
primary (MONITOR_SHADOW_JUDGE) or any two judge_ids of the store.

It reads only: it opens an existing store (no DDL, nothing created), reads with FINAL, and needs no judge key."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from monitor.cli.time_flags import add_span_flags, span_from_args
from monitor.config import load_settings
from schemas.errors import UsageError

if TYPE_CHECKING:
    # Types only: the statistics and the store are imported when the command runs, so building the parser stays cheap.
    from monitor.calibration.agreement import Statistic
    from monitor.compare.agreement import Comparison, SharedEvent
    from monitor.compare.queries import JudgeRows

DEFAULT_SINCE = "-7d"


def register(subparsers: Any) -> None:
    """Add the `compare` command to the CLI's subparsers."""
    from monitor.cli.flags import add_store_flags

    p = subparsers.add_parser(
        "compare",
        help="compare two judges on the events both scored: rank correlation, mean difference, confusion, largest "
        "disagreements",
        description="Compare two judges (a primary and its shadow judge, say) on the events in the range that both "
        "scored ok: Spearman ρ, "
        "the mean difference b − a with a 95% interval, the mean absolute difference, a low/high table (score below "
        "0.5 or not) and the "
        "10 events they disagree on most. Reads only: creates nothing in the store.",
    )
    p.add_argument(
        "--judge-a",
        default=None,
        metavar="ID",
        help="judge_id of the reference judge (default: when exactly two judges have rows in the range, the one with "
        "more rows)",
    )
    p.add_argument(
        "--judge-b",
        default=None,
        metavar="ID",
        help="judge_id of the judge compared with it (default: the other of the two)",
    )
    add_span_flags(p, DEFAULT_SINCE)
    p.add_argument(
        "--json", action="store_true", help="print one JSON document (default: text for people, fitted to the terminal)"
    )
    add_store_flags(p)
    p.set_defaults(func=cmd_compare)


def cmd_compare(ns: argparse.Namespace) -> int:
    """`compare`: read the shared events of two judges and print how they agree."""
    return run_compare(ns)


@dataclass(frozen=True, slots=True)
class Choice:
    """The two judges to compare, or why the user must choose them (`problem`, one line)."""

    a: JudgeRows | None = None
    b: JudgeRows | None = None
    problem: str = ""


def choose_judges(judges: list[JudgeRows], judge_a: str | None, judge_b: str | None, span: str) -> Choice:
    """The judges named, the missing ones filled in when exactly two judges have rows in the range (a: the one with
    more rows), or the problem to report with the list of judges."""
    by_id = {j.judge_id: j for j in judges}
    for flag, given in (("--judge-a", judge_a), ("--judge-b", judge_b)):
        if given is not None and given not in by_id:
            return Choice(problem=f"{flag}: judge {given} has no rows {span}")
    if judge_a is not None and judge_b is not None:
        return Choice(by_id[judge_a], by_id[judge_b])
    if not judges:
        return Choice(problem=f"no judge has rows {span}: widen --since/--until")
    if len(judges) != 2:
        return Choice(problem=f"{len(judges)} judge(s) have rows {span}: choose two with --judge-a and --judge-b")
    first, second = judges
    if judge_a is not None:
        return Choice(by_id[judge_a], second if judge_a == first.judge_id else first)
    if judge_b is not None:
        return Choice(second if judge_b == first.judge_id else first, by_id[judge_b])
    return Choice(first, second)


def run_compare(ns: argparse.Namespace, out: TextIO | None = None, width: int | None = None) -> int:
    """Run the comparison named by `ns` and print it to `out` (text fitted to `width`, default the terminal's, or
    JSON); raises `UsageError` (one line) on bad input or when the judges must be chosen, after listing them."""
    from monitor.cli.flags import STORE_SETTINGS
    from monitor.compare.agreement import compare
    from monitor.compare.queries import judges_in_range, shared_scores, with_detail
    from monitor.store.connection import ClickHouseStore

    out = out or sys.stdout
    now = datetime.now(UTC)
    since, until = span_from_args(ns, now)
    if ns.judge_a is not None and ns.judge_a == ns.judge_b:
        raise UsageError(f"--judge-a and --judge-b are both {ns.judge_a}: name two judges")
    settings = load_settings(
        **{name: getattr(ns, name) for name in STORE_SETTINGS if getattr(ns, name, None) is not None}
    )
    span = f"between {_time(since)} and {_time(until)}"
    store = ClickHouseStore.from_settings(settings.store)
    try:
        store.open_for_reads()
        judges = judges_in_range(store, since, until)
        choice = choose_judges(judges, ns.judge_a, ns.judge_b, span)
        if choice.a is None or choice.b is None:
            _print_judges(judges, span, ns.json, out, width)
            raise UsageError(choice.problem)
        a, b = choice.a, choice.b
        comparison = compare(shared_scores(store, a.judge_id, b.judge_id, since, until))
        worst = with_detail(store, comparison.disagreements, a.judge_id, b.judge_id, since, until)
    finally:
        store.close()
    if ns.json:
        out.write(json.dumps(comparison_document(a, b, since, until, comparison, worst)) + "\n")
    else:
        print_comparison(a, b, span, comparison, worst, out, width)
    return 0


# ---- output ------------------------------------------------------------------------------------------------


def _time(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _judge_doc(j: JudgeRows) -> dict[str, Any]:
    return {
        "judge_id": j.judge_id,
        "judge": j.judge,
        "judge_model": j.judge_model,
        "rows": j.rows,
        "ok_rows": j.ok_rows,
    }


def _stat_doc(s: Statistic) -> dict[str, Any]:
    return {"value": s.value, "ci": list(s.ci) if s.ci else None, "undefined": s.undefined}


def comparison_document(
    a: JudgeRows, b: JudgeRows, since: datetime, until: datetime, c: Comparison, worst: list[SharedEvent]
) -> dict[str, Any]:
    """The comparison as one JSON-ready document."""
    m = c.confusion
    return {
        "since": since.isoformat(),
        "until": until.isoformat(),
        "judge_a": _judge_doc(a),
        "judge_b": _judge_doc(b),
        "shared_events": c.n,
        "spearman_rho": _stat_doc(c.spearman),
        "mean_difference_b_minus_a": {**_stat_doc(c.mean_difference), "confidence": 0.95},
        "mean_absolute_difference": _stat_doc(c.mae),
        "confusion": {
            "low_below": 0.5,
            "a_low_b_low": m.a_low_b_low,
            "a_low_b_high": m.a_low_b_high,
            "a_high_b_low": m.a_high_b_low,
            "a_high_b_high": m.a_high_b_high,
        },
        "disagreements": [
            {
                "event_id": e.event_id,
                "app": e.app,
                "question": e.question,
                "score_a": e.score_a,
                "score_b": e.score_b,
                "difference": e.difference,
                "verdicts_a": list(e.verdicts_a),
                "verdicts_b": list(e.verdicts_b),
            }
            for e in worst
        ],
    }


def _print_judges(judges: list[JudgeRows], span: str, as_json: bool, out: TextIO, width: int | None) -> None:
    from monitor.cli.table import print_result

    if as_json:
        out.write(json.dumps({"judges": [_judge_doc(j) for j in judges]}) + "\n")
        return
    out.write(f"judges with rows {span}:\n")
    print_result(
        ("judge_id", "judge", "judge_model", "rows", "ok_rows"),
        [(j.judge_id, j.judge, j.judge_model, j.rows, j.ok_rows) for j in judges],
        "table",
        out,
        width,
    )


def _fit(line: str, width: int) -> str:
    """`line` cut with "…" to `width` terminal cells."""
    from rich.cells import cell_len, set_cell_size

    return line if cell_len(line) <= width else set_cell_size(line, width - 1) + "…"


def _flat(text: str) -> str:
    # One line per value: a newline or tab inside a question would break the layout.
    return " ".join(text.split())


def _num(s: Statistic, signed: bool = False) -> str:
    if s.value is None:
        return f"undefined ({s.undefined})"
    text = f"{s.value:+.3f}" if signed else f"{s.value:.3f}"
    if s.ci is not None:
        text += f"  95% CI {s.ci[0]:+.3f} .. {s.ci[1]:+.3f}"
    return text


def print_comparison(
    a: JudgeRows,
    b: JudgeRows,
    span: str,
    c: Comparison,
    worst: list[SharedEvent],
    out: TextIO,
    width: int | None = None,
) -> None:
    """The comparison for people, each line within `width` (default: the terminal's, else 80)."""
    from rich.console import Console

    w = width or Console(file=out).width
    lines = [f"events {span}"]
    pad = max(len(a.judge_id), len(b.judge_id))
    for name, j in (("a", a), ("b", b)):
        lines.append(
            f"  {name}  {j.judge_id:<{pad}}  {j.rows:>6} rows {j.ok_rows:>6} ok  {j.judge} {j.judge_model}".rstrip()
        )
    m = c.confusion
    share = f" ({100 * m.same_side / c.n:.0f}%)" if c.n else ""
    lines += [
        "",
        f"shared events (same event, both ok)  {c.n}",
        f"Spearman ρ                           {_num(c.spearman)}",
        f"mean difference b - a                {_num(c.mean_difference, signed=True)}",
        f"mean absolute difference             {_num(c.mae)}",
        "",
        "score < 0.5 is low      b low   b high",
        f"  a low              {m.a_low_b_low:8d} {m.a_low_b_high:8d}",
        f"  a high             {m.a_high_b_low:8d} {m.a_high_b_high:8d}",
        f"  same side: {m.same_side} of {c.n}{share}",
    ]
    if worst:
        lines += ["", f"largest disagreements (|b - a|), {len(worst)} shown", "   b - a      a      b  app / event_id"]
        for e in worst:
            lines.append(f"  {e.difference:+.3f}  {e.score_a:.3f}  {e.score_b:.3f}  {e.app} / {e.event_id}")
            lines.append(f"{'':9}q: {_flat(e.question) or '(text not stored)'}")
            if e.verdicts_a or e.verdicts_b:
                lines.append(f"{'':9}verdicts a: {' '.join(e.verdicts_a) or '-'}  b: {' '.join(e.verdicts_b) or '-'}")
    elif c.n:
        lines += ["", "no disagreements: both judges gave every shared event the same score"]
    out.write("".join(_fit(line, w) + "\n" if line else "\n" for line in lines))
