"""One evaluation round: query every rule's windows, observe, decide, step the states; then (in `AlertRunner`)
notify and save. `evaluate_rules` writes nothing, so `check` and `backtest` reuse it.

A round's store work is synchronous, on the caller's thread; its deliveries are awaited in an event loop of the
round's own, so a notifier's retry waits with `asyncio.sleep` and nothing in a round sleeps blocking."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

import structlog

from monitor.alerts.baselines import with_parent_baselines
from monitor.alerts.budget import Significance, significance
from monitor.alerts.detection import Budget, Detection, detect, neighbours, rollout_recovered, rollout_stopped
from monitor.alerts.evaluator import AlertState, NoticeKind, Verdict, decide, notification_due, step
from monitor.alerts.inhibition import hold
from monitor.alerts.judge_drift import SUSPECT, JudgeSuspect, attribute
from monitor.alerts.notifiers import AlertMessage, Notifier
from monitor.alerts.observations import Observation, observe
from monitor.alerts.outcomes import EmptyFacts, EmptyRule, LateVersion, Newest, why_empty
from monitor.alerts.prometheus import AlertMetrics
from monitor.alerts.queries import DEFAULT_TRAFFIC_TABLE, examples_sql
from monitor.alerts.rollouts import pair_newest, without_rollout
from monitor.alerts.rules import Rule, RuleSet
from monitor.alerts.sources import RuleData, StoreData
from monitor.alerts.state import Lease, StateStore
from monitor.alerts.windows import (
    SegmentData,
    SegmentKey,
    TrafficCounts,
    VersionStats,
    Windows,
    WindowStats,
    utc,
    windows_for,
)
from monitor.alerts.worst_answers import WorstAnswer, fetch_worst_answers
from monitor.canary.model import CanaryTick
from monitor.runtime.health import Health, HealthServer
from monitor.store.connection import ClickHouseStore
from schemas.errors import NotifyError, QueryError, RuleError, StoreError

log = structlog.get_logger("monitor.alerts")
StateKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class SegmentResult:
    """One rule and segment after an evaluation."""

    rule: Rule
    observation: Observation
    verdict: Verdict
    previous: AlertState | None
    state: AlertState
    windows: Windows
    detection: Detection | None = None  # detector rules: the reference and rate behind the verdict
    level: Significance | None = None  # rules with a test: the level it decided at this round
    suspect: JudgeSuspect | None = None  # a live score alert whose judge's canaries are firing (`judge_drift`)

    @property
    def newly_suspect(self) -> bool:
        """A firing alert whose judge became suspect this round: those already told of it are told again."""
        was = self.previous is not None and self.previous.note.startswith(SUSPECT)
        return self.suspect is not None and self.state.state == "firing" and not was


@dataclass(frozen=True, slots=True)
class RoundCounts:
    """What one evaluation found, in numbers (for the `run --once` summary and the per-round log line)."""

    rules: int
    segments: int
    firing: int
    pending: int
    resolved: int  # segments that resolved in this evaluation
    newly_firing: int  # segments that started firing in this evaluation
    no_decision: int  # segments with too little data to decide on
    empty_rules: int  # rules without any segment
    rule_errors: int


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The outcome of evaluating every rule once."""

    now: datetime
    results: list[SegmentResult]
    errors: list[RuleError[Rule]]
    empty: list[EmptyRule] = field(default_factory=list)  # rules without segments, and why

    def states(self) -> dict[StateKey, AlertState]:
        """The new states by key."""
        return {r.state.key: r.state for r in self.results}

    def counts(self) -> RoundCounts:
        """How many rules, segments, and segments in each state."""
        res = self.results
        return RoundCounts(
            rules=len(
                {r.rule.name for r in res} | {e.rule.name for e in self.empty} | {e.rule.name for e in self.errors}
            ),
            segments=len(res),
            firing=sum(1 for r in res if r.state.state == "firing"),
            pending=sum(1 for r in res if r.state.state == "pending"),
            resolved=sum(
                1
                for r in res
                if r.state.state == "resolved" and r.previous is not None and r.previous.state == "firing"
            ),
            newly_firing=sum(
                1 for r in res if r.state.state == "firing" and (r.previous is None or r.previous.state != "firing")
            ),
            no_decision=sum(1 for r in res if not r.verdict.sufficient),
            empty_rules=len(self.empty),
            rule_errors=len(self.errors),
        )


