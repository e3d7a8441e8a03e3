"""`AnswerIndex`: the scored row of the answer a feedback event names, looked up in the scores table.

A feedback event names its answer by event id, else by conversation and turn, else by the ids of the answer's span
(the scores table keeps an OpenTelemetry answer's in `metadata['otel.trace_id']` / `metadata['otel.span_id']`). The
rows are looked for by event_time within [around - lookback, around + `AHEAD_S`], so partitions prune. The event ids
are looked up first (the table's key holds event_id); only the references not found that way are looked for by turn
or span, which reads every row of the window. Rows are read without FINAL and collapsed here as the table's
ReplacingMergeTree does (the highest `version` per app, judge_id and event_id), which is far cheaper.

The answer is `judged` when a primary row of the live consumer holds it: not a shadow judge's (`shadow:...`), not a
replay's, and not a feedback-triggered judgement's (`sample_rule` 'feedback', biased to disliked answers). Its segment
is the answer's wherever it was judged.

Finds issued within `gather_s` of each other (and those issued while a query runs) share one lookup, of at most
`max_finds` references: feedback arrives in bursts, and the store serves one call at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import structlog

from consumers.otlp.span_keys import SPAN_ID_KEY, TRACE_ID_KEY
from monitor.store.async_store import AsyncStore
from schemas.feedback import FEEDBACK_SAMPLE_RULE, AnswerRef, Segment

log = structlog.get_logger("monitor.feedback.answers")

AHEAD_S = 3600.0  # an answer's event time may be after the feedback's `around` (clock skew, a late answer_time)
GATHER_S = 0.005
MAX_FINDS = 200
_MAX_TURN = 2**32 - 1  # the scores table's turn is UInt32

KeyKind = Literal["event_id", "turn", "span"]
_KEY_ORDER: tuple[KeyKind, ...] = ("event_id", "turn", "span")


@dataclass(frozen=True, slots=True)
class StoredAnswer:
    """The answer's scored row: its event id, segment and event time; `judged` when it is a primary row of the live
    consumer (else the best other row: a feedback-triggered judgement's, a replay's, a shadow judge's), with that
    row's `sample_rule` and score (None for an error row)."""

    event_id: str
    segment: Segment
    event_time: datetime
    judged: bool
    sample_rule: str
    score: float | None


@dataclass(frozen=True, slots=True)
class ScoredAnswerRow:
    """What the lookup reads of one row of the scores table."""

    event_id: str
    judge_id: str
    conversation_id: str
    turn: int
    trace_id: str
    span_id: str
    segment: Segment
    event_time: datetime
    sample_rule: str
    replay_run: str
    ok: bool
    score: float | None
    scored_at: datetime
    version: int

    @property
    def live_primary(self) -> bool:
        """A primary row of the live consumer: not a shadow judge's, not a replay's, not a feedback judgement's."""
        return (
            not self.sample_rule.startswith("shadow:")
            and self.replay_run == ""
            and self.sample_rule != FEEDBACK_SAMPLE_RULE
        )


def ref_keys(ref: AnswerRef) -> dict[KeyKind, tuple[str, ...] | tuple[str, int]]:
    """The keys `ref` can be looked up by, in the order they are tried (empty: it names nothing findable)."""
    keys: dict[KeyKind, tuple[str, ...] | tuple[str, int]] = {}
    if ref.event_id:
        keys["event_id"] = (ref.event_id,)
    if ref.conversation_id and ref.turn is not None and 0 <= ref.turn <= _MAX_TURN:
        keys["turn"] = (ref.conversation_id, ref.turn)
    if ref.trace_id and ref.span_id:
        keys["span"] = (ref.trace_id, ref.span_id)
    return keys


def _row_key(kind: KeyKind, row: ScoredAnswerRow) -> tuple[str, ...] | tuple[str, int]:
    if kind == "event_id":
        return (row.event_id,)
    if kind == "turn":
        return (row.conversation_id, row.turn)
    return (row.trace_id, row.span_id)


def collapsed(rows: Sequence[ScoredAnswerRow]) -> list[ScoredAnswerRow]:
    """`rows` as the table's FINAL reads them (pure): the highest version per (app, judge_id, event_id)."""
    kept: dict[tuple[str, str, str], ScoredAnswerRow] = {}
    for r in rows:
        key = (r.segment.app, r.judge_id, r.event_id)
        if key not in kept or r.version > kept[key].version:
            kept[key] = r
    return list(kept.values())


def best_answer(rows: Sequence[ScoredAnswerRow]) -> StoredAnswer | None:
    """The answer as its best row says (pure): a live primary row first, then a feedback judgement's, a replay's, a
    shadow judge's; ok rows before error rows; then the latest scored."""

    def rank(r: ScoredAnswerRow) -> tuple[bool, bool, bool, bool, float]:
        shadow = r.sample_rule.startswith("shadow:")
        return (not r.live_primary, shadow, r.replay_run != "", not r.ok, -r.scored_at.timestamp())

    if not rows:
        return None
    best = min(rows, key=rank)
    return StoredAnswer(
        best.event_id, best.segment, best.event_time, best.live_primary, best.sample_rule,
        best.score if best.ok else None,
    )  # fmt: skip


def answer_for(
    ref: AnswerRef, around: datetime, rows: Sequence[ScoredAnswerRow], lookback_s: float
) -> StoredAnswer | None:
    """The answer `ref` names among `rows` (pure): the rows within its window matched by its event id, else by its
    conversation and turn, else by its span; None when none matches."""
    around = _utc(around)
    low, high = around - timedelta(seconds=lookback_s), around + timedelta(seconds=AHEAD_S)
    near = collapsed([r for r in rows if low <= r.event_time <= high])
    for kind, key in ref_keys(ref).items():
        found = best_answer([r for r in near if _row_key(kind, r) == key])
        if found is not None:
            return found
    return None


@dataclass
class _Find:
    ref: AnswerRef
    around: datetime
    future: asyncio.Future[StoredAnswer | None] = field(repr=False)


class AnswerIndex:
    """`find(ref, around)`: the answer's scored row, or None; concurrent finds share one query."""

    def __init__(
        self,
        store: AsyncStore,
        table: str,
        lookback_s: float,
        *,
        gather_s: float = GATHER_S,
        max_finds: int = MAX_FINDS,
    ) -> None:
        self._store = store
        self._table = f"{store.store.database}.{table}"
        self.lookback_s = lookback_s
        self.gather_s = gather_s
        self.max_finds = max_finds
        self._pending: list[_Find] = []
        self._drainer: asyncio.Task[None] | None = None

    async def find(self, ref: AnswerRef, around: datetime) -> StoredAnswer | None:
        """The scored row of the answer `ref` names, with event_time within [around - lookback, around + 1 h];
        None when there is none. Raises `StoreError` when the store fails."""
        if not ref_keys(ref):
            return None
        future: asyncio.Future[StoredAnswer | None] = asyncio.get_running_loop().create_future()
        self._pending.append(_Find(ref, _utc(around), future))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain(), name="answer-index")
        return await future

    async def _drain(self) -> None:
        """Answer the pending finds, `max_finds` per lookup, until none is left."""
        batch: list[_Find] = []
        try:
            await asyncio.sleep(self.gather_s)  # the finds of one burst join the first lookup
            while self._pending:
                batch, self._pending = self._pending[: self.max_finds], self._pending[self.max_finds :]
                try:
                    answers = await self._lookup(batch)
                except Exception as e:  # the store failed: each waiting find raises it
                    for f in batch:
                        if not f.future.done():
                            f.future.set_exception(e)
                    continue
                for f, answer in zip(batch, answers, strict=True):
                    if not f.future.done():
                        f.future.set_result(answer)
                batch = []
        except BaseException:  # cancelled (shutdown): no find waits forever
            for f in (*batch, *self._pending):
                f.future.cancel()
            self._pending = []
            raise

    async def _lookup(self, batch: list[_Find]) -> list[StoredAnswer | None]:
        """The answers of `batch`, in order: one query by event id, then one by turn or span for those not found."""
        answers: list[StoredAnswer | None] = [None] * len(batch)
        by_id = [i for i, f in enumerate(batch) if "event_id" in ref_keys(f.ref)]
        if by_id:
            rows = await self._query([batch[i] for i in by_id], ("event_id",))
            for i in by_id:
                answers[i] = answer_for(batch[i].ref, batch[i].around, rows, self.lookback_s)
        rest = [i for i, f in enumerate(batch) if answers[i] is None and ref_keys(f.ref).keys() - {"event_id"}]
        if rest:
            rows = await self._query([batch[i] for i in rest], ("turn", "span"))
            for i in rest:
                answers[i] = answer_for(batch[i].ref, batch[i].around, rows, self.lookback_s)
        return answers

    async def _query(self, finds: list[_Find], kinds: tuple[KeyKind, ...]) -> list[ScoredAnswerRow]:
        """The rows of the scores table the `finds` may name by keys of `kinds`, in one query over their window."""
        ids: set[str] = set()
        turns: set[tuple[str, int]] = set()
        spans: set[tuple[str, str]] = set()
        for f in finds:
            for kind, key in ref_keys(f.ref).items():
                if kind not in kinds:
                    continue
                if kind == "event_id":
                    ids.add(str(key[0]))
                elif kind == "turn":
                    turns.add((str(key[0]), int(key[1])))
                else:
                    spans.add((str(key[0]), str(key[1])))
        low = min(f.around for f in finds) - timedelta(seconds=self.lookback_s)
        high = max(f.around for f in finds) + timedelta(seconds=AHEAD_S)
        wheres = []
        if ids:
            wheres.append("event_id IN {ids:Array(String)}")
        if turns:
            wheres.append("(conversation_id, turn) IN {turns:Array(Tuple(String, UInt32))}")
        if spans:
            span = f"(metadata['{TRACE_ID_KEY}'], metadata['{SPAN_ID_KEY}'])"
            wheres.append(span + " IN {spans:Array(Tuple(String, String))}")
        sql = (
            f"SELECT event_id, judge_id, conversation_id, turn, metadata['{TRACE_ID_KEY}'], "
            f"metadata['{SPAN_ID_KEY}'], app, model, prompt_version, event_time, sample_rule, replay_run, "
            f"status = 'ok', score, scored_at, version FROM {self._table} "
            "WHERE event_time >= {low:DateTime64(3, 'UTC')} AND event_time <= {high:DateTime64(3, 'UTC')} "
            f"AND ({' OR '.join(wheres)})"
        )
        parameters: dict[str, Any] = {
            "low": low, "high": high, "ids": sorted(ids), "turns": sorted(turns), "spans": sorted(spans),
        }  # fmt: skip
        result = await self._store.query(sql, parameters)
        return [_scored_answer_row(r) for r in result.rows]


def _scored_answer_row(r: tuple[Any, ...]) -> ScoredAnswerRow:
    (event_id, judge_id, conversation_id, turn, trace_id, span_id, app, model, prompt_version, event_time,
     sample_rule, replay_run, ok, score, scored_at, version) = r  # fmt: skip
    return ScoredAnswerRow(
        str(event_id), str(judge_id), str(conversation_id), int(turn), str(trace_id), str(span_id),
        Segment(str(app), str(model), str(prompt_version)), _utc(event_time), str(sample_rule), str(replay_run),
        bool(ok), None if score is None else float(score), _utc(scored_at), int(version),
    )  # fmt: skip


def _utc(t: datetime) -> datetime:
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
