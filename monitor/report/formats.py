"""How the report writes numbers and times (pure): the filters of the templates' environment, plain text out (the
templates escape it like any other text)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime


def when(t: datetime | None) -> str:
    """`2026-11-02 09:15:00 UTC`, or an empty string."""
    return "" if t is None else t.strftime("%Y-%m-%d %H:%M:%S UTC")


def num(v: float | None, digits: int = 3) -> str:
    """`v` rounded to `digits` decimals; an empty cell when there is no value."""
    return "" if v is None else f"{v:,.{digits}f}"


def pct(share: float | None, digits: int = 1) -> str:
    """A share (0..1) as a percentage."""
    return "" if share is None else f"{100 * share:.{digits}f} %"


def usd(v: float) -> str:
    """Dollars: cents above a dollar, four decimals below (judge calls cost fractions of a cent)."""
    return f"${v:,.2f}" if abs(v) >= 1 else f"${v:.4f}"


def count(v: int) -> str:
    """An integer with thousands separators."""
    return f"{v:,}"


def signed(v: float | None) -> str:
    """A shift with its sign (`+0.012`, `-0.200`); empty when there is none."""
    return "" if v is None else f"{v:+.3f}"


def seconds(v: float | None) -> str:
    """A duration in seconds to a tenth; empty when there is none."""
    return "" if v is None else f"{v:,.1f} s"


def segment(keys: Iterable[tuple[str, str]]) -> str:
    """An alert's segment as `app=support, prompt_version=v2`, or `all segments` when it keys on nothing."""
    return ", ".join(f"{k}={v}" for k, v in keys) or "all segments"