def collect(data: RuleData, rule: Rule, windows: Windows) -> dict[SegmentKey, SegmentData]:
    """Per-segment data of `rule` for `windows` (scores, traffic, or both; for rollout rules the newest version
    against the one before it), with parent baselines for segments without enough history of their own."""
    if rule.spec.compares_versions:
        return pair_newest(rule, data.versions(rule, windows))
    if rule.source == "traffic":
        return {k: _traffic_only(t, windows) for k, t in data.traffic(rule, windows).items()}
    scores = data.scores(rule, windows)
    if not rule.spec.needs_traffic:
        return with_parent_baselines(rule, scores)
    traffic = data.traffic(rule, windows)
    empty = SegmentData(WindowStats(windows.current_seconds), WindowStats(windows.baseline_seconds))
    # Feedback per answer is watched where feedback came: a segment that never had any (no feedback widget, or
    # unresolved traffic) has no rate to collapse.
    keys = set(scores) if rule.spec.table == "feedback" else set(scores) | set(traffic)
    return {key: _with_traffic(scores.get(key) or empty, traffic.get(key)) for key in keys}


def _traffic_only(t: TrafficCounts, windows: Windows) -> SegmentData:
    return SegmentData(
        WindowStats(windows.current_seconds, consumed=t.consumed, sampled=t.sampled),
        WindowStats(t.baseline_seconds, consumed=t.baseline_consumed, sampled=t.baseline_sampled),
    )


def _with_traffic(d: SegmentData, t: TrafficCounts | None) -> SegmentData:
    # A segment missing from the traffic table had nothing sampled: 0, not unknown.
    return dataclasses.replace(
        d,
        current=dataclasses.replace(d.current, sampled=t.sampled if t else 0, consumed=t.consumed if t else 0),
        baseline=dataclasses.replace(
            d.baseline, sampled=t.baseline_sampled if t else 0, consumed=t.baseline_consumed if t else 0
        ),
    )


@dataclass(frozen=True, slots=True)
class RuleOutcome:
    """One rule after an evaluation: its segments, or why it had none."""

    results: list[SegmentResult]
    empty: EmptyRule | None = None


def assess_rule(
    data: RuleData, rule: Rule, now: datetime, previous: Mapping[StateKey, AlertState], budget: float = 1.0
) -> RuleOutcome:
    """Evaluate one rule at `now`: its segments' results, or, when it has none, why; `budget` is the rule's false
    alarms a week over all its segments (`RuleSet.budget`): a detector's threshold, or its test's level, spends it.
    Raises `QueryError`."""
    windows = windows_for(rule, now)
    if rule.detector is not None:
        return _assess_detector(data, rule, now, previous, windows, budget)
    versions = data.versions(rule, windows) if rule.spec.compares_versions else {}
    segments = pair_newest(rule, versions) if rule.spec.compares_versions else collect(data, rule, windows)
    mine = {s.segment: s for s in previous.values() if s.rule == rule.name}
    # Segments that vanished while active stay in play: they are held, never silently dropped.
    keys = set(segments) | {seg for seg, s in mine.items() if s.active}
    level = significance(rule, budget, len(segments), versions)
    alpha = level.alpha if level is not None else None
    results = []
    for segment in sorted(keys):
        obs = observe(rule, segment, segments.get(segment))
        verdict = decide(rule, obs, alpha)
        if segment not in segments and not rule.spec.silence:
            # Gone from the window and the baseline (a replaced judge or retired prompt version): its alert
            # resolves here, while silence of real traffic is what the no_data rules page on.
            verdict = Verdict(False, False, True, rule.spec.retired_note)
        elif rule.spec.compares_versions and (verdict.fire or verdict.bad) and mine.get(segment) is not None:
            # A rollback moves the traffic back to the old version; a fix shows in the scores since the page long
            # before the window's mean recovers. Both read the versions' buckets, only where a page was or would be,
            # and both hold after the page resolved: a rolled-back or fixed version does not page again.
            buckets = data.buckets(rule, windows)
            prev_state = mine[segment]
            verdict = (
                rollout_stopped(rule, segment, buckets, windows.current[0])
                or rollout_recovered(rule, segments[segment], buckets.get(segment), prev_state)
                or verdict
            )
        if (
            rule.spec.tail_counts
            and obs.test
            and obs.sufficient
            and _tail_candidate(rule, obs, mine.get(segment), alpha)
        ):
            thr = rule.condition.threshold.fire if rule.condition.threshold is not None else 0.0
            cutoff = obs.baseline if obs.baseline is not None else thr
            tail = data.tail_counts(rule, windows, segment, cutoff, thr)
            obs = observe(rule, segment, segments.get(segment), tail)
            verdict = decide(rule, obs, alpha)
        prev = mine.get(segment)
        state = step(rule, prev, obs, verdict, now)
        results.append(SegmentResult(rule, obs, verdict, prev, state, windows, level=level))
    return RuleOutcome(results, None if results else _why_empty(data, rule, windows, now, versions))


