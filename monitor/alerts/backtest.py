"""Replay rules over stored history: when each would have gone pending, fired and resolved. State is kept in
memory only; the live `alert_state` table is never read or written.

Each rule's history is read once for the whole range (`monitor.alerts.history`; rules that read the same
segments, time column and grid share one query), and every step is evaluated from it in memory with the same
decisions as `run` and `check`. A rule whose windows do not fall on a grid of whole minutes, or whose history
cannot be read, is queried step by step as before (`per_step=True` does that for every rule)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from monitor.alerts.engine import Evaluation, SegmentResult, StateKey, evaluate_rules
from monitor.alerts.evaluator import AlertState
from monitor.alerts.history import (
    Grid,
    History,
    buckets_at,
    grid_for,
    read_range,
    scores_at,
    tail_counts_at,
    traffic_at,
    values_for,
    versions_at,
)
from monitor.alerts.outcomes import Newest
from monitor.alerts.queries import (
    DEFAULT_TRAFFIC_TABLE,
    fetch_canary_history,
    fetch_score_history,
    fetch_shadow_history,
    fetch_traffic_history,
)
from monitor.alerts.rules import Rule, RuleSet
from monitor.alerts.sequential import Buckets
from monitor.alerts.sources import RuleData, StoreData
from monitor.alerts.windows import SegmentData, SegmentKey, TailCounts, TrafficCounts, VersionStats, Windows, utc
from monitor.store.connection import ClickHouseStore
from schemas.errors import BacktestError, QueryError

MAX_STEPS = 20_000  # rule evaluations per rule a backtest will do: beyond, a larger --step


@dataclass
class Episode:
    """One pending-then-firing episode of a rule for a segment."""

    rule: str
    segment: SegmentKey
    severity: str
    pending_at: datetime
    fired_at: datetime | None = None
    resolved_at: datetime | None = None
    value_at_fire: float | None = None
    baseline_at_fire: float | None = None
    p_value_at_fire: float | None = None
    n_at_fire: int = 0
    n_baseline_at_fire: int = 0
    note_at_fire: str = ""  # the verdict and, when borrowed, which baseline it was judged against

    @property
    def delay(self) -> timedelta | None:
        """From the first bad evaluation to firing (the `for` duration plus confirmation)."""
        return None if self.fired_at is None else self.fired_at - self.pending_at

    @property
    def duration(self) -> timedelta | None:
        """How long it fired (None while still firing at the end)."""
        return None if self.fired_at is None or self.resolved_at is None else self.resolved_at - self.fired_at


@dataclass(frozen=True, slots=True)
class RuleSummary:
    """One rule over the whole backtest."""

    rule: str
    fired: int  # episodes that fired
    suppressed: int  # pending episodes that cleared without firing
    mean_delay_s: float | None  # mean seconds from pending to firing (None when nothing fired)
    still_firing: int  # fired episodes not resolved by the end
    errors: int  # evaluations whose data could not be read


@dataclass
class BacktestReport:
    """Fired episodes, pending episodes that cleared without firing, and rule errors, over [since, until)."""

    since: datetime
    until: datetime
    step: timedelta
    evaluations: int = 0
    episodes: list[Episode] = field(default_factory=list)
    suppressed: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    last: Evaluation | None = None  # the last round: which segments the rules had at the end

    def fired(self, rule: str | None = None) -> list[Episode]:
        """Episodes that fired, optionally of one rule."""
        return [e for e in self.episodes if e.fired_at is not None and (rule is None or e.rule == rule)]

    def summary(self, rules: list[Rule]) -> list[RuleSummary]:
        """Per rule: fired episodes, suppressed (pending that cleared), mean delay in seconds, errors."""
        return [self._summarise(r.name) for r in rules]

    def _summarise(self, rule: str) -> RuleSummary:
        fired = self.fired(rule)
        delays = [e.delay.total_seconds() for e in fired if e.delay is not None]
        return RuleSummary(
            rule=rule,
            fired=len(fired),
            suppressed=self.suppressed[rule],
            mean_delay_s=(sum(delays) / len(delays)) if delays else None,
            still_firing=sum(1 for e in fired if e.resolved_at is None),
            errors=self.errors[rule],
        )


@dataclass(frozen=True, slots=True)
class Progress:
    """Where a backtest is: reading histories (`done` of `total` queries) or evaluating (`done` of `total` steps,
    the last one at `at`)."""

    phase: Literal["reading", "evaluating"]
    done: int
    total: int
    at: datetime | None = None


ProgressFn = Callable[[Progress], None]


def check_span(since: datetime, until: datetime, step: timedelta, max_steps: int = MAX_STEPS) -> None:
    """Refuse a span or step a backtest cannot evaluate, with `BacktestError` (before any store or screen is opened)."""
    if step.total_seconds() < 60:
        raise BacktestError("--step must be at least 1m")
    if until <= since:
        raise BacktestError("--until must be after --since")
    if (until - since) / step > max_steps:
        raise BacktestError(f"{int((until - since) / step)} steps: more than {max_steps}; use a larger --step")


def run_backtest(
    store: ClickHouseStore,
    rules: RuleSet,
    since: datetime,
    until: datetime,
    step: timedelta,
    traffic_table: str = DEFAULT_TRAFFIC_TABLE,
    max_steps: int = MAX_STEPS,
    *,
    progress: ProgressFn | None = None,
    per_step: bool = False,
) -> BacktestReport:
    """Evaluate every rule at since, since+step, ... < until with in-memory state; `progress` is told of each
    history read and each step; `per_step` queries every rule at every step instead of reading histories."""
    since, until = utc(since), utc(until)
    check_span(since, until, step, max_steps)
    times = backtest_times(since, until, step)
    fallback = StoreData(store, traffic_table)
    data: RuleData = (
        fallback if per_step else read_history(store, rules.rules, times, step, fallback, traffic_table, progress)
    )
    return backtest_on(data, rules, since, until, step, progress=progress)


def backtest_on(
    data: RuleData,
    rules: RuleSet,
    since: datetime,
    until: datetime,
    step: timedelta,
    *,
    progress: ProgressFn | None = None,
) -> BacktestReport:
    """The rounds of `run_backtest` on data already at hand (the store's histories, or a benchmark's own streams)."""
    times = backtest_times(since, until, step)
    report = BacktestReport(since, until, step)
    states: dict[StateKey, AlertState] = {}
    open_: dict[StateKey, Episode] = {}
    for i, now in enumerate(times):
        evaluation = evaluate_rules(None, rules, now, states, data=data)
        report.evaluations += 1
        for err in evaluation.errors:
            report.errors[err.rule.name] += 1
        for res in evaluation.results:
            _track(report, open_, res, now)
            states[res.state.key] = res.state
        report.last = evaluation
        if progress is not None:
            progress(Progress("evaluating", i + 1, len(times), now))
    return report


def backtest_times(since: datetime, until: datetime, step: timedelta) -> list[datetime]:
    """The evaluation times since, since + step, ... before `until`."""
    out = []
    now = since
    while now < until:
        out.append(now)
        now += step
    return out


class HistoryData:
    """`RuleData` from histories read before the first step (by rule name); what they do not cover (a rule
    without a history, a window off its grid or outside what was read) is asked of `fallback`."""

    def __init__(self, fallback: RuleData, scores: Mapping[str, History], traffic: Mapping[str, History]) -> None:
        self.fallback = fallback
        self._scores = dict(scores)
        self._traffic = dict(traffic)

    def _score_history(
        self, rule: Rule, windows: Windows, lookback: timedelta | None = None
    ) -> tuple[History, list[int]] | None:
        h = self._scores.get(rule.name)
        bounds = h.bounds(windows, lookback=lookback) if h is not None else None
        return (h, bounds) if h is not None and bounds is not None else None

    def scores(self, rule: Rule, windows: Windows) -> dict[SegmentKey, SegmentData]:
        """See `RuleData.scores`."""
        found = self._score_history(rule, windows)
        return scores_at(found[0], rule, windows, found[1]) if found else self.fallback.scores(rule, windows)

    def versions(self, rule: Rule, windows: Windows) -> dict[SegmentKey, list[VersionStats]]:
        """See `RuleData.versions`."""
        found = self._score_history(rule, windows, rule.rollout.lookback if rule.rollout is not None else None)
        return versions_at(found[0], rule, windows, found[1]) if found else self.fallback.versions(rule, windows)

    def traffic(self, rule: Rule, windows: Windows) -> dict[SegmentKey, TrafficCounts]:
        """See `RuleData.traffic`."""
        h = self._traffic.get(rule.name)
        bounds = h.bounds(windows) if h is not None else None
        return (
            traffic_at(h, rule, windows, bounds)
            if h is not None and bounds is not None
            else self.fallback.traffic(rule, windows)
        )

    def tail_counts(
        self, rule: Rule, windows: Windows, segment: SegmentKey, cutoff: float, threshold: float
    ) -> TailCounts:
        """See `RuleData.tail_counts`."""
        found = self._score_history(rule, windows)
        if found is None or found[0].values != "score":
            return self.fallback.tail_counts(rule, windows, segment, cutoff, threshold)
        return tail_counts_at(found[0], windows, found[1], segment, cutoff, threshold)

    def buckets(self, rule: Rule, windows: Windows) -> dict[SegmentKey, Buckets]:
        """See `RuleData.buckets`."""
        current = Windows(windows.current)
        found = self._score_history(rule, current)
        return buckets_at(found[0], rule, current, found[1]) if found else self.fallback.buckets(rule, windows)

    def newest(self, rule: Rule, before: datetime) -> Newest | None:
        """Not looked up: a backtest reports episodes, not why a rule had no segment; but a labels or feedback_auc rule
        asks the store each step anyway (`read_history`), so it tells no table from no rows as a round does."""
        return self.fallback.newest(rule, before) if rule.spec.table in ("labels", "feedback_scores") else None


@dataclass
class _Read:
    """One history query over [start, end) and the rules it serves."""

    rules: list[Rule]
    grid: Grid
    start: datetime
    end: datetime


def read_history(
    store: ClickHouseStore,
    rules: Sequence[Rule],
    times: Sequence[datetime],
    step: timedelta,
    fallback: RuleData,
    traffic_table: str = DEFAULT_TRAFFIC_TABLE,
    progress: ProgressFn | None = None,
) -> HistoryData:
    """Read the history every rule needs for evaluations at `times`, one query per distinct (table, segment keys,
    time column, grid); a query that fails leaves its rules to `fallback`, step by step."""
    scores: dict[tuple[object, ...], _Read] = {}
    traffic: dict[tuple[object, ...], _Read] = {}
    for rule in rules:
        if rule.spec.table in ("labels", "feedback_scores"):
            # Labels come a few hundred a fortnight, and a judge's AUC is no sum of buckets: each step asks the
            # store (`fallback`).
            continue
        grid = grid_for(rule, times[0], step) if times else None
        if grid is None:
            continue
        start, end = read_range(rule, times[0], times[-1])
        phase = grid.origin_ms % grid.size_ms
        reads_traffic = rule.source == "traffic" or rule.spec.needs_traffic
        key: tuple[object, ...]
        if rule.source == "scores":
            key = (
                rule.spec.table,
                rule.spec.primary_only,
                rule.include_replays,
                rule.turns,
                rule.spec.time_column,
                rule.key_fields,
                rule.low_score_below,
                values_for(rule),
                grid.size,
                phase,
            )
            _plan(scores, key, rule, grid, start, end)
        if reads_traffic:
            key = (tuple(k for k in rule.key_fields if k != "judge_id"), grid.size, phase)
            _plan(traffic, key, rule, grid, start, end)
    total, done = len(scores) + len(traffic), 0
    score_histories: dict[str, History] = {}
    traffic_histories: dict[str, History] = {}
    for plans, out, is_traffic in ((scores, score_histories, False), (traffic, traffic_histories, True)):
        for r in plans.values():
            grid = r.grid.covering(r.start)
            try:
                if is_traffic:
                    h = fetch_traffic_history(store, r.rules[0], traffic_table, grid, r.start, r.end)
                elif r.rules[0].spec.table == "canary":
                    h = fetch_canary_history(store, r.rules[0], grid, r.start, r.end)
                elif r.rules[0].spec.table == "shadow":
                    h = fetch_shadow_history(store, r.rules[0], grid, r.start, r.end)
                else:
                    h = fetch_score_history(store, r.rules[0], grid, r.start, r.end)
            except QueryError:
                h = None  # step by step instead: each step then reports the rule's error, as `run` would
            if h is not None:
                out.update({rule.name: h for rule in r.rules})
            done += 1
            if progress is not None:
                progress(Progress("reading", done, total))
    return HistoryData(fallback, score_histories, traffic_histories)


def _plan(
    plans: dict[tuple[object, ...], _Read],
    key: tuple[object, ...],
    rule: Rule,
    grid: Grid,
    start: datetime,
    end: datetime,
) -> None:
    # Rules with the same key read the same sums on grids of the same size and phase: one query covers them all.
    r = plans.get(key)
    if r is None:
        plans[key] = _Read([rule], grid, start, end)
    else:
        r.rules.append(rule)
        r.start, r.end = min(r.start, start), max(r.end, end)


def _track(report: BacktestReport, open_: dict[StateKey, Episode], res: SegmentResult, now: datetime) -> None:
    """Open, fire, suppress or resolve the episode of one segment after its state moved at `now`."""
    key, new = res.state.key, res.state
    old = res.previous.state if res.previous is not None else "inactive"
    if new.state == "pending" and old != "pending":
        open_[key] = Episode(new.rule, new.segment, new.severity, pending_at=now)
    elif new.state == "firing" and old != "firing":
        ep = open_.get(key) or Episode(new.rule, new.segment, new.severity, pending_at=now)
        ep.fired_at, ep.value_at_fire, ep.baseline_at_fire = now, new.value, new.baseline
        ep.p_value_at_fire, ep.n_at_fire, ep.n_baseline_at_fire, ep.note_at_fire = (
            new.p_value,
            new.n_current,
            new.n_baseline,
            new.note,
        )
        open_[key] = ep
        report.episodes.append(ep)
    elif new.state == "inactive" and old == "pending":
        open_.pop(key, None)
        report.suppressed[new.rule] += 1
    elif new.state == "resolved" and old == "firing":
        resolved = open_.pop(key, None)
        if resolved is not None:
            resolved.resolved_at = now
