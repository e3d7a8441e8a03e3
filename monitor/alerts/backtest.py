"""Replay rules over stored history: when each would have gone pending, fired and resolved. State is kept in
memory only; the live `alert_state` table is never read or written."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from monitor.alerts.engine import SegmentResult, StateKey, evaluate_rules
from monitor.alerts.evaluator import AlertState
from monitor.alerts.queries import DEFAULT_TRAFFIC_TABLE
from monitor.alerts.rules import Rule, RuleSet
from monitor.alerts.windows import SegmentKey, utc
from monitor.runtime.store import ClickHouseStore
from schemas.errors import BacktestError


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


def run_backtest(
    store: ClickHouseStore,
    rules: RuleSet,
    since: datetime,
    until: datetime,
    step: timedelta,
    traffic_table: str = DEFAULT_TRAFFIC_TABLE,
    max_steps: int = 20_000,
) -> BacktestReport:
    """Evaluate every rule at since, since+step, ... < until with in-memory state."""
    since, until = utc(since), utc(until)
    if step.total_seconds() < 60:
        raise BacktestError("--step must be at least 1m")
    if until <= since:
        raise BacktestError("--until must be after --since")
    if (until - since) / step > max_steps:
        raise BacktestError(f"{int((until - since) / step)} steps: more than {max_steps}; use a larger --step")
    report = BacktestReport(since, until, step)
    states: dict[StateKey, AlertState] = {}
    open_: dict[StateKey, Episode] = {}
    now = since
    while now < until:
        evaluation = evaluate_rules(store, rules, now, states, traffic_table)
        report.evaluations += 1
        for err in evaluation.errors:
            report.errors[err.rule.name] += 1
        for res in evaluation.results:
            _track(report, open_, res, now)
            states[res.state.key] = res.state
        now += step
    return report


def _track(report: BacktestReport, open_: dict[StateKey, Episode], res: SegmentResult, now: datetime) -> None:
    """Open, fire, suppress or resolve the episode of one segment after its state moved at `now`."""
    key, new = res.state.key, res.state
    old = res.previous.state if res.previous is not None else "inactive"
    if new.state == "pending" and old != "pending":
        open_[key] = Episode(new.rule, new.segment, new.severity, pending_at=now)
    elif new.state == "firing" and old != "firing":
        ep = open_.get(key) or Episode(new.rule, new.segment, new.severity, pending_at=now)
        ep.fired_at, ep.value_at_fire, ep.baseline_at_fire = now, new.value, new.baseline
        ep.p_value_at_fire, ep.n_at_fire, ep.n_baseline_at_fire, ep.note_at_fire = new.p_value, new.n_current, new.n_baseline, new.note
        open_[key] = ep
        report.episodes.append(ep)
    elif new.state == "inactive" and old == "pending":
        open_.pop(key, None)
        report.suppressed[new.rule] += 1
    elif new.state == "resolved" and old == "firing":
        resolved = open_.pop(key, None)
        if resolved is not None:
            resolved.resolved_at = now