def _assess_detector(
    data: RuleData, rule: Rule, now: datetime, previous: Mapping[StateKey, AlertState], windows: Windows, budget: float
) -> RuleOutcome:
    segments = collect(data, rule, windows)
    buckets = data.buckets(rule, windows)
    mine = {s.segment: s for s in previous.values() if s.rule == rule.name}
    keys = set(buckets) | {seg for seg, s in mine.items() if s.active}
    # Segments with a baseline but nothing in the window are quiet, not watched: they share no budget.
    share = Budget(budget, len(keys))
    results = []
    near = neighbours(buckets)
    for segment in sorted(keys):
        prev = mine.get(segment)
        around = near.of(segment)
        d = detect(rule, segment, segments.get(segment), buckets.get(segment), prev, windows.current, share, around)
        state = dataclasses.replace(step(rule, prev, d.observation, d.verdict, now), frozen=d.frozen)
        results.append(SegmentResult(rule, d.observation, d.verdict, prev, state, windows, d))
    return RuleOutcome(results, None if results else _why_empty(data, rule, windows, now, {}))


def _why_empty(
    data: RuleData, rule: Rule, windows: Windows, now: datetime, versions: Mapping[SegmentKey, Sequence[VersionStats]]
) -> EmptyRule:
    """Why `rule` found no segment (`why_empty`), from a few cheap look-ups: the newest rows (the rule's and its
    table's) up to now and, when they are past the window's end, up to it; a rollout rule's versions after the end."""
    single, together = without_rollout(rule, versions) if versions else (0, 0)
    newest = _newest(data, rule, now)
    end = windows.current[1]
    late: tuple[LateVersion, ...] = ()
    by_end = None
    if versions:
        if newest is not None and newest.at is not None and newest.at >= end:
            late = _late_versions(data, rule, windows, now)
    elif newest is not None and any(t is not None and t >= end for t in (newest.at, newest.table_at)):
        by_end = _newest(data, rule, end - _TICK)
    return why_empty(rule, windows, EmptyFacts(single, together, late, newest, by_end))


_TICK = timedelta(milliseconds=1)  # the store's time resolution: "at or before end - 1 ms" is "before end"


def _newest(data: RuleData, rule: Rule, before: datetime) -> Newest | None:
    try:
        return data.newest(rule, before)
    except (QueryError, StoreError):
        return None  # the explanation is worth less than the round: say less rather than fail the rule


def _late_versions(data: RuleData, rule: Rule, windows: Windows, now: datetime) -> tuple[LateVersion, ...]:
    """A rollout rule's versions first seen after the window's end, up to now (the rows `offset` leaves out)."""
    end = windows.current[1]
    try:
        after = data.versions(rule, Windows((end, utc(now))))
    except (QueryError, StoreError):
        return ()
    return tuple(
        LateVersion(scope, v.name, v.first_seen)
        for scope, found in sorted(after.items())
        for v in sorted(found, key=lambda v: (v.first_seen, v.name))
        if v.first_seen >= end
    )


