"""A replica's share of the consumer group's limits (pure).

The provider's requests and tokens per minute and the judged minimum per segment are figures for the whole group,
not for each process. Each replica takes the share of its partitions: the partitions the group assigned it over all
partitions of its topics, re-computed at every rebalance. Chosen over a lease in the store because the partitions
are what divides the traffic itself: with keys that spread segments over partitions (conversation ids, the
default partitioner), a replica holding a quarter of the partitions sees a quarter of each segment's events, and
the shares of a settled group add up to exactly 1 with no store round-trip and no clock. While partitions move
(between a revocation and the next assignment) a replica holds none and takes no share, so the group is briefly
under its quota, never over it. The cost: a skewed partition carries more traffic than its share of the quota."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aiokafka import TopicPartition


@dataclass(frozen=True, slots=True)
class GroupShare:
    """This replica's partitions (`assigned`) over all partitions of the topics it consumes (`total`)."""

    assigned: int
    total: int

    @property
    def fraction(self) -> float:
        """The share of the group's limits: 0 with no partitions (or none known), at most 1."""
        if self.assigned <= 0 or self.total <= 0:
            return 0.0
        return min(1.0, self.assigned / self.total)

    def of(self, limit: float | None) -> float | None:
        """This replica's part of a group `limit` (None: unlimited stays unlimited)."""
        return None if limit is None else limit * self.fraction

    def log_fields(self) -> dict[str, object]:
        """For the `group_share` log line."""
        return {"assigned": self.assigned, "total": self.total, "share": round(self.fraction, 4)}


WHOLE = GroupShare(1, 1)  # one process alone (replay, calibrate, the canary): the whole limit


def share_of(assigned: Iterable[TopicPartition], partitions: Mapping[str, int]) -> GroupShare:
    """The share of an assignment, given each topic's partition count; partitions of other topics do not count."""
    mine = sum(1 for tp in set(assigned) if tp.topic in partitions)
    return GroupShare(mine, sum(partitions.values()))


def per_window(min_per_minute: float, window_s: float) -> int:
    """Events of a segment judged whatever the rate, in a window of `window_s`, for a judged rate per minute."""
    return math.ceil(min_per_minute * window_s / 60.0 - 1e-9)
