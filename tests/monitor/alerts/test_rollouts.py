"""Issue 17: regressions that ship with a new prompt version or model fire through the default rules (baselines
that survive a rollout, the rollout comparison rules, a floor that means what it says), while a new version as
good as the old one, and a judge change, fire nothing."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import pytest

from monitor.alerts.backtest import BacktestReport, Episode, run_backtest
from monitor.alerts.engine import AlertRunner, SegmentResult, evaluate_rules
from monitor.alerts.notifiers import AlertmanagerNotifier, WebhookNotifier
from monitor.alerts.rules import RuleSet
from monitor.store.connection import ClickHouseStore
from schemas.scored import ScoredRow
from tests.monitor.alerts.conftest import SCORE_RULES, T0, default_rules, insert, make_row, noisy, rules_from, stream
from tests.monitor.alerts.receiver import Receiver

ROLLOUT = T0 + timedelta(hours=30)
ISSUE_ROLLOUT = T0 + timedelta(hours=20)
WINDOW = timedelta(
    minutes=30
)  # the detection time the old 30-minute windows of relevancy_drop and low_score_share_rise allowed


def _by_rule_and_version(results: list[SegmentResult]) -> dict[tuple[str, str | None], SegmentResult]:
    return {(r.rule.name, dict(r.observation.segment).get("prompt_version")): r for r in results}


def _fired(report: BacktestReport) -> dict[tuple[str, str], Episode]:
    """Fired episodes by (rule, segment values joined with '/')."""
    return {(e.rule, "/".join(v for k, v in e.segment if k != "judge_id")): e for e in report.fired()}


def _issue_17(store: ClickHouseStore) -> None:
    """Issue 17's app: v1 at 1.00 over 400 events in 20 h, then v2 at 0.34 (low-score share 0.81) over 187 in 25 min."""
    rows = [make_row(T0 + timedelta(seconds=180 * i), prompt_version="v1", score=1.0) for i in range(400)]
    v2_scores = [1.0] * 36 + [1 / 3] * 84 + [0.0] * 67  # mean 0.342, low-score share 0.807
    random.Random(17).shuffle(v2_scores)
    rows += [
        make_row(ISSUE_ROLLOUT + timedelta(seconds=8 * i), prompt_version="v2", score=s)
        for i, s in enumerate(v2_scores)
    ]
    insert(store, rows)


def test_the_issue_17_rollout_fires_the_drop_the_low_score_share_the_floor_and_the_rollout_rule(
    store: ClickHouseStore,
) -> None:
    """Issue 17's rollout fires four default rules at once (as `alerts check --ignore-for` would), each note naming its
    baseline; the floor at the level a rules file sets for it (0.05), not the shipped one derived from its share of
    the ticket budget, which holds a mean of 0.34 over 187 events (p = 0.01) back."""
    _issue_17(store)
    shipped = default_rules(*SCORE_RULES, ignore_for=True)
    at = ISSUE_ROLLOUT + timedelta(minutes=27)
    [held] = [r for r in evaluate_rules(store, shipped, at, {}).results if r.rule.name == "relevancy_floor"]
    assert held.state.state == "inactive" and "not significant" in held.state.note
    floor_05 = [r.model_copy(update={"alpha": 0.05}) if r.name == "relevancy_floor" else r for r in shipped.rules]
    ev = evaluate_rules(store, shipped.model_copy(update={"rules": floor_05}), at, {})
    by = _by_rule_and_version(ev.results)
    drop = by[("relevancy_drop", "v2")]
    assert drop.state.state == "firing"
    assert (drop.observation.value, drop.observation.baseline) == (pytest.approx(0.342, abs=1e-3), pytest.approx(1.0))
    assert (drop.observation.n_current, drop.observation.n_baseline) == (187, 389)  # v1 up to an hour ago
    assert (
        "prompt_version v2 against the baseline of app=support model=m1 (v1): 0 < 50 baseline events of its own"
        in drop.state.note
    )
    low = by[("low_score_share_rise", "v2")]
    assert low.state.state == "firing" and low.observation.value == pytest.approx(0.807, abs=1e-3)
    assert "against the baseline of app=support model=m1 (v1)" in low.state.note
    floor = by[("relevancy_floor", None)]
    assert floor.state.state == "firing" and floor.observation.value is not None and floor.observation.value < 0.4
    assert (
        floor.observation.p_value is not None and 0.001 < floor.observation.p_value < 0.05
    )  # held back at the old alpha 0.001
    roll = by[("prompt_rollout_regression", "v2")]
    assert roll.state.state == "firing" and roll.observation.baseline == pytest.approx(1.0)
    assert roll.observation.n_current == 187 and roll.observation.n_baseline == 400  # v1's events in the same 24 hours
    assert "prompt_version v2 against v1, the prompt_version before it" in roll.state.note
    assert by[("relevancy_drop", "v1")].state.state == "inactive"  # the old version: no events now, no decision


