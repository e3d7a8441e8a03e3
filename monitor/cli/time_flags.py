"""Time and duration flags of the commands that read history (`alerts`, `replay`, `report`, `compare`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from monitor.alerts.durations import parse_duration
from schemas.errors import UsageError


def duration_flag(flag: str, value: str) -> timedelta:
    """A positive duration (`30s`, `5m`, `1h`); raises `UsageError` naming `flag`."""
    try:
        d = parse_duration(value)
    except ValueError as e:
        raise UsageError(f"{flag}: {e}") from None
    if d.total_seconds() <= 0:
        raise UsageError(f"{flag}: must be positive")
    return d


def parse_time(flag: str, value: str, now: datetime) -> datetime:
    """ISO 8601 (UTC when no offset), `now`, or a relative duration like `-2d` / `2d` (before now); raises
    `UsageError` naming `flag`."""
    text = value.strip()
    if text == "now":
        return now
    try:
        return now - parse_duration(text.lstrip("-"))
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        forms = "ISO 8601 (2026-11-29T09:00:00Z) nor relative (-2h, -7d)"
        raise UsageError(f"{flag}: {value!r} is neither {forms}") from None
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
