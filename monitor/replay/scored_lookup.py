"""Which events of a batch a judge has already scored (the store's answer to the replay's skip rule).

A replay never replaces a live row: events with any row of this judge_id written by the live consumer (ok or error)
are skipped, so the rows the alert rules read (live ones) stay exactly as they were. A live error row stays an error:
the judge did fail then; a replay with another judge scores the event beside it. With `--resume`, events an earlier
replay scored ok are skipped too; an earlier replay's error rows are scored again (the ok row replaces them under
FINAL, as on redelivery)."""

from __future__ import annotations

from collections.abc import Sequence

from monitor.store.async_store import AsyncStore

_LOOKUP = (
    "SELECT DISTINCT event_id FROM {table} WHERE judge_id = {{judge_id:String}} AND event_id IN "
    "{{event_ids:Array(String)}}"
    " AND (replay_run = ''{replays})"
)


async def already_scored(store: AsyncStore, judge_id: str, event_ids: Sequence[str], *, any_run: bool) -> set[str]:
    """The ids among `event_ids` with a live row of `judge_id`, or (`any_run`) an ok row of any replay."""
    if not event_ids:
        return set()
    sql = _LOOKUP.format(table=store.store.qualified_table, replays=" OR status = 'ok'" if any_run else "")
    result = await store.query(sql, {"judge_id": judge_id, "event_ids": list(dict.fromkeys(event_ids))})
    return {str(row[0]) for row in result.rows}
