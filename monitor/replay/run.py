"""One replay run: score a time range of history with the configured judge, bounded by money, beside the live rows.

In this order:
  1. check: the range against the retention (rows older than it would be deleted by the TTL at once), the store's
     schema, and the judge's price when a cap is asked for;
  2. count: read the range once (decode, triage, look up what this judge already scored) and estimate the cost;
  3. confirm: above MONITOR_REPLAY_CONFIRM_USD without `--yes`, stop before judging anything (`ReplayRefused`);
  4. record: the run in `replay_runs`, status running;
  5. score: read the range again and judge what is still to judge, under the flow limits and the spending cap,
     writing rows through the sink marked with the run id; nothing goes to `traffic_counts` (the live consumer
     counted that traffic when it came) and no consumer group is joined or committed;
  6. finish: stop reading (the range is read, the cap is reached, or an interrupt), let the calls already out
     finish within the grace period, flush, and record the outcome: finished, capped or interrupted.

A run resumed with `resume` skips events this judge scored in any earlier run; without it, events an earlier replay
scored are scored again and collapse with their earlier rows under FINAL (the table's key is app, judge_id,
event_id). Events the live consumer scored with this judge (ok or error) are always skipped: a replay never replaces
a live row, so what the alert rules read stays as it was."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Literal, Protocol

import structlog

from consumers.sampling import SampleDecision
from consumers.time_range import RangeProgress, TimeRange
from monitor.config import Settings
from monitor.judges.base import Judge
from monitor.judges.batches import BatchJudge
from monitor.judges.context_window import windowed
from monitor.judges.llm import LLMJudge
from monitor.judging.guarded_judge import GuardedJudge
from monitor.privacy.events import JudgedEvent, redact_event
from monitor.privacy.redactor import build_redactor
from monitor.privacy.spans import Redactor
from monitor.replay.batched import BatchScorer, BatchSettings
from monitor.replay.direct import DirectScorer
from monitor.replay.estimate import CostEstimate, CostModel, estimate
from monitor.replay.records import RunRecord, RunStatus, new_run_id, write_run
from monitor.replay.scored_lookup import already_scored
from monitor.replay.sources import Item, KafkaHistory, Malformed, StoredCounts, StoreHistory
from monitor.replay.spend_cap import SpendCap
from monitor.replay.triage import Skip, Tally, triage
from monitor.runtime.metrics import Metrics
from monitor.runtime.service import build_sampler
from monitor.runtime.sink import ClickHouseSink
from monitor.store.async_store import AsyncStore
from monitor.store.erased_ids import ErasedIds, load_erased_ids
from schemas.errors import ReplayRefused
from schemas.events import ConversationEvent
from schemas.scored import ScoredRow

log = structlog.get_logger("monitor.replay.run")

_RECORD_EVERY_S = 10.0
_PROGRESS_EVERY_S = 0.5

Phase = Literal["count", "score"]


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """What to replay and under which limits (the judge, sampling and flow come from the settings)."""

    span: TimeRange
    from_store: bool = False
    where: str | None = None
    resume: bool = False
    batch_api: bool = False
    max_usd: float | None = None
    yes: bool = False
    dry_run: bool = False
    batch_size: int = 1000
    batch_poll_s: float = 30.0


@dataclass(frozen=True, slots=True)
class Counted:
    """What the count found: the tally of the range, the estimate of what is left to judge, and (from the store)
    how many events had their text."""

    tally: Tally
    estimate: CostEstimate
    stored: StoredCounts | None = None
    kept_after: datetime | None = None

    @property
    def to_score(self) -> int:
        """Events the score phase will judge (unless stopped)."""
        return self.estimate.events


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Progress, as shown while a phase runs."""

    phase: Phase
    read: int
    expected: int
    tally: Tally
    in_flight: int = 0
    spent_usd: float = 0.0
    max_usd: float | None = None


