"""The tree drawn in schemas/errors.py's docstring is the class tree: one row per class, each under its base."""

from __future__ import annotations

import inspect
import re

import schemas.errors as errors
from schemas.errors import MonitorError

# A row: the indent, the branch marks (one 4-column step per level), the class name, its description.
ROW = re.compile(r"^    (?P<steps>(?:[│ ]   )*)[├└]── (?P<name>[A-Za-z]+) +(?P<text>\S.*)$")


def _drawing() -> list[str]:
    """The docstring's lines from the root row to the first blank line after it."""
    lines = (errors.__doc__ or "").splitlines()
    start = lines.index("    MonitorError")
    end = lines.index("", start)
    return lines[start + 1 : end]


def test_every_row_of_the_drawing_is_one_class_under_its_base_within_120_columns() -> None:
    """No description wraps into the next row, and each row's depth names the class's real parent."""
    rows = _drawing()
    assert all(len(row) <= 120 for row in rows), [row for row in rows if len(row) > 120]
    parents: list[str] = ["MonitorError"]
    drawn: dict[str, str] = {}
    for row in rows:
        match = ROW.match(row)
        assert match, f"not a tree row: {row!r}"
        depth = len(match["steps"]) // 4
        assert depth < len(parents), f"row deeper than its parent: {row!r}"
        del parents[depth + 1 :]
        drawn[match["name"]] = parents[depth]
        parents.append(match["name"])
    classes = {
        name: cls.__bases__[0].__name__
        for name, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, MonitorError) and cls is not MonitorError
    }
    assert drawn == classes
