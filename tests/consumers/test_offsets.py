"""OffsetTracker: commit only the contiguous low-water mark; stale tickets cannot move a new owner's offsets."""

from __future__ import annotations

from aiokafka import TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from consumers.offsets import OffsetTracker
from tests.properties import examples

TP = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def test_out_of_order_completion_commits_only_the_contiguous_prefix() -> None:
    """Out-of-order completions make only the offset after the contiguous finished prefix committable."""
    tr = OffsetTracker()
    tr.assign([TP])
    tickets = [tr.track(TP, off) for off in range(10, 15)]
    assert tr.committable() == {TP: 10}
    tr.done(tickets[2])
    tr.done(tickets[1])
    assert tr.committable() == {TP: 10}  # 10 still pending
    tr.done(tickets[0])
    assert tr.committable() == {TP: 13}
    tr.mark_committed({TP: 13})
    assert tr.committable() == {}
    tr.done(tickets[4])
    assert tr.committable() == {}  # 13 still pending
    tr.done(tickets[3])
    assert tr.committable() == {TP: 15}
    assert tr.in_flight() == 0


def test_gaps_in_offsets_do_not_block_commits() -> None:
    """Gaps between tracked offsets (compaction, transaction markers) do not hold back the commit."""
    tr = OffsetTracker()
    tr.assign([TP])
    a, b = tr.track(TP, 5), tr.track(TP, 9)  # 6..8 compacted away or transaction markers
    tr.done(a)
    assert tr.committable() == {TP: 9}
    tr.done(b)
    assert tr.committable() == {TP: 10}


def test_revoked_and_reassigned_partition_ignores_old_tickets() -> None:
    """After revoke and reassign, a ticket from the old assignment is ignored and cannot move the offset."""
    tr = OffsetTracker()
    tr.assign([TP, TP1])
    old = tr.track(TP, 0)
    tr.revoke([TP])
    assert not tr.is_current(old)
    tr.assign([TP])
    new = tr.track(TP, 0)
    assert tr.done(old) is False
    assert tr.committable([TP]) == {TP: 0}
    assert tr.done(new) is True
    assert tr.committable([TP]) == {TP: 1}


def test_in_flight_counts_per_partition_and_total() -> None:
    """In-flight counts are kept per partition and in total, and drop when a ticket is done."""
    tr = OffsetTracker()
    tr.assign([TP, TP1])
    tr.track(TP, 0)
    tr.track(TP, 1)
    t = tr.track(TP1, 0)
    assert (tr.in_flight(TP), tr.in_flight(TP1), tr.in_flight()) == (2, 1, 3)
    tr.done(t)
    assert tr.in_flight() == 2


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=60), min_size=1, max_size=60, unique=True),
    st.randoms(use_true_random=False),
)
def test_committed_offset_never_passes_an_unfinished_record(offsets: list[int], rnd: object) -> None:
    """In any completion order, the committed offset never passes a record that is still unfinished."""
    offsets.sort()
    tr = OffsetTracker()
    tr.assign([TP])
    tickets = [tr.track(TP, o) for o in offsets]
    order = list(range(len(tickets)))
    rnd.shuffle(order)  # type: ignore[attr-defined]
    finished: set[int] = set()
    for i in order:
        tr.done(tickets[i])
        finished.add(offsets[i])
        commit = tr.committable().get(TP)
        if commit is not None:
            tr.mark_committed({TP: commit})
            # everything below the commit point that was tracked is finished
            assert all(o in finished for o in offsets if o < commit)
    assert tr.committable() == {} and tr.in_flight() == 0
    assert tr._parts[TP].committed == offsets[-1] + 1


def test_advance_leaves_what_tracking_and_finishing_each_offset_would() -> None:
    """Advancing past untracked offsets commits like tracking and finishing each, and never moves back."""
    tp = TopicPartition("t", 0)
    each, batch = OffsetTracker(), OffsetTracker()
    for t in (each, batch):
        t.assign([tp])
    for offset in range(10):
        each.done(each.track(tp, offset))
    held = [each.track(tp, 10), batch.track(tp, 10)]
    batch.advance(tp, 10)
    batch.advance(tp, 5)
    assert each.committable() == batch.committable() == {tp: 10}
    for t, ticket in zip((each, batch), held, strict=True):
        t.done(ticket)
    assert each.committable() == batch.committable() == {tp: 11}
    assert batch.low_water() == {tp: 11}


def test_advance_on_an_unassigned_partition_starts_tracking_it() -> None:
    """A partition fetched before its assignment callback is tracked from the advance on, as `track` does."""
    tracker = OffsetTracker()
    tp = TopicPartition("t", 1)
    tracker.advance(tp, 7)
    assert tracker.committable() == {tp: 7} and tracker.low_water() == {tp: 7} and tracker.in_flight() == 0


def test_a_record_of_several_events_stays_pending_until_its_last_event_is_done() -> None:
    """Each event of a multi-event record has its own ticket; the record's offset is committable only when every one
    is done, and finishing one twice does not finish another."""
    tr = OffsetTracker()
    tr.assign([TP])
    first, second, third = (tr.track(TP, 7, part) for part in range(3))
    after = tr.track(TP, 8)
    assert tr.in_flight() == 4
    tr.done(first)
    tr.done(first)
    tr.done(third)
    assert tr.committable() == {TP: 7}
    tr.done(after)
    assert tr.committable() == {TP: 7}  # the second event of 7 still holds it
    tr.done(second)
    assert tr.committable() == {TP: 9} and tr.in_flight() == 0


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=20), st.randoms(use_true_random=False))
def test_no_commit_passes_a_record_with_an_event_in_flight(sizes: list[int], rnd: object) -> None:
    """Records of 1-5 events each, finished in any order: the commit never passes a record with an unfinished event."""
    tr = OffsetTracker()
    tr.assign([TP])
    tickets = [tr.track(TP, offset, part) for offset, n in enumerate(sizes) for part in range(n)]
    rnd.shuffle(tickets)  # type: ignore[attr-defined]
    left = {t for t in tickets}
    for t in tickets:
        tr.done(t)
        left.discard(t)
        commit = tr.committable().get(TP)
        if commit is not None:
            tr.mark_committed({TP: commit})
            assert all(u.offset >= commit for u in left)
    assert tr._parts[TP].committed == len(sizes)


def test_riders_are_done_with_their_event() -> None:
    """A span's event holds the tickets of the log records joined to it: their offsets commit only when it is done."""
    tracker = OffsetTracker()
    spans, logs = TopicPartition("otlp_spans", 0), TopicPartition("otlp_logs", 0)
    tracker.assign([spans, logs])
    primary = tracker.track(spans, 4, part=2)
    rider = tracker.track(logs, 9, part=0)
    tracker.advance(spans, 5)
    tracker.advance(logs, 10)
    tracker.bind(primary, [rider])
    assert tracker.committable() == {spans: 4, logs: 9}
    assert tracker.done(primary)
    assert tracker.committable() == {spans: 5, logs: 10}


def test_revoking_an_events_partition_releases_its_riders() -> None:
    """When the span's partition moves to another consumer, the log records held here no longer block theirs."""
    tracker = OffsetTracker()
    spans, logs = TopicPartition("otlp_spans", 0), TopicPartition("otlp_logs", 0)
    tracker.assign([spans, logs])
    primary, rider = tracker.track(spans, 4), tracker.track(logs, 9)
    tracker.advance(logs, 10)
    tracker.bind(primary, [rider])
    tracker.revoke([spans])
    assert tracker.committable() == {logs: 10}
