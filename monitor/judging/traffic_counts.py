"""Per-segment traffic counts (consumed, sampled, not sampled, dead-lettered, no content) per minute: a small aggregate
beside the scores, so volume per segment is queryable without a row per event.

Counts are approximate across crashes (a crash loses the unflushed minute; a redelivery counts again)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

_FIELDS = ("consumed", "sampled", "not_sampled", "dead_lettered", "no_content")
COLUMNS = ("minute", "app", "model", "prompt_version", *_FIELDS)
FIELD_INDEX = {f: i for i, f in enumerate(_FIELDS)}

Segment = tuple[datetime, str, str, str]
# A segment keyed by its minute's number (epoch seconds // 60): what the pipeline counts a fetched batch into, cheaper
# per event than a datetime; `add_batch` turns it into a `Segment`.
MinuteSegment = tuple[int, str, str, str]


def minute_of(epoch_s: float) -> datetime:
    """The UTC minute containing `epoch_s`."""
    return datetime.fromtimestamp(epoch_s - epoch_s % 60, tz=UTC)


def minute_number(epoch_s: float) -> int:
    """The number of the UTC minute containing `epoch_s` (`minute_of(epoch_s)` is that minute's start)."""
    return int(epoch_s // 60)


class TrafficCounter:
    """Accumulates counts per (minute, app, model, prompt_version) until `drain` hands them to the store."""

    def __init__(self) -> None:
        self._counts: dict[Segment, list[int]] = {}  # per segment, the counts in `_FIELDS` order

    def add(self, epoch_s: float, app: str, model: str, prompt_version: str, field: str) -> None:
        """Count one event under `field` (consumed, sampled, not_sampled, dead_lettered or no_content)."""
        key = (minute_of(epoch_s), app, model, prompt_version)
        counts = self._counts.get(key)
        if counts is None:
            counts = self._counts[key] = [0] * len(_FIELDS)
        counts[FIELD_INDEX[field]] += 1

    def add_batch(self, counts: Mapping[MinuteSegment, list[int]]) -> None:
        """Add the counts of a batch (per minute number and segment, in `_FIELDS` order), segments in their order."""
        mine = self._counts
        for (number, app, model, prompt_version), add in counts.items():
            key = (datetime.fromtimestamp(number * 60, tz=UTC), app, model, prompt_version)
            have = mine.get(key)
            if have is None:
                mine[key] = list(add)
            else:
                for i, n in enumerate(add):
                    have[i] += n

    def drain(self) -> list[tuple[object, ...]]:
        """Rows to insert (in `COLUMNS` order), emptying the counter."""
        counts, self._counts = self._counts, {}
        return [(*seg, *c) for seg, c in counts.items()]

    def restore(self, rows: list[tuple[object, ...]]) -> None:
        """Put back rows whose insert failed, so they are written with the next batch."""
        for row in rows:
            seg = (row[0], row[1], row[2], row[3])
            c = self._counts.setdefault(seg, [0] * len(_FIELDS))  # type: ignore[arg-type]
            for i, v in enumerate(row[4:]):
                c[i] += int(v)  # type: ignore[call-overload]
