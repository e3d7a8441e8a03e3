"""Offset bookkeeping: events finish out of order; commit only the contiguous low-water mark per partition.

A record may hold several events (an OpenTelemetry export request holds a batch of spans): each gets its own
ticket, numbered by `part`, and the record's offset stays pending until the last of them is done. An event made of
several records (a span and the log records joined to it) holds their tickets as riders of its own: they are done
when it is."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from aiokafka import TopicPartition
from sortedcontainers import SortedSet


@dataclass(frozen=True, slots=True)
class Ticket:
    """One tracked record. `epoch` ties it to one assignment of its partition, so work finishing after a
    revocation (and perhaps a re-assignment) cannot move the new owner's offsets."""

    tp: TopicPartition
    offset: int
    epoch: int
    part: int = 0  # the event's place in its record (0 for a record of one event)


@dataclass(slots=True)
class _PartitionState:
    epoch: int
    pending: SortedSet = field(default_factory=SortedSet)  # (offset, part) of each event not done
    next_offset: int | None = None  # one past the highest offset tracked
    committed: int | None = None


class OffsetTracker:
    """Tracks records from fetch to done; `committable()` gives, per partition, the offset to commit: the
    lowest offset still pending, or one past the highest tracked when nothing is pending."""

    def __init__(self) -> None:
        self._parts: dict[TopicPartition, _PartitionState] = {}
        self._epochs = 0
        self._riders: dict[Ticket, tuple[Ticket, ...]] = {}

    def assign(self, tps: Iterable[TopicPartition]) -> None:
        """Start tracking newly assigned partitions from scratch."""
        for tp in tps:
            self._epochs += 1
            self._parts[tp] = _PartitionState(epoch=self._epochs)

    def revoke(self, tps: Iterable[TopicPartition]) -> None:
        """Forget partitions; tickets issued for them are ignored from now on."""
        gone = set(tps)
        for tp in gone:
            self._parts.pop(tp, None)
        for primary in [t for t in self._riders if t.tp in gone]:
            # The event is the next owner's now; its riders' records, owned here, must not block their partitions.
            for rider in self._riders.pop(primary):
                self._finish(rider)

    def track(self, tp: TopicPartition, offset: int, part: int = 0) -> Ticket:
        """Record that event `part` of the record at `offset` was fetched and is now in flight."""
        state = self._parts.get(tp)
        if state is None:  # fetched before the assignment callback ran (should not happen); track anyway
            self.assign([tp])
            state = self._parts[tp]
        state.pending.add((offset, part))
        if state.next_offset is None or offset >= state.next_offset:
            state.next_offset = offset + 1
        return Ticket(tp, offset, state.epoch, part)

    def advance(self, tp: TopicPartition, next_offset: int) -> None:
        """Record that every offset below `next_offset` was fetched, and those not tracked are finished already
        (events not sampled): what `track` and `done` for each of them would leave, without a ticket each."""
        state = self._parts.get(tp)
        if state is None:  # as in `track`
            self.assign([tp])
            state = self._parts[tp]
        if state.next_offset is None or next_offset > state.next_offset:
            state.next_offset = next_offset

    def bind(self, primary: Ticket, riders: Iterable[Ticket]) -> None:
        """Tickets of other records whose event is `primary`'s: `done(primary)` finishes them too."""
        self._riders[primary] = (*self._riders.get(primary, ()), *riders)

    def done(self, ticket: Ticket) -> bool:
        """Mark a record finished (written, dead-lettered or not sampled), with its riders. False if its partition
        moved on."""
        if self._riders:  # only joined events have riders: the common case skips hashing the ticket
            for rider in self._riders.pop(ticket, ()):
                self._finish(rider)
        return self._finish(ticket)

    def _finish(self, ticket: Ticket) -> bool:
        state = self._parts.get(ticket.tp)
        if state is None or state.epoch != ticket.epoch:
            return False
        state.pending.discard((ticket.offset, ticket.part))
        return True

    def is_current(self, ticket: Ticket) -> bool:
        """Whether the ticket's partition is still owned by the assignment that issued it."""
        state = self._parts.get(ticket.tp)
        return state is not None and state.epoch == ticket.epoch

    def in_flight(self, tp: TopicPartition | None = None) -> int:
        """Events fetched and not done, for one partition or all."""
        if tp is not None:
            state = self._parts.get(tp)
            return len(state.pending) if state else 0
        return sum(len(s.pending) for s in self._parts.values())

    def low_water(self) -> dict[TopicPartition, int]:
        """Per tracked partition, the lowest offset not yet finished (one past the highest tracked when none is
        pending)."""
        return {
            tp: s.pending[0][0] if s.pending else s.next_offset
            for tp, s in self._parts.items()
            if s.next_offset is not None
        }

    def committable(self, tps: Iterable[TopicPartition] | None = None) -> dict[TopicPartition, int]:
        """Offsets that advance past the last commit, for the given partitions (default: all tracked)."""
        out: dict[TopicPartition, int] = {}
        for tp in self._parts if tps is None else tps:
            state = self._parts.get(tp)
            if state is None or state.next_offset is None:
                continue
            low = state.pending[0][0] if state.pending else state.next_offset
            if state.committed is None or low > state.committed:
                out[tp] = low
        return out

    def mark_committed(self, offsets: dict[TopicPartition, int]) -> None:
        """Remember what the broker accepted, so the same offsets are not committed again."""
        for tp, offset in offsets.items():
            state = self._parts.get(tp)
            if state is not None:
                state.committed = offset
