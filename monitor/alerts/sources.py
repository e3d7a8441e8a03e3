"""Where an evaluation gets a rule's per-segment data: `RuleData`, answered by the store one query per rule and
window (`StoreData`, what `run` and `check` use) or from history read ahead (`monitor.alerts.history`, what
`backtest` uses). The engine decides the same way whichever answers."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from monitor.alerts.history import MINUTE, Grid, buckets_at
from monitor.alerts.label_agreement import CONTROL_ROUTE, LABELS_TABLE
from monitor.alerts.outcomes import Newest
from monitor.alerts.queries import (
    DEFAULT_TRAFFIC_TABLE,
    RESOLVED_FEEDBACK,
    SHADOW_ROW,
    feedback_tables_exist,
    fetch_newest,
    fetch_score_history,
    fetch_scores,
    fetch_tail_counts,
    fetch_traffic,
    fetch_versions,
    labels_table_exists,
    live_rows,
    sql_literal,
)
from monitor.alerts.rules import Rule
from monitor.alerts.sequential import Buckets
from monitor.alerts.windows import SegmentData, SegmentKey, TailCounts, TrafficCounts, VersionStats, Windows
from monitor.store.connection import ClickHouseStore
from schemas.canary import CANARY_TABLE
from schemas.feedback import FEEDBACK_ROLLUP_TABLE, FEEDBACK_TABLE


class RuleData(Protocol):
    """A rule's data for one set of windows; every method raises `QueryError` when its data cannot be read."""

    def scores(self, rule: Rule, windows: Windows) -> dict[SegmentKey, SegmentData]:
        """Per-segment statistics of the scores in the current and baseline windows."""
        ...

    def versions(self, rule: Rule, windows: Windows) -> dict[SegmentKey, list[VersionStats]]:
        """A rollout rule's versions with rows in the current window, per segment without the version."""
        ...

    def traffic(self, rule: Rule, windows: Windows) -> dict[SegmentKey, TrafficCounts]:
        """Per-segment traffic counts in both windows."""
        ...

    def tail_counts(
        self, rule: Rule, windows: Windows, segment: SegmentKey, cutoff: float, threshold: float
    ) -> TailCounts:
        """Ok scores below `cutoff` (both windows) and below `threshold` (current) in one segment."""
        ...

    def newest(self, rule: Rule, before: datetime) -> Newest | None:
        """The newest row the rule reads (scores, canary runs or traffic) at or before `before`, and the newest of its
        table; None when not looked up."""
        ...

    def buckets(self, rule: Rule, windows: Windows) -> dict[SegmentKey, Buckets]:
        """A detector rule's segments, bucket by bucket over the current window (oldest first)."""
        ...


class StoreData:
    """`RuleData` from the store: one query per call, each over the windows asked for."""

    def __init__(self, store: ClickHouseStore, traffic_table: str = DEFAULT_TRAFFIC_TABLE) -> None:
        self.store = store
        self.traffic_table = traffic_table
        self._newest: dict[tuple[str, str, str, datetime], datetime | None] = {}

    def scores(self, rule: Rule, windows: Windows) -> dict[SegmentKey, SegmentData]:
        """See `RuleData.scores`."""
        return fetch_scores(self.store, rule, windows)

    def versions(self, rule: Rule, windows: Windows) -> dict[SegmentKey, list[VersionStats]]:
        """See `RuleData.versions`."""
        return fetch_versions(self.store, rule, windows)

    def traffic(self, rule: Rule, windows: Windows) -> dict[SegmentKey, TrafficCounts]:
        """See `RuleData.traffic`."""
        return fetch_traffic(self.store, rule, windows, self.traffic_table)

    def tail_counts(
        self, rule: Rule, windows: Windows, segment: SegmentKey, cutoff: float, threshold: float
    ) -> TailCounts:
        """See `RuleData.tail_counts`."""
        return fetch_tail_counts(self.store, rule, windows, segment, cutoff, threshold)

    def buckets(self, rule: Rule, windows: Windows) -> dict[SegmentKey, Buckets]:
        """See `RuleData.buckets`: one query over the current window, in buckets of a minute."""
        current = Windows(windows.current)
        history = fetch_score_history(self.store, rule, Grid(windows.current[0], MINUTE), *windows.current)
        bounds = history.bounds(current)
        return buckets_at(history, rule, current, bounds) if bounds is not None else {}

    def newest(self, rule: Rule, before: datetime) -> Newest | None:
        """See `RuleData.newest`: the rule's rows and its whole table, each read once per table, time column, row
        filter and time (rules without segments share them)."""
        rows = ""
        if rule.source == "traffic":
            table, column = self.traffic_table, "minute"
        elif rule.spec.table == "labels":
            if not labels_table_exists(self.store):
                return None  # a schema before the labels table: the rule says so (`outcomes.describe_empty`)
            table, column, rows = LABELS_TABLE, rule.spec.time_column, f" AND route = {sql_literal(CONTROL_ROUTE)}"
        elif rule.spec.table in ("feedback", "feedback_scores"):
            if not feedback_tables_exist(self.store):
                return Newest(None, None)  # a schema before the feedback tables: the rule says so
            # The rule's rows: resolved feedback (a segment), on a named answer for the judge-against-user rule.
            table, column, rows = FEEDBACK_ROLLUP_TABLE, "minute", f" AND {RESOLVED_FEEDBACK}"
            if rule.spec.table == "feedback_scores":
                table, column, rows = FEEDBACK_TABLE, "feedback_time", f" AND {RESOLVED_FEEDBACK} AND event_id != ''"
        elif rule.spec.table == "canary":
            table, column = CANARY_TABLE, rule.spec.time_column
        else:
            # The newest row the rule reads: a replay's rows do not make a rule without live rows look fed, nor the
            # primary's rows a shadow rule without a shadow judge. (A traffic metric's primary-only filter is left
            # out: a shadow row always comes with its primary's; so is the turns filter: a rule on follow-ups without
            # any is told so by its words, `outcomes.describe_empty`.)
            table, column, rows = self.store.table, rule.spec.time_column, live_rows(rule)
            if rule.spec.table == "shadow":
                rows += f" AND {SHADOW_ROW}"
        at = self._newest_of(table, column, before, rows)
        return Newest(at, self._newest_of(table, column, before, "") if rows else at)

    def _newest_of(self, table: str, column: str, before: datetime, rows: str) -> datetime | None:
        key = (table, column, rows, before)
        if key not in self._newest:
            self._newest[key] = fetch_newest(self.store, table, column, before, rows)
        return self._newest[key]
