"""`AnswerIndex` on chDB: the answer's scored row found by event id, by conversation and turn, by span; judged only
for a live primary row; the lookback window; concurrent finds coalesced into one query."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from monitor.feedback.answers import AnswerIndex, StoredAnswer
from monitor.store.async_store import AsyncStore
from monitor.store.connection import QueryResult
from schemas.errors import StoreError
from schemas.feedback import FEEDBACK_SAMPLE_RULE, AnswerRef, Segment
from schemas.scored import ScoredRow

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
DAY = 86_400.0
SHOP = Segment("shop", "m1", "v1")


def scored(
    event_id: str,
    *,
    score: float | None = 0.8,
    at: datetime = T0,
    sample_rule: str = "base",
    replay_run: str = "",
    judge_id: str = "rubric-1",
    conversation_id: str = "",
    turn: int = 0,
    span: tuple[str, str] | None = None,
    segment: Segment = SHOP,
    scored_after_s: float = 5.0,
) -> ScoredRow:
    """A row of `event_id` answered at `at` (an error row when `score` is None)."""
    return ScoredRow(
        event_id=event_id, conversation_id=conversation_id or f"c-{event_id}", event_time=at, app=segment.app,
        model=segment.model, prompt_version=segment.prompt_version, judge="rubric", judge_model="jm",
        judge_id=judge_id, status="ok" if score is not None else "error",
        error="" if score is not None else "unavailable: test", score=score, sample_rule=sample_rule,
        replay_run=replay_run, turn=turn, scored_at=at + timedelta(seconds=scored_after_s),
        metadata={"otel.trace_id": span[0], "otel.span_id": span[1]} if span else {},
    )  # fmt: skip


async def write(store: AsyncStore, *rows: ScoredRow) -> None:
    """Insert `rows` into the scores table."""
    await store.insert_rows(list(rows), uuid.uuid4().hex)


class CountingStore(AsyncStore):
    """The real store, counting the queries it runs (and failing them while `fault` is set)."""

    def __init__(self, inner: AsyncStore) -> None:
        """Wrap `inner`'s store."""
        super().__init__(inner.store)
        self.queries = 0
        self.fault: Exception | None = None

    async def query(self, sql: str, parameters: dict[str, Any] | None = None) -> QueryResult:
        """Count, fail if a fault is set, else run the query."""
        self.queries += 1
        if self.fault is not None:
            raise self.fault
        return await super().query(sql, parameters)


def index_of(store: AsyncStore, **kw: Any) -> AnswerIndex:
    """An index over the test's scores table with a one-day lookback."""
    return AnswerIndex(store, store.store.table, DAY, **kw)


async def test_an_answer_is_found_by_each_kind_of_reference(async_store: AsyncStore) -> None:
    """By event id; by conversation and turn; by the answer span's ids (an OpenTelemetry reference whose own
    `otel:` event id is not the stored one, the answer having a response id); a reference to nothing is None."""
    await write(
        async_store,
        scored("e1", score=0.9),
        scored("e2", conversation_id="conv", turn=3, score=0.4),
        scored("e3", conversation_id="conv", turn=4, score=0.5),
        scored("resp-4", span=("t" * 32, "s" * 16), score=0.1),
    )
    index = index_of(async_store)
    found = await index.find(AnswerRef(event_id="e1"), T0)
    assert found == StoredAnswer("e1", SHOP, T0, True, "base", 0.9)
    by_turn = await index.find(AnswerRef(conversation_id="conv", turn=3), T0)
    assert by_turn is not None and (by_turn.event_id, by_turn.score) == ("e2", 0.4)
    otel = AnswerRef(event_id=f"otel:{'t' * 32}/{'s' * 16}", trace_id="t" * 32, span_id="s" * 16)
    by_span = await index.find(otel, T0 + timedelta(minutes=5))
    assert by_span is not None and (by_span.event_id, by_span.score, by_span.judged) == ("resp-4", 0.1, True)
    assert await index.find(AnswerRef(conversation_id="conv", turn=9), T0) is None
    assert await index.find(AnswerRef(event_id="nope"), T0) is None
    assert await index.find(AnswerRef(), T0) is None


async def test_the_event_id_is_tried_before_the_turn(async_store: AsyncStore) -> None:
    """A reference with an event id and a turn that name different rows gets the event id's; with an event id that is
    not stored, the turn's."""
    await write(async_store, scored("e1", conversation_id="conv", turn=0), scored("e2", conversation_id="conv", turn=1))
    index = index_of(async_store)
    both = await index.find(AnswerRef(event_id="e1", conversation_id="conv", turn=1), T0)
    assert both is not None and both.event_id == "e1"
    fallback = await index.find(AnswerRef(event_id="gone", conversation_id="conv", turn=1), T0)
    assert fallback is not None and fallback.event_id == "e2"