def test_the_rollout_notification_names_both_versions_with_means_sizes_and_p_value(store: ClickHouseStore) -> None:
    """Through the runner, webhook and Alertmanager get the rollout alert naming v2 and v1 with means, sizes and p, the
    drop its baseline."""
    _issue_17(store)
    rules = default_rules("relevancy_drop", "prompt_rollout_regression", ignore_for=True)
    with Receiver() as receiver:
        runner = AlertRunner(
            store, rules, [WebhookNotifier(receiver.base + "/hook"), AlertmanagerNotifier(receiver.base + "/am")]
        )
        assert runner.run_once(ISSUE_ROLLOUT + timedelta(minutes=27)).sent == 4
        [hook] = receiver.posts["/hook"]
        [am] = receiver.posts["/am/api/v2/alerts"]
    alerts = {a["rule"]: a for a in hook["alerts"]}
    roll = alerts["prompt_rollout_regression"]
    assert roll["summary"].startswith(
        "[PAGE] prompt_rollout_regression: prompt_version v2 mean 0.3422 (n=187) vs v1 before it mean 1 (n=400), p="
    )
    assert roll["summary"].endswith(", for app=support prompt_version=v2 judge_id=j1")
    assert roll["baseline_source"]["segment_values"] == ["v2"] and roll["baseline_source"]["baseline_values"] == ["v1"]
    assert roll["segment"] == {"app": "support", "prompt_version": "v2", "judge_id": "j1"} and roll["p_value"] < 1e-30
    assert "prompt_version = 'v2'" in roll["examples_sql"]  # the new version's worst answers
    drop = alerts["relevancy_drop"]
    assert drop["summary"].endswith(
        "; prompt_version v2 against the baseline of app=support model=m1 (v1): 0 < 50 baseline events of its own"
    )
    assert {a["annotations"]["summary"] for a in am} == {roll["summary"], drop["summary"]}


def test_a_prompt_version_regression_fires_within_one_window_and_keeps_firing_while_it_lasts(
    store: ClickHouseStore,
) -> None:
    """A worse v2 replacing v1 fires the drop, low-share and rollout rules on v2 within one 30-minute window, still
    firing 3 h on; b stays quiet."""
    a_v1 = stream(T0, ROLLOUT, per_minute=4, segments=[{"app": "a", "prompt_version": "v1"}], score=noisy(0.8))
    a_v2 = stream(
        ROLLOUT,
        ROLLOUT + timedelta(hours=3),
        per_minute=4,
        segments=[{"app": "a", "prompt_version": "v2"}],
        score=noisy(0.55),
        seed=2,
    )
    b = stream(
        T0,
        ROLLOUT + timedelta(hours=3),
        per_minute=2,
        segments=[{"app": "b", "prompt_version": "v1"}],
        score=noisy(0.8),
        seed=3,
    )
    insert(store, a_v1 + a_v2 + b)
    report = run_backtest(
        store,
        default_rules(*SCORE_RULES),
        ROLLOUT - timedelta(hours=1),
        ROLLOUT + timedelta(hours=3),
        timedelta(minutes=5),
    )
    assert not report.errors
    fired = _fired(report)
    assert set(fired) == {
        ("relevancy_drop", "a/m1/v2"),
        ("low_score_share_rise", "a/m1/v2"),
        ("prompt_rollout_regression", "a/v2"),
    }
    for ep in fired.values():
        assert ep.fired_at is not None and ep.fired_at - ROLLOUT <= WINDOW, ep  # detected within one evaluation window
        # The new version never becomes its own baseline while it is new: the alert lasts as long as the regression.
        assert ep.resolved_at is None, ep
    assert "against the baseline of app=a model=m1 (v1)" in fired[("relevancy_drop", "a/m1/v2")].note_at_fire


