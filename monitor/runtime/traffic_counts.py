"""Per-segment traffic counts (consumed, sampled, not sampled, dead-lettered) per minute: a small aggregate
beside the scores, so volume per segment is queryable without a row per event.

Counts are approximate across crashes (a crash loses the unflushed minute; a redelivery counts again)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

COLUMNS = ("minute", "app", "model", "prompt_version", "consumed", "sampled", "not_sampled", "dead_lettered")
_FIELDS = ("consumed", "sampled", "not_sampled", "dead_lettered")

Segment = tuple[datetime, str, str, str]


def minute_of(epoch_s: float) -> datetime:
    """The UTC minute containing `epoch_s`."""
    return datetime.fromtimestamp(epoch_s - epoch_s % 60, tz=UTC)


class TrafficCounter:
    """Accumulates counts per (minute, app, model, prompt_version) until `drain` hands them to the store."""

    def __init__(self) -> None:
        self._counts: dict[Segment, Counter[str]] = {}

    def add(self, epoch_s: float, app: str, model: str, prompt_version: str, field: str) -> None:
        """Count one event under `field` (consumed, sampled, not_sampled or dead_lettered)."""
        key = (minute_of(epoch_s), app, model, prompt_version)
        self._counts.setdefault(key, Counter())[field] += 1

    def drain(self) -> list[tuple[object, ...]]:
        """Rows to insert (in `COLUMNS` order), emptying the counter."""
        counts, self._counts = self._counts, {}
        return [(*seg, *(c[f] for f in _FIELDS)) for seg, c in counts.items()]

    def restore(self, rows: list[tuple[object, ...]]) -> None:
        """Put back rows whose insert failed, so they are written with the next batch."""
        for row in rows:
            seg = (row[0], row[1], row[2], row[3])
            c = self._counts.setdefault(seg, Counter())  # type: ignore[arg-type]
            for f, v in zip(_FIELDS, row[4:], strict=True):
                c[f] += int(v)  # type: ignore[call-overload]
