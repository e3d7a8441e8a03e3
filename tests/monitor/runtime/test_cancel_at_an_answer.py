"""A stop cancels the pipeline's background tasks and waits for them to end. On Python 3.11, `asyncio.wait_for` returns
the awaited result instead of raising when the cancel arrives in the loop iteration in which that result came in: a
task that loops around such a call then never ends, and the stop waits forever: the likely cause of a stop with the
broker away that hung in CI (the stop was sent right after readiness turned, i.e. while the probe that turned it went
on to ask the store, and the probes kept logging after `draining`). The cancel is made to land in that iteration here,
each time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from monitor.config import Settings
from monitor.judges.factory import build_judge
from monitor.runtime.metrics import Metrics
from monitor.runtime.service import build_pipeline
from monitor.runtime.sink import ClickHouseSink
from monitor.store.async_store import AsyncStore
from monitor.store.connection import QueryResult
from tests.monitor.runtime.test_sink import rows

ENDS_WITHIN_S = 10.0  # a guard against hanging the suite: a task that honours its cancel ends at once


class _StoreAnsweringWithACancel(AsyncStore):
    """The real store, which cancels `cancel_on_answer` when a probe's `SELECT 1` has its answer (before the
    awaiting code resumes)."""

    def __init__(self, inner: AsyncStore) -> None:
        super().__init__(inner.store)
        self.cancel_on_answer: asyncio.Task[Any] | None = None

    async def query(self, sql: str, parameters: dict[str, Any] | None = None) -> QueryResult:
        result = await super().query(sql, parameters)
        if sql == "SELECT 1" and self.cancel_on_answer is not None:
            asyncio.get_running_loop().call_soon(self.cancel_on_answer.cancel)
        return result


async def _ends(task: asyncio.Task[Any]) -> bool:
    done, _ = await asyncio.wait({task}, timeout=ENDS_WITHIN_S)
    if not done:
        task.cancel()  # a second cancel is not swallowed the same way: the test does not leave it running
        await asyncio.wait({task}, timeout=ENDS_WITHIN_S)
    return bool(done)


async def test_the_probes_end_when_cancelled_as_the_store_answers(
    make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """Probes cancelled in the iteration in which the store's answer to their `SELECT 1` arrives end (they went on
    probing forever, and the stop with them)."""
    settings = make_settings(lag_check_s=0.05)
    store = _StoreAnsweringWithACancel(async_store)
    pipeline = build_pipeline(settings, build_judge(settings.judge), store, Metrics())
    try:
        probes = asyncio.create_task(pipeline.probes.run(), name="probes")
        store.cancel_on_answer = probes
        assert await _ends(probes), "the probes went on after their cancel"
        assert probes.cancelled()
    finally:
        await pipeline.source.stop()
        await pipeline.producer.stop()


async def test_a_sink_flusher_ends_when_cancelled_as_it_wakes(async_store: AsyncStore) -> None:
    """The sink's flusher, cancelled in the iteration in which its wake-up (a full batch) arrives, ends with that
    batch still buffered and unacknowledged, for the stop's own flush, which comes next (it went on flushing
    forever)."""
    written: list[int] = []
    sink: ClickHouseSink[int] = ClickHouseSink(
        async_store, lambda tickets, _: written.extend(tickets), Metrics(), max_rows=1, max_seconds=60.0
    )
    flusher = asyncio.create_task(sink.run(), name="sink-flusher")
    await asyncio.sleep(0)  # the flusher waits for its wake-up
    sink.add(rows(1)[0], 1)  # a full batch: wakes it
    await asyncio.sleep(0)  # one iteration: what the flusher waited on has ended, the flusher has not resumed yet
    flusher.cancel()
    assert await _ends(flusher), "the flusher went on after its cancel"
    assert flusher.cancelled() and written == [] and len(sink) == 1
    await sink.flush_all()
    assert written == [1]