def test_the_backtest_shows_a_canary_episode_with_its_detection_delay(store: ClickHouseStore) -> None:
    """A worse canary (v2 on a fifth of the traffic) is one backtest episode of the rollout rule, from its first events
    (no count to wait for, no `for`), both versions named, still firing while the canary runs."""
    canary = [{"app": "a", "prompt_version": "v2"}]
    rows = stream(
        T0,
        ROLLOUT + timedelta(hours=2),
        per_minute=4,
        segments=[{"app": "a", "prompt_version": "v1"}],
        score=noisy(0.8),
    )
    rows += stream(ROLLOUT, ROLLOUT + timedelta(hours=2), per_minute=1, segments=canary, score=noisy(0.6), seed=4)
    insert(store, rows)
    # At the level this test was written for: the shipped one, derived from the rule's share, pages sooner.
    [rule] = default_rules("prompt_rollout_regression").rules
    rules = RuleSet(rules=[rule.model_copy(update={"alpha": 0.001})])
    report = run_backtest(
        store, rules, ROLLOUT - timedelta(minutes=30), ROLLOUT + timedelta(hours=2), timedelta(minutes=5)
    )
    [ep] = report.fired()
    assert dict(ep.segment) == {"app": "a", "prompt_version": "v2", "judge_id": "j1"}
    assert ep.fired_at is not None and ep.delay == timedelta(0) and ep.resolved_at is None
    # The always-valid test pages once the evidence is there: at 30 events of 1 a minute, once the new version's own
    # variance counts (until then the largest a score can have, 1/4: the old version's is no bound on it).
    assert ROLLOUT <= ep.fired_at <= ROLLOUT + timedelta(minutes=40), ep
    assert ep.value_at_fire == pytest.approx(0.6, abs=0.05) and ep.baseline_at_fire == pytest.approx(0.8, abs=0.02)
    assert (
        ep.n_at_fire <= 40
        and ep.n_baseline_at_fire >= 1000
        and ep.p_value_at_fire is not None
        and ep.p_value_at_fire < 0.001
    )
    assert "prompt_version v2 against v1, the prompt_version before it, in the same window" in ep.note_at_fire
    summary = report.summary(rules.rules)[0]
    assert (summary.fired, summary.suppressed, summary.mean_delay_s, summary.still_firing) == (1, 0, 0.0, 1)


def _as_good_stream() -> list[ScoredRow]:
    """Two and a half days of apps whose versions and models change often, each as good as the one before, and a long
    A/B split."""
    good = noisy(0.75, 0.2)
    rows: list[ScoredRow] = []
    # app a: full rollouts v1 -> v2 (8 h) and v3 -> v4 (44 h), a v3 canary at 20 h made full at 26 h, a new model at 36
    # h.
    a_plan = [
        (0, 8, [("m1", "v1", 4)]),
        (8, 20, [("m1", "v2", 4)]),
        (20, 26, [("m1", "v2", 3), ("m1", "v3", 1)]),
        (26, 36, [("m1", "v3", 4)]),
        (36, 44, [("m2", "v3", 4)]),
        (44, 60, [("m2", "v4", 4)]),
    ]
    for seed, (start, end, parts) in enumerate(a_plan):
        for model, version, per_minute in parts:
            seg = [{"app": "a", "model": model, "prompt_version": version}]
            rows += stream(
                T0 + timedelta(hours=start),
                T0 + timedelta(hours=end),
                per_minute=per_minute,
                segments=seg,
                score=good,
                seed=10 + seed,
            )
    # app b: a model canary (m2 beside m1) from 30 h on.
    rows += stream(
        T0, T0 + timedelta(hours=60), per_minute=2, segments=[{"app": "b", "model": "m1"}], score=good, seed=30
    )
    rows += stream(
        T0 + timedelta(hours=30),
        T0 + timedelta(hours=60),
        per_minute=1,
        segments=[{"app": "b", "model": "m2"}],
        score=good,
        seed=31,
    )
    # app c: an A/B split running all along, v13 15% worse than v12. Neither is new, so it is no rollout (nor is
    # v13 "newer" for its name) and neither is the other's earlier history.
    for version, mean, seed in (("v12", 0.8, 40), ("v13", 0.68, 41)):
        seg = [{"app": "c", "prompt_version": version}]
        rows += stream(T0, T0 + timedelta(hours=60), per_minute=2, segments=seg, score=noisy(mean, 0.2), seed=seed)
    return rows