@pytest.mark.parametrize(
    ("rows", "judged", "rule", "score"),
    [
        ([scored("e1", sample_rule="shadow:base")], False, "shadow:base", 0.8),
        ([scored("e1", replay_run="r1")], False, "base", 0.8),
        ([scored("e1", sample_rule=FEEDBACK_SAMPLE_RULE, score=0.2)], False, FEEDBACK_SAMPLE_RULE, 0.2),
        ([scored("e1", score=None)], True, "base", None),
        (
            [
                scored("e1", sample_rule="shadow:base", judge_id="lexical-1", score=0.1),
                scored("e1", replay_run="r1", judge_id="rubric-2", score=0.3),
                scored("e1", score=0.7),
            ],
            True,
            "base",
            0.7,
        ),
        (
            [scored("e1", replay_run="r1", judge_id="rubric-2", score=0.3), scored("e1", sample_rule="shadow:base")],
            False,
            "base",
            0.3,
        ),
    ],
    ids=["shadow", "replay", "feedback", "live-error", "live-beside-others", "replay-before-shadow"],
)
async def test_judged_only_for_a_live_primary_row(
    async_store: AsyncStore, rows: list[ScoredRow], judged: bool, rule: str, score: float | None
) -> None:
    """`judged` is True only for the live consumer's primary row (not a shadow judge's, a replay's or a feedback
    judgement's), which is chosen before the others; the segment is found whichever row holds it."""
    await write(async_store, *rows)
    found = await index_of(async_store).find(AnswerRef(event_id="e1"), T0)
    assert found is not None
    assert (found.judged, found.sample_rule, found.score, found.segment) == (judged, rule, score, SHOP)


async def test_an_unsampled_answer_is_not_found(async_store: AsyncStore) -> None:
    """An answer sampling skipped has no row: None (its segment is then read back from Kafka)."""
    await write(async_store, scored("judged"))
    assert await index_of(async_store).find(AnswerRef(event_id="skipped"), T0) is None


async def test_a_rescored_answer_reads_as_its_latest_version(async_store: AsyncStore) -> None:
    """Two rows of one judge and event (an error, then the redelivered event scored ok) read as the table's FINAL
    does, before any merge: the higher version wins."""
    await write(async_store, scored("e1", score=None))
    await write(async_store, scored("e1", score=0.6, scored_after_s=60))
    found = await index_of(async_store).find(AnswerRef(event_id="e1"), T0)
    assert found is not None and found.score == 0.6


async def test_answers_outside_the_window_are_not_found(async_store: AsyncStore) -> None:
    """Only rows with event_time within [around - lookback, around + 1 h] count, also for finds sharing a query."""
    await write(
        async_store,
        scored("old", at=T0 - timedelta(days=1, minutes=1)),
        scored("edge", at=T0 - timedelta(hours=23)),
        scored("late", at=T0 + timedelta(minutes=90)),
        scored("soon", at=T0 + timedelta(minutes=30)),
    )
    index = index_of(async_store)
    assert await index.find(AnswerRef(event_id="old"), T0) is None
    assert await index.find(AnswerRef(event_id="late"), T0) is None
    assert await index.find(AnswerRef(event_id="edge"), T0) is not None
    assert await index.find(AnswerRef(event_id="soon"), T0) is not None
    assert await index.find(AnswerRef(event_id="old"), T0 - timedelta(hours=1)) is not None
    together = await asyncio.gather(  # one query over both windows: each find keeps to its own
        index.find(AnswerRef(event_id="old"), T0), index.find(AnswerRef(event_id="old"), T0 - timedelta(hours=1))
    )
    assert [a is not None for a in together] == [False, True]


async def test_concurrent_finds_share_one_query(async_store: AsyncStore) -> None:
    """Forty finds issued together (different answers, some missing, windows apart) cost one query, and each gets its
    own answer; with at most 15 per query they cost three."""
    await write(async_store, *(scored(f"e{i}", score=i / 40, at=T0 + timedelta(hours=i)) for i in range(30)))
    counting = CountingStore(async_store)
    index = index_of(counting)
    refs = [(AnswerRef(event_id=f"e{i}"), T0 + timedelta(hours=i)) for i in range(40)]
    found = await asyncio.gather(*(index.find(ref, around) for ref, around in refs))
    assert counting.queries == 1
    assert [a.score if a else None for a in found] == [i / 40 for i in range(30)] + [None] * 10
    counting.queries = 0
    small = index_of(counting, max_finds=15)
    found = await asyncio.gather(*(small.find(ref, around) for ref, around in refs))
    assert counting.queries == 3
    assert [a.event_id if a else None for a in found] == [f"e{i}" for i in range(30)] + [None] * 10


async def test_finds_by_turn_or_span_after_event_ids_cost_one_more_query(async_store: AsyncStore) -> None:
    """Finds by event id, by turn and by span issued together cost two queries: the event ids, then the rest."""
    await write(
        async_store, scored("e1"), scored("e2", conversation_id="conv", turn=2), scored("e3", span=("a" * 32, "b" * 16))
    )
    counting = CountingStore(async_store)
    index = index_of(counting)
    found = await asyncio.gather(
        index.find(AnswerRef(event_id="e1"), T0),
        index.find(AnswerRef(conversation_id="conv", turn=2), T0),
        index.find(AnswerRef(trace_id="a" * 32, span_id="b" * 16), T0),
    )
    assert [a.event_id if a else None for a in found] == ["e1", "e2", "e3"]
    assert counting.queries == 2


async def test_a_failing_store_fails_each_waiting_find(async_store: AsyncStore) -> None:
    """When the store fails, every find of the lookup raises its error; the next finds query again."""
    await write(async_store, scored("e1"))
    counting = CountingStore(async_store)
    counting.fault = StoreError("ClickHouse unreachable: connection refused")
    index = index_of(counting)
    results = await asyncio.gather(
        index.find(AnswerRef(event_id="e1"), T0), index.find(AnswerRef(event_id="e2"), T0), return_exceptions=True
    )
    assert [type(r) for r in results] == [StoreError, StoreError]
    counting.fault = None
    assert await index.find(AnswerRef(event_id="e1"), T0) is not None
