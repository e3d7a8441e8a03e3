"""Scoring a replay's events through the Message Batches API (`replay --batch-api`): half the price, answers within
24 hours, for history that does not need them within minutes.

Commit order, per batch:
  1. `score` buffers events (each reserving its estimate under the cap) until `batch_size` of them are buffered;
  2. the buffer goes out as one batch and is recorded in `replay_batches` as `submitted`, before anything else
     happens: from here the batch is paid for, and a resumed run must find it;
  3. every `poll_s` the batches out are asked for their status; an ended batch's results become rows in the sink
     (transient failures, an expired request say, go into a later batch, up to MONITOR_JUDGE_EVENT_ATTEMPTS);
  4. once its rows are durable, the batch is recorded as `written`.
A run interrupted between 2 and 4 leaves the batch `submitted`: `collect_earlier` in the next run (with --resume)
waits for it and matches its results to the events by custom id (derived from the judge id and the event id) as the
range is read again, so nothing is paid twice."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog

from consumers.sampling import SampleDecision
from monitor.judges.base import FailureReason, JudgeFailure, Judgement
from monitor.judges.batches import BatchItem, BatchJudge, custom_id_for
from monitor.privacy.events import JudgedEvent
from monitor.replay.estimate import CostModel
from monitor.replay.records import BatchRecord, BatchState, unwritten_batches, write_batch
from monitor.replay.spend_cap import SpendCap
from monitor.runtime.rows import TextPolicy, build_row
from monitor.runtime.sink import ClickHouseSink
from monitor.store.async_store import AsyncStore
from schemas.errors import JudgeError

log = structlog.get_logger("monitor.replay.batched")


@dataclass(frozen=True, slots=True)
class Waiting:
    """An event in a batch: what its row needs, what it reserved under the cap, and how many batches it was in."""

    event: JudgedEvent
    decision: SampleDecision
    reserved: float
    attempts: int = 1


@dataclass(frozen=True, slots=True)
class BatchSettings:
    """How the batch path runs: requests per batch, seconds between status polls, batches out at once, and the
    batches an event may be in before a transient failure becomes its error row."""

    batch_size: int = 1000
    poll_s: float = 30.0
    max_outstanding: int = 4
    attempts: int = 2


class BatchScorer:
    """Judges events in Message Batches and adds their rows to the sink, marked with `run_id`."""

    def __init__(
        self,
        judge: BatchJudge,
        sink: ClickHouseSink[None],
        store: AsyncStore,
        cost: CostModel,
        cap: SpendCap,
        settings: BatchSettings,
        *,
        run_id: str,
        text_policy: TextPolicy,
        on_row_cost: Callable[[float | None], None],
        interrupt: asyncio.Event | None = None,
    ) -> None:
        self.judge = judge
        self.sink = sink
        self.store = store
        self.cost = cost
        self.cap = cap
        self.settings = settings
        self.run_id = run_id
        self.text_policy = text_policy
        self._on_row_cost = on_row_cost
        self._interrupt = interrupt or asyncio.Event()
        self._buffer: dict[str, Waiting] = {}
        self._out: dict[str, dict[str, Waiting]] = {}  # batch id -> its events by custom id
        self._submitted_at: dict[str, datetime] = {}
        self._earlier: dict[str, Judgement | JudgeFailure] = {}  # results of batches an earlier run sent
        self._earlier_batches: dict[str, tuple[BatchRecord, set[str]]] = {}  # batch id -> record, ids not yet used
        self.stopped = False

    @property
    def in_flight(self) -> int:
        """Events buffered or in batches not yet answered."""
        return len(self._buffer) + sum(len(b) for b in self._out.values())

    # ---- an earlier run's batches ------------------------------------------------------------------------

    async def collect_earlier(self, on_wait: Callable[[int], None]) -> int:
        """Wait for the batches earlier runs of this judge sent and never wrote, and keep their results for the
        events the range holds; returns how many results were collected."""
        info = self.judge.info
        records = await unwritten_batches(self.store, info.judge_id, self.store.store.table)
        for record in records:
            on_wait(len(records))
            while not (await self.judge.status(record.batch_id)).ended:
                if await self._interrupted_within(self.settings.poll_s):
                    return len(self._earlier)
            results = await self.judge.results(record.batch_id)
            self._earlier.update(results)
            self._earlier_batches[record.batch_id] = (record, set(results))
        if records:
            log.info("replay_batches_collected", batches=len(self._earlier_batches), results=len(self._earlier))
        return len(self._earlier)

    # ---- scoring -----------------------------------------------------------------------------------------

    async def score(self, event: JudgedEvent, decision: SampleDecision) -> bool:
        """Buffer one event for a batch (or write it at once when it needs no call or an earlier batch answered
        it); False when stopped or the cap is reached."""
        if self.stopped:
            return False
        judged = event.judged
        free = self.judge.without_call(judged.question, judged.response)
        if free is not None:
            self._write(event, decision, free)
            return True
        custom_id = custom_id_for(self.judge.info.judge_id, judged.event_id)
        earlier = self._earlier.pop(custom_id, None)
        if earlier is not None:
            for _, unused in self._earlier_batches.values():
                unused.discard(custom_id)
        if earlier is not None and not (isinstance(earlier, JudgeFailure) and earlier.transient):
            self._write(event, decision, earlier)  # paid for by the run that sent it: not held against this cap
            return True
        if custom_id in self._buffer or any(custom_id in b for b in self._out.values()):
            return True  # the same event twice in the range (an upstream redelivery): one row
        reserved = self.cap.try_reserve(self.cost.judged_usd(judged) or 0.0)
        if reserved is None:
            self.stopped = True
            log.info("replay_cap_reached", spent_usd=round(self.cap.spent, 6), max_usd=self.cap.max_usd)
            return False
        self._buffer[custom_id] = Waiting(event, decision, reserved)
        if len(self._buffer) >= self.settings.batch_size:
            await self._send()
        return True

    async def _send(self) -> None:
        """Send the buffer as one batch and record it; with the most batches out, first wait for one to end."""
        while len(self._out) >= self.settings.max_outstanding:
            await self._collect(wait=True)
        waiting, self._buffer = self._buffer, {}
        items = [
            BatchItem(
                cid, w.event.judged.question, w.event.judged.response, w.event.judged.context, w.event.judged.system
            )
            for cid, w in waiting.items()
        ]
        try:
            batch_id = await self.judge.submit(items)
        except JudgeError:
            self._buffer.update(waiting)  # not sent: kept, so a stop releases their reservations
            raise
        now = datetime.now(UTC)
        self._out[batch_id] = waiting
        self._submitted_at[batch_id] = now
        await self._record(batch_id, len(items), "submitted", now)
        log.info("replay_batch_sent", run_id=self.run_id, batch_id=batch_id, requests=len(items))

    async def _collect(self, *, wait: bool) -> None:
        """Write the rows of every batch that has ended; with `wait`, poll until at least one has."""
        while True:
            ended = [bid for bid in list(self._out) if (await self.judge.status(bid)).ended]
            if ended or not wait or not self._out:
                break
            if await self._interrupted_within(self.settings.poll_s):
                return
        for batch_id in ended:
            await self._write_batch(batch_id, await self.judge.results(batch_id))

    async def _interrupted_within(self, seconds: float) -> bool:
        """Wait `seconds` between polls; True at once if interrupted meanwhile."""
        try:
            await asyncio.wait_for(self._interrupt.wait(), timeout=seconds)
        except TimeoutError:
            return False
        return True

    async def _write_batch(self, batch_id: str, results: dict[str, Judgement | JudgeFailure]) -> None:
        waiting = self._out.pop(batch_id)
        for custom_id, w in waiting.items():
            outcome = results.get(custom_id) or JudgeFailure(
                FailureReason.MISSING, f"batch {batch_id} returned no result for this request", transient=True
            )
            cost = outcome.usage.cost_usd
            self.cap.settle(w.reserved, cost or 0.0)
            if (
                isinstance(outcome, JudgeFailure)
                and outcome.transient
                and w.attempts < self.settings.attempts
                and not self.stopped
            ):
                again = self.cap.try_reserve(self.cost.judged_usd(w.event.judged) or 0.0)
                if again is not None:
                    self._buffer[custom_id] = Waiting(w.event, w.decision, again, w.attempts + 1)
                    continue
            self._on_row_cost(cost)
            self._write(w.event, w.decision, outcome)
        await self.sink.flush_all()  # durable before the batch is recorded as written
        await self._record(batch_id, len(waiting), "written", self._submitted_at.pop(batch_id, datetime.now(UTC)))

    def _write(self, event: JudgedEvent, decision: SampleDecision, outcome: Judgement | JudgeFailure) -> None:
        if isinstance(outcome, JudgeFailure):
            log.warning(
                "replay_judge_failed",
                event_id=event.judged.event_id,
                partition=event.judged.source.partition,
                offset=event.judged.source.offset,
                error=outcome.message[:200],
            )
        row = build_row(
            event,
            self.judge.info,
            decision,
            outcome,
            latency_ms=0,
            scored_at=datetime.now(UTC),
            text_policy=self.text_policy,
            replay_run=self.run_id,
        )
        self.sink.add(row, None)

    async def _record(self, batch_id: str, requests: int, state: BatchState, submitted_at: datetime) -> None:
        info = self.judge.info
        record = BatchRecord(
            info.judge_id,
            batch_id,
            self.run_id,
            self.store.store.table,
            requests,
            state,
            submitted_at,
            datetime.now(UTC),
        )
        await write_batch(self.store, record)

    # ---- the end -----------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Send no new batch."""
        self.stopped = True

    async def finish(self) -> None:
        """The range is read (or the cap reached): send what is buffered, then wait for every batch out and write
        its rows (retries of transient failures included), and record the earlier runs' batches as written."""
        while (self._buffer or self._out) and not self._interrupt.is_set():
            if self._buffer and not self.stopped:
                await self._send()
            elif self._buffer:  # stopped at the cap: what is not sent is not judged
                for w in self._buffer.values():
                    self.cap.release(w.reserved)
                self._buffer.clear()
            if self._out:
                await self._collect(wait=True)
        # An earlier batch is done with once each of its results found its event here; one holding events of another
        # range stays submitted, for the replay of that range.
        for record, unused in self._earlier_batches.values():
            if not unused:
                await self._record(record.batch_id, record.requests, "written", record.submitted_at)
        self._earlier_batches = {}

    async def drain(self, timeout_s: float) -> int:
        """An interrupt: send nothing more and leave the batches out to a resumed run (they are recorded as
        submitted); returns how many events are in them."""
        del timeout_s  # a batch can take hours: waiting for it is what `--resume` is for
        for w in self._buffer.values():
            self.cap.release(w.reserved)
        self._buffer.clear()
        left = sum(len(b) for b in self._out.values())
        if self._out:
            log.info(
                "replay_batches_left", batches=len(self._out), requests=left, note="a run with --resume collects them"
            )
        return left
