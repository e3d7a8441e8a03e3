"""The words and numbers every alert command prints alike: counts, figures, segments, and the console."""

from __future__ import annotations

from datetime import timedelta
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

# Below this the tables' wrapped first column gets too narrow to read: they say so and point at --json instead.
MIN_WIDTH = 60


def too_narrow(console: Console, tables: str) -> bool:
    """Whether `console` is too narrow for `tables`; if so, it says so and points at --json."""
    if console.width >= MIN_WIDTH:
        return False
    console.print(f"too narrow for {tables} ({console.width} columns, {MIN_WIDTH} needed): use --json", soft_wrap=True)
    return True


def plural(n: int, noun: str) -> str:
    """`1 rule`, `2 rules`."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def number(v: float | None, digits: int = 4) -> str:
    """`v` to `digits` significant digits; empty for None."""
    return "" if v is None else f"{v:.{digits}g}"


def segment_text(segment: dict[str, str]) -> str:
    """`app=a model=m`, or `all traffic` for the segment of no fields."""
    return " ".join(f"{k}={v}" for k, v in segment.items()) or "all traffic"


def console_for(out: IO[str]) -> Console:
    """A rich console on `out`, as wide as the terminal when `out` is one (else 80, or $COLUMNS)."""
    from rich.console import Console

    return Console(file=out)


NO_CONTENT_WINDOW = timedelta(hours=1)


def describe_no_content(per_app: dict[str, int]) -> str:
    """The line for OpenTelemetry calls that came without text: traffic that no score stands for."""
    apps = ", ".join(f"{app} {n:,}" for app, n in per_app.items())
    return (
        f"{plural(sum(per_app.values()), 'OpenTelemetry LLM call')} in the last hour came without their text and "
        f"were not scored ({apps}): turn on the instrumentation's content capture (docs/opentelemetry.md)"
    )