def _tail_candidate(rule: Rule, obs: Observation, prev: AlertState | None, alpha: float | None) -> bool:
    # The tail counts need the baseline p10 first, so they are read only where the test can matter.
    return decide(rule, dataclasses.replace(obs, test=""), alpha).fire and (prev is None or prev.state != "firing")


def evaluate_rules(
    store: ClickHouseStore | None,
    rules: RuleSet | Sequence[Rule],
    now: datetime,
    previous: Mapping[StateKey, AlertState],
    traffic_table: str = DEFAULT_TRAFFIC_TABLE,
    *,
    data: RuleData | None = None,
) -> Evaluation:
    """Evaluate every rule (data from `data`, else one query per rule against the store); a rule that fails is
    reported in `errors` and its states are kept as they were, a rule without segments in `empty` with the reason."""
    if data is not None:
        source: RuleData = data
    elif store is not None:
        source = StoreData(store, traffic_table)
    else:
        raise ValueError("evaluate_rules needs a store or data")
    rule_list = rules.rules if isinstance(rules, RuleSet) else list(rules)
    budgets = rules if isinstance(rules, RuleSet) else (RuleSet(rules=rule_list) if rule_list else None)
    results: list[SegmentResult] = []
    errors: list[RuleError[Rule]] = []
    empty: list[EmptyRule] = []
    for rule in rule_list:
        try:
            outcome = assess_rule(source, rule, now, previous, budgets.budget(rule) if budgets is not None else 1.0)
        except (QueryError, StoreError) as e:
            log.warning("alert rule failed", rule=rule.name, error=str(e))
            failed = RuleError(rule, rule.name, str(e))
            failed.__cause__ = e
            errors.append(failed)
            continue
        results.extend(outcome.results)
        if outcome.empty is not None:
            empty.append(outcome.empty)
    # Last, over every rule's new states: a live score alert of a judge whose canaries fire is the judge's doing, and
    # a rule that watches a part of another's traffic does not page beside it (one page for one incident).
    return Evaluation(now, hold(attribute(results)), errors, empty)


@dataclass(frozen=True, slots=True)
class Delivery:
    """What one notifier was given in a round: alerts delivered, alerts whose delivery failed, and the error."""

    notifier: str
    sent: int = 0
    failed: int = 0
    error: str = ""


@dataclass(frozen=True, slots=True)
class RoundReport:
    """What one round of `AlertRunner` did."""

    leader: bool
    evaluation: Evaluation | None = None
    sent: int = 0
    failed: int = 0
    saved: int = 0
    deliveries: tuple[Delivery, ...] = ()  # one per configured notifier, in their order
    canary: CanaryTick | None = None  # None: no canary configured (or not the leader)

    def log_fields(self) -> dict[str, object]:
        """The round in numbers, for one structured log line (counts and notifier names only, no text)."""
        if self.evaluation is None:
            return {"leader": self.leader}
        out: dict[str, object] = {
            "leader": self.leader,
            **dataclasses.asdict(self.evaluation.counts()),
            "sent": self.sent,
            "failed": self.failed,
            "saved": self.saved,
            "notifications": {d.notifier: {"sent": d.sent, "failed": d.failed} for d in self.deliveries},
        }
        if self.canary is not None:
            out["canary"] = self.canary.log_fields()
        return out


class Canaries(Protocol):
    """What the leader does at the start of each round before evaluating: write a finished canary run and start
    the next when due (`monitor.canary.service.Canary`). Its own failures are in the tick, never raised."""

    def tick(self, now: datetime) -> CanaryTick:
        """One round's canary work at `now`."""
        ...

    def close(self) -> None:
        """Stop a run in progress."""
        ...


