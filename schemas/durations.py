"""Durations as people write them in rules and settings: `90s`, `5m`, `1h30m`, `7d`."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(value: Any) -> timedelta:
    """`90s`, `5m`, `1h30m`, `7d` (or a number of seconds) as a timedelta."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise ValueError("expected a duration like 30s, 5m, 1h, 7d")
    if isinstance(value, int | float):
        return timedelta(seconds=float(value))
    if not isinstance(value, str):
        raise ValueError("expected a duration like 30s, 5m, 1h, 7d")
    text = value.strip().lower().replace(" ", "")
    pos, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    if pos != len(text) or not text:
        raise ValueError(f"{value!r} is not a duration like 30s, 5m, 1h30m, 7d")
    return timedelta(seconds=total)


def format_duration(d: timedelta) -> str:
    """A timedelta as a short duration string (`1h30m`, `45s`)."""
    seconds = int(d.total_seconds())
    if seconds == 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts)


Duration = Annotated[timedelta, BeforeValidator(parse_duration)]
