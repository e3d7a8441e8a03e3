"""Which events of a batch a judge has already scored (the store's answer to the replay's skip rule).

A replay never replaces a live score: events with an ok row of this judge_id written by the live consumer are
skipped. With `--resume`, so are those an earlier replay scored. Error rows never count: re-scoring them is how a
judge outage's gap is filled (the ok row replaces the error row under FINAL, as on redelivery)."""

from __future__ import annotations

from collections.abc import Sequence

from monitor.runtime.store import AsyncStore

_LOOKUP = (
    "SELECT DISTINCT event_id FROM {table} WHERE judge_id = {{judge_id:String}} AND status = 'ok' AND event_id IN {{event_ids:Array(String)}}{runs}"
)


async def already_scored(store: AsyncStore, judge_id: str, event_ids: Sequence[str], *, any_run: bool) -> set[str]:
    """The ids among `event_ids` with an ok row of `judge_id`: live rows only, or rows of any run (`any_run`)."""
    if not event_ids:
        return set()
    sql = _LOOKUP.format(table=store.store.qualified_table, runs="" if any_run else " AND replay_run = ''")
    result = await store.query(sql, {"judge_id": judge_id, "event_ids": list(dict.fromkeys(event_ids))})
    return {str(row[0]) for row in result.rows}