class AlertRunner:
    """Rounds of evaluate -> notify -> save against ClickHouse, holding the lease when several replicas run."""

    def __init__(
        self,
        store: ClickHouseStore,
        rules: RuleSet,
        notifiers: Sequence[Notifier],
        *,
        traffic_table: str = DEFAULT_TRAFFIC_TABLE,
        replica: str = "",
        lease_ttl: timedelta | None = None,
        metrics: AlertMetrics | None = None,
        canary: Canaries | None = None,
        ui_url: str = "",
    ) -> None:
        self.store = store
        self.ui_url = ui_url  # ALERTS_UI_URL: notifications link to the alert's page under it
        self.canary = canary
        self.rules = rules
        self.notifiers = list(notifiers)
        self.traffic_table = traffic_table
        self.state_store = StateStore(store, replica)
        self.lease = Lease(store, self.state_store.writer, lease_ttl) if lease_ttl is not None else None
        self.metrics = metrics or AlertMetrics()
        self._rules_by_name = {r.name: r for r in rules.rules}

    def run_once(self, now: datetime | None = None) -> RoundReport:
        """One round at `now` (default: the current time); not from a running event loop (it runs one to deliver)."""
        now = now or datetime.now(UTC)
        if self.lease is not None and not self.lease.acquire(now):
            self.metrics.leader.set(0)
            return RoundReport(leader=False)
        self.metrics.leader.set(1)
        # Before the evaluation, so that a run finished since the last round is in the canary rules' windows.
        canary = self.canary.tick(now) if self.canary is not None else None
        if canary is not None:
            self._count_canary(canary)
        previous = self.state_store.load()
        evaluation = evaluate_rules(self.store, self.rules, now, previous, self.traffic_table)
        for err in evaluation.errors:
            self.metrics.rule_errors.labels(err.rule.name).inc()
        states = {**previous, **evaluation.states()}
        by_key = {r.state.key: r for r in evaluation.results}
        states, deliveries = asyncio.run(self._notify(states, by_key, now))
        changed = [s for k, s in states.items() if s.rule in self._rules_by_name and _worth_saving(s, previous.get(k))]
        saved = self.state_store.save(changed, now)
        self._export(states)
        self.metrics.rounds.inc()
        self.metrics.last_round.set(now.timestamp())
        sent, failed = sum(d.sent for d in deliveries), sum(d.failed for d in deliveries)
        return RoundReport(True, evaluation, sent, failed, saved, tuple(deliveries), canary)

    def _count_canary(self, tick: CanaryTick) -> None:
        if tick.written is not None:
            self.metrics.canary_runs.labels("written").inc()
            self.metrics.canary_cost.inc(tick.written.cost_usd or 0.0)
            self.metrics.canary_last_run.set(tick.written.run_at.timestamp())
        if tick.failed:
            self.metrics.canary_runs.labels("failed").inc()

    async def _notify(
        self, states: dict[StateKey, AlertState], results: Mapping[StateKey, SegmentResult], now: datetime
    ) -> tuple[dict[StateKey, AlertState], list[Delivery]]:
        deliveries: list[Delivery] = []
        states = dict(states)
        worst: dict[StateKey, tuple[WorstAnswer, ...]] = {}  # read once a round per alert, for those that show them
        for notifier in self.notifiers:
            batch: list[tuple[StateKey, AlertMessage]] = []
            for key, s in states.items():
                rule = self._rules_by_name.get(s.rule)
                if rule is None:
                    continue
                kind = notification_due(s, notifier.name, rule, now, notifier.resend_while_firing)
                result = results.get(key)
                if kind is None and result is not None and result.newly_suspect:
                    kind = "repeat"  # paged before the canaries ran: told again, now as the judge's ticket
                if kind is not None:
                    message = self._message(kind, rule, s, result, now)
                    # With the UI's address only: the answers' text (redacted) goes to Slack where people can open
                    # their pages, and an evaluator set up before the UI keeps sending exactly what it sent.
                    if notifier.shows_answers and self.ui_url and kind != "resolved":
                        if key not in worst:
                            # A few rows of the rule's own examples query, on this thread while no delivery is in
                            # flight (notifiers send one after the other); a failure leaves them out, logged.
                            start, end = message.window_start, message.window_end
                            worst[key] = fetch_worst_answers(self.store, rule, s.segment, Windows((start, end)))
                        message = dataclasses.replace(message, worst=worst[key])
                    batch.append((key, message))
            if not batch:
                deliveries.append(Delivery(notifier.name))
                continue
            try:
                # One notifier at a time, in their order: each is given the states as the ones before it left them.
                await notifier.send([m for _, m in batch])
            except NotifyError as e:
                deliveries.append(Delivery(notifier.name, failed=len(batch), error=str(e)))
                self.metrics.notifications.labels(notifier.name, "failed").inc(len(batch))
                log.error("alert notification failed", notifier=notifier.name, alerts=len(batch), error=str(e))
                continue
            deliveries.append(Delivery(notifier.name, sent=len(batch)))
            self.metrics.notifications.labels(notifier.name, "sent").inc(len(batch))
            for key, m in batch:
                s = states[key]
                delivered = {**s.notified, notifier.name: s.state}
                told = m.kind != "repeat" or not notifier.resend_while_firing
                states[key] = dataclasses.replace(
                    s, notified=delivered, last_notified_at=now if told else s.last_notified_at
                )
                log.info("alert notified", notifier=notifier.name, kind=m.kind, rule=s.rule, segment=dict(s.segment))
        return states, deliveries

    def _message(
        self, kind: NoticeKind, rule: Rule, s: AlertState, result: SegmentResult | None, now: datetime
    ) -> AlertMessage:
        windows = result.windows if result is not None else windows_for(rule, now)
        return AlertMessage(
            kind=kind,
            rule=rule,
            state=s,
            now=now,
            window_start=windows.current[0],
            window_end=windows.current[1],
            examples_sql=examples_sql(rule, s.segment, windows, self.store.database, self.store.table),
            test=result.observation.test if result is not None else "",
            judge=result.observation.judge if result is not None else "",
            baseline_from=result.observation.baseline_from if result is not None else None,
            suspect=result.suspect if result is not None else None,
            ui_base=self.ui_url,
        )

    def _export(self, states: Mapping[StateKey, AlertState]) -> None:
        counts: dict[tuple[str, str], int] = {(r.name, r.severity): 0 for r in self.rules.rules}
        for s in states.values():
            if s.state == "firing" and (s.rule, s.severity) in counts:
                counts[(s.rule, s.severity)] += 1
        for (rule, severity), n in counts.items():
            self.metrics.firing.labels(rule, severity).set(n)

    def run_forever(self, interval: timedelta, stop: threading.Event, metrics_port: int = 0) -> None:
        """Rounds every `interval` until `stop` is set; a failing round is logged and the next one runs. The metrics
        port also answers /healthz (rounds keep beating) and /readyz (the store answered the last round)."""
        health = Health(joined=True)  # the evaluator is in no consumer group
        if metrics_port:
            HealthServer(
                self.metrics.registry,
                health,
                metrics_port,
                max_silence_s=3 * interval.total_seconds() + 60,
                setting="ALERTS_METRICS_PORT",
            ).start()
        log.info(
            "alert evaluator started",
            rules=len(self.rules.rules),
            interval_s=interval.total_seconds(),
            notifiers=[n.name for n in self.notifiers],
            replica=self.state_store.writer,
        )
        try:
            while not stop.is_set():
                started = datetime.now(UTC)
                health.beat = time.monotonic()
                try:
                    report = self.run_once(started)
                    health.store_answered = True
                    health.mark("store", True)
                    log.info(
                        "alert round" if report.leader else "alert round skipped: another replica leads",
                        **report.log_fields(),
                    )
                except (StoreError, QueryError) as e:
                    health.mark("store", False, str(e)[:200])
                    log.error("alert round failed", error=str(e))
                wait_until = time.monotonic() + max(
                    0.0, interval.total_seconds() - (datetime.now(UTC) - started).total_seconds()
                )
                while not stop.is_set() and (left := wait_until - time.monotonic()) > 0:
                    stop.wait(min(left, 5.0))
                    health.beat = time.monotonic()  # waiting between rounds is not a hang
        finally:
            if self.canary is not None:
                self.canary.close()
            if self.lease is not None:
                try:
                    self.lease.release(datetime.now(UTC))
                except StoreError:
                    pass


def _worth_saving(s: AlertState, prev: AlertState | None) -> bool:
    # Active states are refreshed every round (values, last_eval_at); quiet ones only when something changed.
    if s.active:
        return True
    if prev is None:
        return s.state != "inactive"
    return (s.state, s.notified, s.last_notified_at) != (prev.state, prev.notified, prev.last_notified_at)
