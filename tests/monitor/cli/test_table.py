"""Query results as CSV: plain Unix lines, so that a shell reading one value gets no carriage return with it."""

from __future__ import annotations

import io

from monitor.cli.table import print_result


def test_csv_lines_end_in_a_bare_newline() -> None:
    """`--format csv` ends each line with \\n only: `$(relevancy-monitor sql --format csv ... | tail -1)` is the value."""
    out = io.StringIO()
    print_result(("conversation_id",), [("conv-62",)], "csv", out=out)
    assert out.getvalue() == "conversation_id\nconv-62\n"