@pytest.mark.long(seconds=31)
@pytest.mark.slow
def test_new_versions_and_models_as_good_as_the_old_fire_nothing_over_two_noisy_days(store: ClickHouseStore) -> None:
    """Two days of backtest at a 10-minute step over rollouts, canaries and model changes as good as before, and an A/B
    split: no page fires. (The budget allows 1 false page and 3 false tickets a week for a deployment: in these 54 h
    about 0.3 pages and 1 ticket are expected, and one false ticket is what this stream gives.)"""
    insert(store, _as_good_stream())
    rules = default_rules(*SCORE_RULES)
    report = run_backtest(store, rules, T0 + timedelta(hours=6), T0 + timedelta(hours=60), timedelta(minutes=10))
    assert report.evaluations == 324 and not report.errors
    assert [e for e in report.fired() if e.severity == "page"] == []  # the false-page count
    assert len(report.fired()) <= 1
    # The comparisons did run: the new versions were judged against their predecessors.
    ev = evaluate_rules(store, rules, T0 + timedelta(hours=22), {})
    by = _by_rule_and_version(ev.results)
    assert by[("prompt_rollout_regression", "v3")].observation.sufficient
    assert by[("relevancy_drop", "v3")].observation.baseline_from is not None


def test_a_new_version_as_good_as_the_old_fires_nothing_over_a_day(store: ClickHouseStore) -> None:
    """A day of backtest at a 10-minute step over a full rollout, a canary and a new model as good as before, and an
    A/B split: nothing fires."""
    insert(store, [r for r in _as_good_stream() if r.event_time < T0 + timedelta(hours=40)])
    report = run_backtest(
        store, default_rules(*SCORE_RULES), T0 + timedelta(hours=6), T0 + timedelta(hours=30), timedelta(minutes=10)
    )
    assert report.evaluations == 144 and not report.errors and [e for e in report.fired() if e.severity == "page"] == []


def test_a_regression_that_ships_with_a_new_model_fires(store: ClickHouseStore) -> None:
    """A worse model fires the model rollout rule on it and the drop rule on the version; keyed by model, the drop is
    against the earlier model."""
    rows = stream(T0, ROLLOUT, per_minute=4, segments=[{"app": "a", "model": "m1"}], score=noisy(0.8))
    rows += stream(
        ROLLOUT,
        ROLLOUT + timedelta(hours=1),
        per_minute=4,
        segments=[{"app": "a", "model": "m2"}],
        score=noisy(0.6),
        seed=5,
    )
    insert(store, rows)
    report = run_backtest(
        store,
        default_rules(*SCORE_RULES),
        ROLLOUT - timedelta(minutes=30),
        ROLLOUT + timedelta(hours=1),
        timedelta(minutes=5),
    )
    fired = _fired(report)
    # relevancy_drop is keyed by model too: m2 is a new segment, judged against the app's earlier model.
    assert set(fired) == {
        ("model_rollout_regression", "a/m2"),
        ("relevancy_drop", "a/m2/v1"),
        ("low_score_share_rise", "a/m2/v1"),
    }
    assert all(e.fired_at is not None and e.fired_at - ROLLOUT <= WINDOW for e in fired.values())
    assert "model m2 against m1, the model before it" in fired[("model_rollout_regression", "a/m2")].note_at_fire

    by_model = RuleSet(rules=rules_from(DROP_BY_MODEL))
    [m2] = [
        r
        for r in evaluate_rules(store, by_model, ROLLOUT + timedelta(minutes=40), {}).results
        if dict(r.observation.segment)["model"] == "m2"
    ]
    assert m2.state.state == "firing" and "model m2 against the app's baseline (m1)" in m2.state.note


DROP_BY_MODEL = """
- name: drop_by_model
  metric: mean_score
  segment_by: [app, model]
  window: 30m
  offset: 2m
  baseline: {trailing: 24h}
  condition: {relative_change: {fire: 0.10, clear: 0.05}}
  min_events: 50
  min_baseline_events: 200
"""


