"""The acknowledgement of a written batch: tickets settled (a shadowed record done with its second row), the spend
counted as written, and only durable rows offered to the evaluation publisher."""

from __future__ import annotations

from aiokafka import TopicPartition

from consumers.offsets import OffsetTracker
from monitor.judging.budget import Spend
from monitor.judging.cost_control import CostControl
from monitor.judging.settings import BudgetSettings
from monitor.judging.shadow import RowsOwed
from monitor.publish.destinations import KafkaDestination
from monitor.publish.publisher import EvaluationPublisher
from monitor.publish.settings import PublishSettings
from monitor.runtime.acknowledge import Acknowledge
from monitor.runtime.metrics import Metrics
from monitor.store.async_store import AsyncStore
from tests.monitor.publish.test_evaluations import _Producer, _row

TP = TopicPartition("conversations", 0)


def _parts(store: AsyncStore) -> tuple[OffsetTracker, RowsOwed, CostControl]:
    tracker = OffsetTracker()
    tracker.assign({TP})
    cost = CostControl(BudgetSettings(budget_requests_per_hour=100, budget_usd_per_hour=1.0), store, Metrics())
    return tracker, RowsOwed(), cost


async def test_a_record_is_done_with_the_last_row_it_owes_and_only_durable_rows_are_published(
    async_store: AsyncStore,
) -> None:
    """Records 0 and 1 in a batch, 1 shadowed (it owes two rows): after the first batch only offset 0 is done (the
    committable mark stops at 1) and its two rows are published; after the shadow's row the mark passes 1. Nothing
    reaches the publisher before it is acknowledged."""
    tracker, owed, cost = _parts(async_store)
    producer = _Producer()
    settings = PublishSettings(publish_evaluations="kafka")
    published: list[int] = []
    publisher = EvaluationPublisher(
        KafkaDestination(producer, settings.publish_topic),
        settings,
        service="m",
        on_published=published.append,
        on_dropped=lambda reason, n: None,
    )
    acknowledge = Acknowledge(tracker, owed, cost, publisher)
    first, second = tracker.track(TP, 0), tracker.track(TP, 1)
    tracker.advance(TP, 2)
    owed.expect(second, 2)
    await publisher.drain()
    assert producer.sent == [] and tracker.committable() == {TP: 0}

    acknowledge([first, second], [_row(event_id="msg_0"), _row(event_id="msg_1")])
    assert tracker.committable() == {TP: 1}  # record 1 still owes the shadow's row
    await publisher.drain()
    assert published == [2] and len(producer.sent) == 1

    acknowledge([second], [_row(event_id="msg_1").model_copy(update={"judge_id": "shadow"})])
    assert tracker.committable() == {TP: 2} and tracker.in_flight(TP) == 0
    await publisher.drain()
    assert published == [2, 1]


async def test_written_spend_is_not_counted_twice_by_the_next_sync(async_store: AsyncStore) -> None:
    """Rows acknowledged with their cost are this process's written spend: a sync that finds exactly them in the
    store attributes nothing to other replicas (without the acknowledgement it would count them twice). Without a
    publisher the acknowledgement still settles and counts."""
    tracker, owed, cost = _parts(async_store)
    acknowledge = Acknowledge(tracker, owed, cost, None)
    tickets = [tracker.track(TP, n) for n in range(3)]
    tracker.advance(TP, 3)
    rows = [_row(event_id=f"msg_{n}").model_copy(update={"cost_usd": 0.01}) for n in range(3)]
    for _ in rows:
        cost.reserve_call()
    acknowledge(tickets, rows)
    assert tracker.committable() == {TP: 3}
    stored = Spend(requests=3, usd=0.03)
    cost.budget.sync(stored, stored)
    assert cost.budget.hour.others.requests == 0 and round(cost.budget.hour.others.usd, 6) == 0
    assert round(cost.budget.used(), 6) == 0.03  # what this process spent, once
