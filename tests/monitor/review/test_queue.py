"""The review queue on chDB: each route picks what it should (control uniform and repeatable, disagree, borderline,
firing), items are reserved so two reviewers never get the same one, skipped items stay skipped, labelled items
leave the queue, and a second review goes to a different reviewer."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from monitor.review.label_rows import LabelWriter, NewLabel
from monitor.review.queue import QueueItem, ReviewQueue
from monitor.review.routing import RoutingRules
from monitor.store.connection import ClickHouseStore
from tests.monitor.review.scored import NOW, SHADOW, row, write

CONTROL_ONLY = RoutingRules(shares={"control": 1.0}, second_review_share=0.0)


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


def label(store: ClickHouseStore, item: QueueItem, reviewer: str, value: int = 3) -> None:
    """`reviewer` labels `item` through a LabelWriter of its own connection."""
    writer = LabelWriter(ClickHouseStore(store.url, store.database, store.table))
    writer.record(store, NewLabel(item.event_id, reviewer, value, "", item.route, item.inclusion_probability), NOW)


def drain(queue: ReviewQueue, reviewer: str, n: int) -> list[QueueItem]:
    """`n` items for `reviewer`, skipping each to get the next."""
    out = []
    for _ in range(n):
        item = queue.next_item(reviewer)
        assert item is not None
        out.append(item)
        queue.skip(item.event_id, reviewer)
    return out


def test_control_is_a_repeatable_draw_among_every_judged_answer(store: ClickHouseStore) -> None:
    """Control-only rules over 8 judged answers (an error row, a shadow's row and an old row are not candidates):
    each item is control with probability 1 / the items left, the same sequence for the same seed, another for
    another seed, and every candidate is served once before the queue is empty."""
    write(store, [row(f"e{i}", 0.9) for i in range(8)])
    write(
        store, [row("err", None), row("e1", 0.1, judge_id=SHADOW, shadow=True), row("old", 0.9, minutes_ago=20 * 1440)]
    )
    first = drain(ReviewQueue(store, CONTROL_ONLY, now=lambda: NOW, seed=1), "ann", 8)
    again = drain(ReviewQueue(store, CONTROL_ONLY, now=lambda: NOW, seed=1), "ann", 8)
    other = drain(ReviewQueue(store, CONTROL_ONLY, now=lambda: NOW, seed=2), "ann", 8)
    assert [i.event_id for i in first] == [i.event_id for i in again] != [i.event_id for i in other]
    assert sorted(i.event_id for i in first) == [f"e{i}" for i in range(8)]
    assert [i.inclusion_probability for i in first] == pytest.approx([1 / n for n in range(8, 0, -1)])
    assert all(i.route == "control" and i.judge_id == "rubric-1" and not i.second_review for i in first)
    assert "at random" in first[0].why
    assert ReviewQueue(store, CONTROL_ONLY, now=lambda: NOW, seed=1).next_item("ann") is not None
    queue = ReviewQueue(store, CONTROL_ONLY, now=lambda: NOW, seed=1)
    drain(queue, "ann", 8)
    assert queue.next_item("ann") is None


def test_control_picks_are_uniform_over_seeds(store: ClickHouseStore) -> None:
    """Over 200 seeds the first control pick of 5 answers lands on each about a fifth of the time."""
    write(store, [row(f"e{i}", 0.9) for i in range(5)])
    picks: Counter[str] = Counter()
    for seed in range(200):
        item = ReviewQueue(store, CONTROL_ONLY, now=lambda: NOW, seed=seed).next_item("ann")
        assert item is not None
        picks[item.event_id] += 1
    assert len(picks) == 5 and all(20 <= n <= 60 for n in picks.values()), picks


def test_disagree_serves_the_answers_primary_and_shadow_judge_far_apart(store: ClickHouseStore) -> None:
    """e3: primary 0.9 (level 4), shadow 0.1 (level 0): 4 levels apart; e4: 1 level apart, not a disagreement.
    Once e3 is reserved the disagree pool is empty and its share goes to control."""
    write(store, [row(f"e{i}", 0.9) for i in range(6)])
    write(store, [row("e3", 0.1, judge_id=SHADOW, shadow=True), row("e4", 0.75, judge_id=SHADOW, shadow=True)])
    rules = RoutingRules(shares={"control": 0.01, "disagree": 0.99}, second_review_share=0.0)
    queue = ReviewQueue(store, rules, now=lambda: NOW)
    first = queue.next_item("ann")
    assert first is not None and (first.event_id, first.route, first.judge_id) == ("e3", "disagree", "rubric-1")
    assert first.inclusion_probability == pytest.approx(0.99) and "4 rubric levels apart" in first.why
    second = queue.next_item("bob")
    assert second is not None and second.route == "control" and second.event_id != "e3"
    assert second.inclusion_probability == pytest.approx(1.0 / 5)


def test_borderline_serves_scores_in_the_band_and_low_confidence(store: ClickHouseStore) -> None:
    """Scores 0.5 and 0.375 (the band's edge) and a 0.9 with confidence 0.3 are borderline; the others are not."""
    write(store, [row(f"e{i}", 0.9, confidence=0.9) for i in range(6)])
    write(store, [row("e2", 0.5), row("e4", 0.375), row("e5", 0.9, confidence=0.3), row("e0", 0.25)])
    rules = RoutingRules(shares={"control": 0.01, "borderline": 0.99}, second_review_share=0.0)
    queue = ReviewQueue(store, rules, now=lambda: NOW)
    items = [queue.next_item(r) for r in ("ann", "bob", "cid")]
    assert sorted(i.event_id for i in items if i is not None) == ["e2", "e4", "e5"]
    assert all(i is not None and i.route == "borderline" for i in items)
    assert [i.inclusion_probability for i in items if i is not None] == pytest.approx([0.99 / 3, 0.99 / 2, 0.99])


def _alert(store: ClickHouseStore, rule: str, key: str, state: str, since: datetime) -> None:
    columns = ("rule", "segment_key", "segment", "state", "since", "last_eval_at", "updated_at", "severity", "writer")
    store.insert_table("alert_state", columns, [(rule, key, key, state, since, NOW, NOW, "page", "test")])


def test_firing_serves_answers_of_a_firing_segment_since_its_episode(store: ClickHouseStore) -> None:
    """A firing alert on app=bank, model=m since 2 hours ago: its answers of the episode are served (not one from
    before it, nor another model's, nor a resolved alert's segment)."""
    write(store, [row(f"s{i}", 0.9) for i in range(4)])
    write(
        store, [row("b1", 0.9, app="bank"), row("b2", 0.2, app="bank"), row("b-old", 0.9, app="bank", minutes_ago=300)]
    )
    write(store, [row("b-other", 0.9, app="bank", model="m2"), row("r1", 0.9, app="retail")])
    _alert(
        store,
        "low-relevancy",
        '[["app","bank"],["model","m"],["judge_id","rubric-1"]]',
        "firing",
        NOW - timedelta(hours=2),
    )
    _alert(
        store,
        "low-relevancy",
        '[["app","retail"],["model","m"],["judge_id","rubric-1"]]',
        "resolved",
        NOW - timedelta(hours=2),
    )
    rules = RoutingRules(shares={"control": 0.01, "firing": 0.99}, second_review_share=0.0)
    queue = ReviewQueue(store, rules, now=lambda: NOW)
    items = [queue.next_item(r) for r in ("ann", "bob")]
    assert sorted(i.event_id for i in items if i is not None) == ["b1", "b2"]
    assert all(i is not None and i.route == "firing" and i.app == "bank" for i in items)
    assert items[0] is not None and "app=bank, model=m, rule low-relevancy" in items[0].why
    third = queue.next_item("cid")
    assert third is not None and third.route == "control"


def test_two_reviewers_never_get_the_same_item_until_the_reservation_expires(store: ClickHouseStore) -> None:
    """ann holds her item (asking again gives it again); bob gets another; after reserve_for, ann's item is free
    and bob, having labelled his, gets it."""
    write(store, [row(f"e{i}", 0.9) for i in range(4)])
    clock = Clock()
    queue = ReviewQueue(store, CONTROL_ONLY, now=clock)
    ann = queue.next_item("ann")
    bob = queue.next_item("bob")
    assert ann is not None and bob is not None and ann.event_id != bob.event_id
    assert queue.next_item("ann") == ann and queue.reserved_for(ann.event_id) == "ann"
    clock.now += timedelta(minutes=4)
    assert queue.next_item("bob") == bob  # still held by bob, and ann's by ann
    label(store, bob, "bob")
    queue.release(bob.event_id, "bob")
    nxt = queue.next_item("bob")
    assert nxt is not None and nxt.event_id not in (ann.event_id, bob.event_id)
    queue.release(nxt.event_id, "bob")
    clock.now += timedelta(minutes=2)  # ann's reservation (taken at 0 and renewed at 0) has expired
    assert queue.reserved_for(ann.event_id) is None
    freed = queue.next_item("bob")
    assert freed is not None and freed.event_id == ann.event_id and freed.inclusion_probability == pytest.approx(1 / 3)


def test_a_skipped_item_is_not_served_to_that_reviewer_again(store: ClickHouseStore) -> None:
    """ann skips her item: she never gets it again, bob can."""
    write(store, [row(f"e{i}", 0.9) for i in range(3)])
    queue = ReviewQueue(store, CONTROL_ONLY, now=lambda: NOW)
    first = queue.next_item("ann")
    assert first is not None
    queue.skip(first.event_id, "ann")
    served = drain(queue, "ann", 2)  # the two others, each skipped in turn
    assert first.event_id not in [i.event_id for i in served]
    assert queue.next_item("ann") is None
    to_bob = queue.next_item("bob")
    assert to_bob is not None and to_bob.event_id == first.event_id


def test_a_labelled_item_leaves_the_queue_unless_it_needs_a_second_reviewer(store: ClickHouseStore) -> None:
    """Without second reviews, an item ann labelled is served to nobody; with every item needing one, bob gets it
    next as a second review (same route and probability), and once two reviewers labelled it nobody does."""
    write(store, [row(f"e{i}", 0.9) for i in range(3)])
    queue = ReviewQueue(store, CONTROL_ONLY, now=lambda: NOW)
    item = queue.next_item("ann")
    assert item is not None
    label(store, item, "ann")
    queue.release(item.event_id, "ann")
    assert all(queue.next_item(r).event_id != item.event_id for r in ("bob", "cid"))  # type: ignore[union-attr]

    twice = RoutingRules(shares={"control": 1.0}, second_review_share=1.0)
    queue = ReviewQueue(store, twice, now=lambda: NOW)
    again = queue.next_item("bob")
    assert again is not None and again.event_id == item.event_id and again.second_review
    assert (again.route, again.inclusion_probability) == (item.route, item.inclusion_probability)
    assert "Another reviewer labelled this answer" in again.why
    mine = queue.next_item("ann")
    assert mine is not None and mine.event_id != item.event_id  # never her own label again
    label(store, again, "bob")
    queue.release(again.event_id, "bob")
    served: Callable[[str], QueueItem | None] = queue.next_item
    assert all((i := served(r)) is None or i.event_id != item.event_id for r in ("cid", "dan"))
