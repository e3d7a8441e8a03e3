"""The evaluation publisher: scores whose rows are durable go out as `gen_ai.evaluation.result` records, without
ever holding up scoring.

Order, per score: (1) its row is written to ClickHouse; (2) the sink acknowledges it and its offset becomes
committable; (3) `offer` queues it; (4) `run` sends one export request per batch to the destination (a Kafka
topic, or a Collector's OTLP/HTTP endpoint). So a score is
published only once stored, and publishing is at most once: a crash between (2) and (4), a full queue (the oldest
are dropped), a send that fails or a batch that cannot be encoded (a bug, counted apart) loses those evaluation
records, counted, never the score or its row."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable

import structlog

from monitor.publish.destinations import Destination
from monitor.publish.evaluations import encode, evaluation_request, publishable
from monitor.publish.settings import PublishSettings
from schemas.scored import ScoredRow

log = structlog.get_logger("monitor.publish.publisher")

BATCH_ROWS = 500  # one export request holds at most this many records (about 150 KB, well under a 1 MB record)


class EvaluationPublisher:
    """`offer` durable rows (never blocks); `run` publishes them until cancelled; `drain` sends what is queued."""

    def __init__(
        self,
        destination: Destination,
        settings: PublishSettings,
        *,
        service: str,
        on_published: Callable[[int], None],
        on_dropped: Callable[[str, int], None],
    ) -> None:
        self.destination = destination
        self.settings = settings
        self.service = service
        self._on_published = on_published
        self._on_dropped = on_dropped
        self._queue: deque[ScoredRow] = deque()
        self._ready = asyncio.Event()

    def offer(self, rows: Iterable[ScoredRow]) -> None:
        """Queue the publishable rows; when the queue is full, the oldest are dropped and counted."""
        wanted = [row for row in rows if publishable(row)]
        if not wanted:
            return
        self._queue.extend(wanted)
        over = len(self._queue) - self.settings.publish_queue_max
        for _ in range(over):
            self._queue.popleft()
        if over > 0:
            self._on_dropped("queue_full", over)
        self._ready.set()

    async def run(self) -> None:
        """Publish queued rows in batches until cancelled."""
        while True:
            await self._ready.wait()
            await self.drain()

    async def drain(self) -> None:
        """Send everything queued now, a batch per request; a failed send is logged and counted, not retried."""
        self._ready.clear()
        while self._queue:
            batch = [self._queue.popleft() for _ in range(min(BATCH_ROWS, len(self._queue)))]
            value = self._encoded(batch)
            if value is None:
                continue
            try:
                await self.destination.send(value)
            except Exception as e:  # any Kafka or HTTP failure: the scores are stored; only their records are lost
                log.warning("evaluations_not_published", rows=len(batch), error=type(e).__name__)
                self._on_dropped("send_failed", len(batch))
                continue
            self._on_published(len(batch))

    def _encoded(self, batch: list[ScoredRow]) -> bytes | None:
        """The batch as one export request's bytes; None when no row is publishable, or when building or encoding
        the request fails. That is a bug of ours, not the destination's failure: it is logged as an error with its
        traceback and counted as `encode_failed`, apart from `send_failed`, so an alert on a destination outage
        does not fire for it (nor hide it). Scoring goes on: the scores are stored, and publishing is at most once."""
        try:
            request = evaluation_request(batch, self.settings.publish_relevant_at, self.service)
            return None if request is None else encode(request, self.settings.publish_encoding)
        except Exception:
            log.exception("evaluations_not_encoded", rows=len(batch), first_event_id=batch[0].event_id)
            self._on_dropped("encode_failed", len(batch))
            return None

    async def aclose(self) -> None:
        """Close the destination (after the last `drain`)."""
        await self.destination.aclose()
