"""Printing query results for people (a table) or for programs (CSV, JSON lines)."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any, TextIO


def _cell(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, float):
        return round(value, 6)
    return value


def print_result(columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str, out: TextIO | None = None) -> None:
    """Print query results as a table, CSV or JSON lines (to stdout unless `out` is given)."""
    out = out or sys.stdout  # looked up per call: a default bound at import would miss a redirected stdout
    if fmt == "csv":
        w = csv.writer(out, lineterminator="\n")  # a shell reading `sql --format csv` gets no \r at line ends
        w.writerow(columns)
        w.writerows([[_cell(v) for v in r] for r in rows])
    elif fmt == "json":
        for r in rows:
            out.write(json.dumps({c: _cell(v) for c, v in zip(columns, r, strict=True)}, default=str) + "\n")
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(*columns, show_lines=False)
        for r in rows:
            table.add_row(*(str(_cell(v)) for v in r))
        Console(file=out).print(table)
        Console(file=out, stderr=False).print(f"{len(rows)} row(s)", style="dim")