@dataclass(slots=True)
class ReplayOutcome:
    """How a run ended: its id (None for a dry run), its status, the count, what the score phase did, the events
    cancelled mid-call at the end of the grace period and those left in Message Batches still processing (neither has
    a row; a resumed run scores the first and collects the second without paying again)."""

    run_id: str | None
    status: RunStatus | Literal["estimated"]
    counted: Counted
    tally: Tally = field(default_factory=Tally)
    cancelled: int = 0
    left_in_batches: int = 0
    elapsed_s: float = 0.0
    overshoot_usd: float = 0.0


class ReplayView(Protocol):
    """What a replay tells the person running it (the command line draws it; tests record it)."""

    def progress(self, snapshot: Snapshot) -> None:
        """Called about twice a second while a phase runs."""
        ...

    def estimated(self, counted: Counted) -> None:
        """The count is done: show the estimate before anything is judged."""
        ...


class History(Protocol):
    """A source of the range's events (`KafkaHistory` or `StoreHistory`)."""

    progress: RangeProgress

    def pages(self, stop: asyncio.Event) -> AsyncIterator[list[Item]]:
        """Pages of items until the range is read or `stop` is set."""
        ...


def retention_floor(now: datetime, retention_days: int | None) -> datetime | None:
    """The oldest event time the scores table keeps (None: kept forever)."""
    return now - timedelta(days=retention_days) if retention_days else None


def check_range(span: TimeRange, floor: datetime | None) -> None:
    """Refuse a range that ends before the retention floor: every row it wrote would be deleted by the TTL at once."""
    if floor is not None and span.until <= floor:
        raise ReplayRefused(
            f"the range ends before {floor:%Y-%m-%dT%H:%M:%SZ}, the oldest event time MONITOR_RETENTION_DAYS keeps: "
            "its rows "
            "would be deleted by the table's TTL as soon as they were written"
        )


def check_confirmation(counted: Counted, options: ReplayOptions, threshold: float) -> None:
    """Refuse to judge above the confirmation threshold without `--yes` (an unpriced LLM judge counts as above)."""
    usd = counted.estimate.usd
    if options.yes or counted.estimate.calls == 0 or (usd is not None and usd <= threshold):
        return
    shown = (
        "an unknown amount (the judge model has no price: set MONITOR_JUDGE_PRICES)"
        if usd is None
        else (f"${usd:,.4f}" if usd < 1 else f"${usd:,.2f}")
    )
    raise ReplayRefused(
        f"the estimated cost is {shown}, above MONITOR_REPLAY_CONFIRM_USD (${threshold:,.2f}): run again with --yes to "
        "go ahead, "
        "or with --max-usd to cap the spend"
    )


