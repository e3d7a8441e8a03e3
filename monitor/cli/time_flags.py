"""Time and duration flags of the commands that read history (`alerts backtest`, `replay`, `report`, `compare`):
one wording, one parser, one refusal of an empty range for all of them."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta

from schemas.durations import parse_duration
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
        forms = "ISO 8601 (2026-11-29T09:00:00Z) nor relative (-2h, -7d) nor now"
        raise UsageError(f"{flag}: {value!r} is neither {forms}") from None
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


TIME_FORMS = "ISO 8601, UTC when it has no offset (2026-11-30T09:00:00Z), or relative ({flag}=-24h)"


def add_span_flags(parser: argparse.ArgumentParser, since_default: str | None, *, since_absent: str = "") -> None:
    """Add --since (required when `since_default` is None, unless `since_absent` says what its absence means, when
    it is None) and --until (default now) with the shared wording."""
    since_tail = (
        f"default: {since_absent}"
        if since_absent
        else "required"
        if since_default is None
        else f"default: {since_default}"
    )
    parser.add_argument(
        "--since",
        required=since_default is None and not since_absent,
        default=since_default,
        metavar="TIME",
        help=f"start of the range: {TIME_FORMS.format(flag='--since')} ({since_tail})",
    )
    parser.add_argument(
        "--until",
        default="now",
        metavar="TIME",
        help=f"end of the range, excluded: {TIME_FORMS.format(flag='--until')}, or now (default: now)",
    )


def optional_span_from_args(ns: argparse.Namespace, now: datetime) -> tuple[datetime | None, datetime]:
    """(since, until) where --since may be absent (None); raises `UsageError` like `span_from_args`."""
    if ns.since is None:
        return None, parse_time("--until", ns.until, now)
    return span_from_args(ns, now)


def span_from_args(ns: argparse.Namespace, now: datetime) -> tuple[datetime, datetime]:
    """(since, until) of --since and --until; raises `UsageError` when either is unreadable or the range is empty."""
    since, until = parse_time("--since", ns.since, now), parse_time("--until", ns.until, now)
    if until <= since:
        raise UsageError(f"--until ({until.isoformat()}) must be after --since ({since.isoformat()})")
    return since, until
