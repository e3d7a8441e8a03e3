"""What a record the shadow judge samples owes before its offset may be committed.

A record the shadow judge samples owes two rows, the primary's and the shadow's; its offset is done only when both
are durable (an error row counts). A crash, a revocation or a shutdown before both are written leaves the record
uncommitted: it is redelivered and judged again by both judges, and the rows already written collapse with the new
ones under the table's replacing key (app, judge_id, event_id)."""

from __future__ import annotations

from collections.abc import Iterable

from aiokafka import TopicPartition

from consumers.offsets import Ticket


class RowsOwed:
    """How many rows each record still owes beyond the one every judged record owes (only shadowed records are
    kept here, so the map stays as small as the shadow's work in flight)."""

    def __init__(self) -> None:
        self._extra: dict[Ticket, int] = {}

    def __len__(self) -> int:
        return len(self._extra)

    def expect(self, ticket: Ticket, rows: int) -> None:
        """The record of `ticket` owes `rows` rows (1, or 2 with a shadow)."""
        if rows > 1:
            self._extra[ticket] = rows - 1

    def settle(self, ticket: Ticket) -> bool:
        """One row of the record is durable; True when it was the last one it owed (its offset is done)."""
        left = self._extra.pop(ticket, 0)
        if left > 1:
            self._extra[ticket] = left - 1
        return left == 0

    def forget(self, tps: Iterable[TopicPartition]) -> None:
        """Drop the records of partitions no longer ours (a late row then settles nothing: its ticket is stale)."""
        gone = set(tps)
        for ticket in [t for t in self._extra if t.tp in gone]:
            del self._extra[ticket]
