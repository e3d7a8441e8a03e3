"""What a durable batch of rows acknowledges: the sink calls it once a batch is written to the store."""

from __future__ import annotations

from typing import TYPE_CHECKING

from consumers.offsets import OffsetTracker, Ticket
from monitor.judging.cost_control import CostControl
from monitor.judging.shadow import RowsOwed
from schemas.scored import ScoredRow

if TYPE_CHECKING:  # publishing (protobuf, ~2 MB resident) loads only when it is on
    from monitor.publish.publisher import EvaluationPublisher


class Acknowledge:
    """The sink's `on_durable`: for rows now durably in the store, in this order,
    1. settle each row's ticket: a record is done (its offset committable) with the last row it owes, its second
       when the shadow judged it too (`RowsOwed`);
    2. count the rows' spend as written (a later budget sync must not count it twice);
    3. offer the rows to the evaluation publisher, if any: only rows that are durable are published."""

    def __init__(
        self, tracker: OffsetTracker, owed: RowsOwed, cost: CostControl, publisher: EvaluationPublisher | None
    ) -> None:
        self.tracker, self.owed, self.cost, self.publisher = tracker, owed, cost, publisher

    def __call__(self, tickets: list[Ticket], rows: list[ScoredRow]) -> None:
        """Acknowledge the rows of one written batch, with their tickets."""
        for ticket in tickets:
            if self.owed.settle(ticket):
                self.tracker.done(ticket)
        self.cost.written(rows)
        if self.publisher is not None:
            self.publisher.offer(rows)
