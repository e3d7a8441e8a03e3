"""Query results as CSV: plain Unix lines, so that a shell reading one value gets no carriage return with it."""

from __future__ import annotations

import io
from collections.abc import Sequence

from monitor.cli.table import CUT_HINT, fit_widths, print_result


def test_csv_lines_end_in_a_bare_newline() -> None:
    """`--format csv` ends each line with \\n only: `$(relevancy-monitor sql --format csv ... | tail -1)` is the
    value."""
    out = io.StringIO()
    print_result(("conversation_id",), [("conv-62",)], "csv", out=out)
    assert out.getvalue() == "conversation_id\nconv-62\n"


LONG = "Thanks for getting in touch. We also sell gift cards. " * 6 + "Order A17 shipped on 3 March."
COLUMNS = ("event_id", "app", "score", "response")
ROWS = [
    ("9f1c2a70-0001", "support-bot", 0.333333, LONG),
    ("9f1c2a70-0002", "coding-assistant", 1.0, "Order A17 shipped\non 3 March."),
]


def table(columns: Sequence[str], rows: Sequence[Sequence[object]], width: int = 80) -> list[str]:
    """The lines `sql` prints for a table at `width` columns."""
    out = io.StringIO()
    print_result(columns, rows, "table", out=out, width=width)
    return out.getvalue().splitlines()


def test_a_long_text_cell_is_cut_to_fit_80_columns_with_one_hint_line() -> None:
    """At 80 columns a long text cell is cut with "…" instead of folding into a tower: one line per row, the short
    columns whole, and one line after the table pointing to --format csv or json for full values."""
    lines = table(COLUMNS, ROWS)
    assert all(len(line) <= 80 for line in lines), lines
    assert len(lines) == 4 + len(ROWS) + 2  # top, header, rule, rows, bottom; the hint; the row count
    first, second = lines[3], lines[4]
    assert (
        "9f1c2a70-0001" in first
        and "support-bot" in first
        and "0.333333" in first
        and "Thanks for getting" in first
        and "…" in first
    )
    assert (
        "coding-assistant" in second and "Order A17 shipped↵on 3 March." in second
    )  # a newline does not make the row taller
    assert lines[-2] == CUT_HINT and "--format csv" in CUT_HINT and "--format json" in CUT_HINT
    assert lines[-1] == "2 row(s)"


def test_a_table_that_fits_is_printed_whole_without_the_hint() -> None:
    """A result that fits is printed as is: no value cut, no hint."""
    lines = table(("app", "n"), [("support-bot", 3)])
    assert "…" not in "".join(lines) and CUT_HINT not in lines and lines[-1] == "1 row(s)"


def test_values_that_look_like_markup_are_printed_as_they_are() -> None:
    """A value such as "[red]x[/red]" or "[/]" is data: shown literally, never a rich markup error."""
    lines = table(("reasoning",), [("[red]x[/red]",), ("[/]",)])
    assert "[red]x[/red]" in lines[3] and "[/]" in lines[4]


def test_fit_widths_keeps_narrow_columns_and_shares_the_rest() -> None:
    """Columns narrower than an even share keep their width; the wide ones share what is left."""
    assert fit_widths([10, 5, 200, 300], 100) == [10, 5, 42, 43]
    assert fit_widths([10, 5], 100) == [10, 5]
    assert sum(fit_widths([30, 40, 50], 60)) == 60