def test_a_judge_change_fires_nothing(store: ClickHouseStore) -> None:
    """A stricter new judge (beside an A/B split) fires nothing: nothing borrowed across judges, and versions starting
    together are no rollout."""
    change = T0 + timedelta(hours=30)
    for judge, start, end, mean, seed in (
        ("j-old", T0, change, 0.8, 1),
        ("j-new", change, change + timedelta(hours=6), 0.6, 2),
    ):
        ab = [{"app": "a", "prompt_version": "v1"}]
        rows = stream(start, end, per_minute=4, segments=ab, score=noisy(mean), seed=seed, judge_id=judge)
        # v2 runs beside v1 all along, 10% worse and on a quarter of the traffic (an A/B split, not a rollout).
        rows += stream(
            start,
            end,
            per_minute=1,
            segments=[{"app": "a", "prompt_version": "v2"}],
            score=noisy(mean * 0.9),
            seed=seed + 10,
            judge_id=judge,
        )
        insert(store, rows)
    rules = default_rules(*SCORE_RULES)
    report = run_backtest(store, rules, change - timedelta(hours=1), change + timedelta(hours=6), timedelta(minutes=10))
    assert report.fired() == [] and not report.errors
    ev = evaluate_rules(store, rules, change + timedelta(hours=2), {})
    new_judge = [
        r
        for r in ev.results
        if dict(r.observation.segment).get("judge_id") == "j-new" and r.rule.name == "relevancy_drop"
    ]
    assert {dict(r.observation.segment)["prompt_version"] for r in new_judge} == {"v1", "v2"}
    assert all(r.observation.baseline_from is None for r in new_judge)  # nothing borrowed, from either judge
    v2 = next(r for r in new_judge if dict(r.observation.segment)["prompt_version"] == "v2")
    # Its own hour of history under the new judge (60 events, above the detector's 50), never v1's or the old judge's.
    assert v2.observation.baseline_from is None and v2.observation.n_baseline == 60 and v2.state.state == "inactive"


def _demo_rows(start: datetime, end: datetime, *, per_minute: int, keep: set[str], seed: int) -> list[ScoredRow]:
    """What the demo would store: generated records decoded and scored by the lexical judge, `per_minute` a minute."""
    from consumers.decode import decode_event
    from consumers.sampling import DecisionKind, SampleDecision
    from monitor.devtools.traffic import generate_events
    from monitor.judges.lexical import LexicalJudge, score_lexical
    from monitor.privacy.events import JudgedEvent
    from monitor.runtime.rows import build_row
    from schemas.errors import DecodeError
    from schemas.events import KafkaPosition

    info = LexicalJudge().info
    decision = SampleDecision(True, 1.0, DecisionKind.BASE)
    rows = []
    t, offset = start, 0
    while t < end:
        for value in generate_events(per_minute, seed=seed + offset, now=t):
            offset += 1
            try:
                event = decode_event(
                    value,
                    position=KafkaPosition(topic="conversations", partition=0, offset=offset),
                    record_timestamp_ms=None,
                    now=t,
                )
            except DecodeError:
                continue  # the demo dead-letters these
            if event.prompt_version in keep:
                judgement = score_lexical(event.question, event.response)
                rows.append(
                    build_row(
                        JudgedEvent.unredacted(event),
                        info,
                        decision,
                        judgement,
                        latency_ms=5,
                        scored_at=t + timedelta(seconds=5),
                        text_policy="full",
                    )
                )
        t += timedelta(minutes=1)
    return rows


def test_the_demo_regression_fires_through_the_default_rules_on_v13_and_never_on_v12(store: ClickHouseStore) -> None:
    """The demo's traffic scored by the lexical judge: v13 (padding half its answers) going live beside v12 fires the
    default rules on v13 only."""
    live = T0 + timedelta(hours=6)
    rows = _demo_rows(T0, live, per_minute=12, keep={"v12"}, seed=1)  # before v13 went live
    rows += _demo_rows(live, live + timedelta(hours=1), per_minute=24, keep={"v12", "v13"}, seed=1_000_000)
    insert(store, rows)
    report = run_backtest(
        store,
        default_rules(*SCORE_RULES),
        live - timedelta(minutes=30),
        live + timedelta(hours=1),
        timedelta(minutes=5),
    )
    fired = report.fired()
    versions = {dict(e.segment).get("prompt_version") for e in fired}
    assert versions == {"v13"}, fired  # never v12, never a whole app
    apps = {dict(e.segment)["app"] for e in fired}
    assert apps == {"support-bot", "coding-assistant", "travel-agent"}
    for app in apps:
        rules = {e.rule for e in fired if dict(e.segment)["app"] == app}
        assert {"relevancy_drop", "prompt_rollout_regression"} <= rules, (app, rules)