class Replay:
    """One run of `relevancy-monitor replay` (see the module docstring for its order)."""

    def __init__(
        self,
        settings: Settings,
        options: ReplayOptions,
        judge: Judge,
        store: AsyncStore,
        view: ReplayView,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        metrics: Metrics | None = None,
    ) -> None:
        self.settings = settings
        self.options = options
        self.judge = judge
        self.store = store
        self.view = view
        self.clock = clock
        self.metrics = metrics or Metrics(
            max_apps=settings.process.metrics_max_apps, apps=tuple(settings.process.metrics_apps)
        )
        # From the settings, as the live pipeline's: a replay can never send or store text the live path would not.
        self.redactor: Redactor | None = build_redactor(settings.redaction)
        self.window = settings.judge.context_window()
        self.cost = CostModel.of(judge, settings.judge, batch=options.batch_api)
        self.erased = ErasedIds()
        self.stop = asyncio.Event()
        self.started = clock()
        self.run_id: str | None = None

    # ---- 1. check ----------------------------------------------------------------------------------------

    async def _check(self) -> datetime | None:
        floor = retention_floor(self.started, self.settings.store.retention_days)
        check_range(self.options.span, floor)
        if self.options.batch_api and not isinstance(self.judge, LLMJudge):
            raise ReplayRefused(
                f"--batch-api sends LLM calls, and the {self.judge.info.method} judge makes none (MONITOR_JUDGE=rubric "
                "or statements)"
            )
        if self.options.batch_api and isinstance(self.judge, LLMJudge) and self.judge.settings.provider != "anthropic":
            raise ReplayRefused(
                f"--batch-api uses the Message Batches API of the anthropic provider, and the "
                f"{self.judge.settings.provider} provider has none here: replay without --batch-api"
            )
        if self.options.max_usd is not None and self.cost.calls_api and self.cost.price is None:
            raise ReplayRefused(
                f"--max-usd needs the judge model's price, and {self.cost.model} has none: add it to "
                "MONITOR_JUDGE_PRICES"
            )
        # A dry run only reads: its session is read-only, and it creates nothing (a missing store is one line).
        await (self.store.open_for_reads() if self.options.dry_run else self.store.open())
        self.erased = await self.store.call(load_erased_ids)
        return floor

    # ---- 2. count ----------------------------------------------------------------------------------------

    def _history(self) -> History:
        if self.options.from_store:
            return StoreHistory(self.store, self.options.span, self.options.where)
        return KafkaHistory(self.settings.kafka, self.options.span)

    async def _triaged(
        self,
        history: History,
        tally: Tally,
        floor: datetime | None,
        phase: Phase,
        expected: Callable[[], int],
        in_flight: Callable[[], int],
    ) -> AsyncIterator[list[tuple[ConversationEvent, SampleDecision]]]:
        """Pages of the events to judge, every other record counted in `tally` by its skip reason."""
        sampler = build_sampler(self.settings)  # afresh per phase: both phases decide alike
        judge_id = self.judge.info.judge_id
        last_shown = 0.0
        async for page in history.pages(self.stop):
            tally.read += len(page)
            todo: list[tuple[ConversationEvent, SampleDecision]] = []
            for item in page:
                if isinstance(item, Malformed):
                    tally.skip(Skip.MALFORMED)
                    tally.malformed[item.reason] += 1
                    continue
                verdict = triage(item, sampler, self.erased, floor)
                if isinstance(verdict, Skip):
                    tally.skip(verdict)
                else:  # cut to the judge's window once, as live: the estimate, redaction, judge and row agree
                    todo.append((windowed(item, self.window), verdict))
            done = await already_scored(
                self.store, judge_id, [e.event_id for e, _ in todo], any_run=self.options.resume
            )
            if done:
                tally.skip(Skip.ALREADY_SCORED, sum(1 for e, _ in todo if e.event_id in done))
                todo = [(e, d) for e, d in todo if e.event_id not in done]
            if time.monotonic() - last_shown >= _PROGRESS_EVERY_S:
                self.view.progress(self._snapshot(phase, history, tally, expected(), in_flight()))
                last_shown = time.monotonic()
            yield todo

    def _snapshot(self, phase: Phase, history: History, tally: Tally, expected: int, in_flight: int = 0) -> Snapshot:
        return Snapshot(
            phase,
            tally.read,
            expected or history.progress.expected,
            tally,
            in_flight,
            tally.spent_usd,
            self.options.max_usd,
        )

    async def _count(self, floor: datetime | None) -> Counted:
        tally = Tally()
        history = self._history()
        stored: StoredCounts | None = None
        if isinstance(history, StoreHistory):
            stored = await history.counts()
            if stored.events and not stored.with_text:
                raise ReplayRefused(
                    f"none of the {stored.events} stored events in the range has its text (MONITOR_STORE_TEXT=none "
                    "when they were "
                    "scored, or emptied by MONITOR_TEXT_RETENTION_DAYS): replay them from the topics instead (without "
                    "--from-store)"
                )
            tally.skip(Skip.NO_TEXT, stored.events - stored.with_text)
        question_chars = response_chars = context = events = calls = 0
        async for todo in self._triaged(history, tally, floor, "count", lambda: 0, lambda: 0):
            for event, _ in todo:
                events += 1
                if event.response.strip():
                    calls += 1
                    question_chars += len(event.question)
                    response_chars += len(event.response)
                    context += self.cost.context_chars(event.context, event.system)
        tally.before_start = history.progress.before_start
        self.view.progress(self._snapshot("count", history, tally, tally.read))
        cost = estimate(self.cost, events, question_chars, response_chars, calls, context)
        return Counted(tally, cost, stored, floor)

    # ---- 4. record ---------------------------------------------------------------------------------------

    def _record(self, counted: Counted, tally: Tally, status: RunStatus) -> RunRecord:
        assert self.run_id is not None
        span = self.options.span
        info = self.judge.info
        return RunRecord(
            run_id=self.run_id,
            scores_table=self.store.store.table,
            source="store" if self.options.from_store else "kafka",
            since=span.since,
            until=span.until,
            filter=self.options.where or "",
            topics=[] if self.options.from_store else list(self.settings.kafka.topics),
            judge=info.method,
            judge_id=info.judge_id,
            batch_api=self.options.batch_api,
            status=status,
            estimate_usd=counted.estimate.usd,
            max_usd=self.options.max_usd,
            spent_usd=tally.spent_usd,
            events=counted.to_score,
            scored=tally.scored,
            skipped=sum(tally.skipped.values()),
            failed=tally.failed,
            started_at=self.started,
            updated_at=self.clock(),
        )

    async def _save(self, counted: Counted, tally: Tally, status: RunStatus) -> None:
        try:
            await write_run(self.store, self._record(counted, tally, status))
        except Exception as e:  # the run's own record is for audit and resume hints; the rows are what matter
            log.warning("replay_record_failed", run_id=self.run_id, error=type(e).__name__, detail=str(e)[:200])

    # ---- 5. score ----------------------------------------------------------------------------------------

    def _judged(self, event: ConversationEvent, history: History) -> JudgedEvent:
        judged = JudgedEvent.unredacted(event) if self.redactor is None else redact_event(event, self.redactor)
        if isinstance(history, StoreHistory):
            earlier = history.redaction_of.pop(event.event_id, None)
            if earlier is not None:  # the stored text is the redacted one: keep what was removed before
                merged = dict(earlier.redactions)
                for kind, n in judged.redactions.items():
                    merged[kind] = merged.get(kind, 0) + n
                judged = replace(judged, redactions=merged, redactor=judged.redactor or earlier.redactor)
        return judged

    async def _tick(self, history: History, tally: Tally, counted: Counted, scorer: DirectScorer | BatchScorer) -> None:
        """Show the score phase's progress while calls are out (a page can take minutes to judge)."""
        while True:
            await asyncio.sleep(_PROGRESS_EVERY_S)
            self.view.progress(self._snapshot("score", history, tally, counted.to_score, scorer.in_flight))

    async def _score(self, counted: Counted) -> ReplayOutcome:
        tally = Tally()
        cap = SpendCap(self.options.max_usd)
        assert self.run_id is not None

        def durable(_: list[None], rows: list[ScoredRow]) -> None:
            for row in rows:
                if row.status == "ok":
                    tally.scored += 1
                else:
                    tally.failed += 1

        def paid(cost: float | None) -> None:
            if cost is None:
                tally.priced = False
            else:
                tally.spent_usd += cost

        flow = self.settings.flow
        sink: ClickHouseSink[None] = ClickHouseSink(
            self.store, durable, self.metrics, max_rows=flow.batch_max_rows, max_seconds=flow.batch_max_seconds
        )
        scorer = self._scorer(sink, cap, paid)
        flusher = asyncio.create_task(sink.run(), name="replay-sink")
        history = self._history()
        ticker = asyncio.create_task(self._tick(history, tally, counted, scorer), name="replay-progress")
        last_saved = time.monotonic()
        status: RunStatus = "finished"
        try:
            if isinstance(scorer, BatchScorer):
                await scorer.collect_earlier(lambda n: log.info("replay_collecting_earlier_batches", batches=n))
            async for todo in self._triaged(
                history, tally, counted.kept_after, "score", lambda: counted.to_score, lambda: scorer.in_flight
            ):
                for event, decision in todo:
                    if self.stop.is_set() or not await scorer.score(self._judged(event, history), decision):
                        break
                if scorer.stopped or self.stop.is_set():
                    break
                if time.monotonic() - last_saved >= _RECORD_EVERY_S:
                    await self._save(counted, tally, "running")
                    last_saved = time.monotonic()
            if not self.stop.is_set():
                await scorer.finish()
            if self.stop.is_set():
                status = "interrupted"
            elif cap.reached:
                status = "capped"
        finally:
            scorer.stop()
            unfinished = await scorer.drain(flow.shutdown_grace_s)
            await sink.flush_all()
            flusher.cancel()
            ticker.cancel()
            await asyncio.gather(flusher, ticker, return_exceptions=True)
        self.view.progress(self._snapshot("score", history, tally, counted.to_score))
        overshoot = max(0.0, tally.spent_usd - self.options.max_usd) if self.options.max_usd is not None else 0.0
        batched = isinstance(scorer, BatchScorer)
        return ReplayOutcome(
            self.run_id,
            status,
            counted,
            tally,
            cancelled=0 if batched else unfinished,
            left_in_batches=unfinished if batched else 0,
            overshoot_usd=overshoot,
        )

    def _scorer(
        self, sink: ClickHouseSink[None], cap: SpendCap, paid: Callable[[float | None], None]
    ) -> DirectScorer | BatchScorer:
        """The scorer of the options: one call per event, or Message Batches."""
        assert self.run_id is not None
        flow, policy = self.settings.flow, self.settings.store.store_text
        if self.options.batch_api:
            assert isinstance(self.judge, LLMJudge)  # checked first thing (`_check`)
            batch = BatchSettings(
                self.options.batch_size, self.options.batch_poll_s, attempts=flow.judge_event_attempts
            )
            return BatchScorer(
                BatchJudge(self.judge),
                sink,
                self.store,
                self.cost,
                cap,
                batch,
                run_id=self.run_id,
                text_policy=policy,
                on_row_cost=paid,
                interrupt=self.stop,
            )
        guard = GuardedJudge(self.judge, flow, self.metrics, on_spent=lambda usage: None)
        # One event per call the judge may have out: a reservation is made just before its call can start.
        return DirectScorer(
            guard,
            sink,
            self.cost,
            cap,
            run_id=self.run_id,
            text_policy=policy,
            max_in_flight=flow.judge_concurrency,
            on_row_cost=paid,
        )

    # ---- the whole run -----------------------------------------------------------------------------------

    async def run(self) -> ReplayOutcome:
        """Check, count, confirm, record, score and finish (see the module docstring); raises `ReplayRefused`."""
        began = time.monotonic()
        floor = await self._check()
        counted = await self._count(floor)
        self.view.estimated(counted)
        if self.options.dry_run or self.stop.is_set():
            status: Literal["estimated", "interrupted"] = "interrupted" if self.stop.is_set() else "estimated"
            return ReplayOutcome(None, status, counted, elapsed_s=time.monotonic() - began)
        check_confirmation(counted, self.options, self.settings.process.replay_confirm_usd)
        self.run_id = new_run_id(self.started)
        await self._save(counted, Tally(), "running")
        log.info("replay_started", run_id=self.run_id, judge_id=self.judge.info.judge_id, events=counted.to_score)
        try:
            outcome = await self._score(counted)
        except BaseException:
            await self._save(counted, Tally(), "failed")
            raise
        await self._save(counted, outcome.tally, outcome.status if outcome.status != "estimated" else "finished")
        outcome.elapsed_s = time.monotonic() - began
        log.info(
            "replay_finished",
            run_id=self.run_id,
            status=outcome.status,
            scored=outcome.tally.scored,
            failed=outcome.tally.failed,
            spent_usd=round(outcome.tally.spent_usd, 6),
        )
        return outcome
