"""Printing query results for people (a table that fits the terminal) or for programs (CSV, JSON lines)."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Sequence
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from rich.console import JustifyMethod

CUT_HINT = "some values are cut to fit: --format csv or --format json shows them in full"


def _cell(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, float):
        return round(value, 6)
    return value


def _shown(value: Any) -> str:
    # One line per row: a newline inside a value would otherwise make the row as tall as the text.
    return str(_cell(value)).replace("\r\n", "↵").replace("\n", "↵").replace("\r", "↵").replace("\t", " ")


def fit_widths(natural: Sequence[int], available: int) -> list[int]:
    """Column widths within `available` characters: a column narrower than an even share keeps its width, the wider
    ones share the rest evenly (so ids and numbers stay whole and long text is cut); each keeps at least 1."""
    widths = list(natural)
    if sum(natural) <= available:
        return widths
    remaining = available
    order = sorted(range(len(natural)), key=lambda i: natural[i])
    for placed, i in enumerate(order):
        widths[i] = max(1, min(natural[i], remaining // (len(order) - placed)))
        remaining -= widths[i]
    return widths


def _numeric(rows: Sequence[Sequence[Any]], index: int) -> bool:
    values = [r[index] for r in rows if r[index] is not None]
    return bool(values) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def print_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO, width: int | None = None) -> None:
    """A table that fits the console (`width`, default the terminal's): one line per row, long values cut with "…",
    then a dim line saying how to see them in full when any was cut, and the row count."""
    from rich.cells import cell_len
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=out, width=width)
    cells = [[_shown(v) for v in r] for r in rows]
    natural = [max([cell_len(c), *(cell_len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    widths = fit_widths(
        natural, console.width - (3 * len(columns) + 1)
    )  # each column: 2 of padding and a border; 1 more edge
    table = Table(show_lines=False)
    for i, name in enumerate(columns):
        justify: JustifyMethod = "right" if _numeric(rows, i) else "left"
        table.add_column(Text(name), width=widths[i], no_wrap=True, overflow="ellipsis", justify=justify)
    for r in cells:
        table.add_row(*(Text(c) for c in r))  # Text: a value like "[red]" is data, not rich markup
    console.print(table)
    if any(w < n for w, n in zip(widths, natural, strict=True)):
        console.print(CUT_HINT, style="dim", markup=False, highlight=False)
    console.print(f"{len(rows)} row(s)", style="dim", highlight=False)


def print_result(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str, out: TextIO | None = None, width: int | None = None
) -> None:
    """Print query results as a table (fitted to `width`, default the terminal's), CSV or JSON lines (to stdout
    unless `out` is given)."""
    out = out or sys.stdout  # looked up per call: a default bound at import would miss a redirected stdout
    if fmt == "csv":
        w = csv.writer(out, lineterminator="\n")  # a shell reading `sql --format csv` gets no \r at line ends
        w.writerow(columns)
        w.writerows([[_cell(v) for v in r] for r in rows])
    elif fmt == "json":
        for r in rows:
            out.write(json.dumps({c: _cell(v) for c, v in zip(columns, r, strict=True)}, default=str) + "\n")
    else:
        print_table(columns, rows, out, width)
