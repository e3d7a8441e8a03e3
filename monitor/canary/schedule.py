"""When the next canary run is due (pure): `interval` after the later of the last run stored for this judge and
labelled set and the last run this process started (a run that failed before it was written waits a whole interval
too, rather than being retried every round at the provider's expense)."""

from __future__ import annotations

from datetime import datetime, timedelta


def next_due(last_stored: datetime | None, last_started: datetime | None, interval: timedelta) -> datetime | None:
    """When the next run is due; None when no run is known (due at once)."""
    known = [t for t in (last_stored, last_started) if t is not None]
    return max(known) + interval if known else None


def is_due(now: datetime, due: datetime | None) -> bool:
    """Whether a run due at `due` (None: at once) should start at `now`."""
    return due is None or now >= due
