"""Pure decisions: fire and clear levels, significance, the `for` duration, hysteresis, holding on missing data,
and when each notifier is due."""

from __future__ import annotations

from datetime import timedelta

from monitor.alerts.evaluator import AlertState, decide, notification_due, step
from monitor.alerts.observations import Observation
from monitor.alerts.rules import Rule
from tests.monitor.alerts.conftest import T0, rules_from

SEG = (("app", "a"), ("judge_id", "j1"))


def drop_rule(**extra: str) -> Rule:
    """The mean-score drop rule (fire at 10% down, clear at 5%, for 10m), with `extra` fields added."""
    lines = "".join(f"    {k}: {v}\n" for k, v in extra.items())
    return rules_from(
        """
- name: drop
  metric: mean_score
  segment_by: [app]
  baseline: {trailing: 24h}
  condition: {relative_change: {fire: 0.10, clear: 0.05}}
  alpha: 0.01
  for: 10m
"""
        + lines.replace("    ", "  ")
    )[0]


def obs(
    value: float | None, baseline: float | None = 0.8, p: float | None = 1e-6, sufficient: bool = True
) -> Observation:
    """An observation of the drop rule: `value` against `baseline`, with change p-value `p`."""
    return Observation(
        "drop",
        SEG,
        value,
        baseline,
        100,
        1000,
        sufficient,
        p_change=p,
        test="welch_t / one_sample_t",
        note="" if sufficient else "5 < min_events 30 in the window",
    )


def test_fire_needs_the_change_and_significance() -> None:
    """A drop fires only when big enough and significant; between the clear and fire levels it stays bad without
    firing."""
    r = drop_rule()
    assert decide(r, obs(0.70)).fire  # 12.5% down, significant
    assert not decide(r, obs(0.70, p=0.2)).fire  # not significant: no fire ...
    assert decide(r, obs(0.70, p=0.2)).bad  # ... but bad enough to keep an active alert
    assert not decide(r, obs(0.73)).fire and decide(r, obs(0.73)).bad  # 8.75%: between clear (5%) and fire (10%)
    assert not decide(r, obs(0.77)).bad  # 3.75%: clears
    assert not decide(r, obs(0.95)).bad  # better is never bad
    v = decide(r, obs(None, sufficient=False))
    assert not v.sufficient and "min_events" in v.reason


def test_absolute_threshold_and_combine() -> None:
    """A threshold fires beyond its fire level and stays bad until past its clear level; `combine: all` needs every
    criterion."""
    r = rules_from("""
- name: floor
  metric: error_rate
  condition: {threshold: {fire: 0.05, clear: 0.02}}
  test: none
""")[0]

    def o(v: float) -> Observation:
        return Observation("floor", (), v, None, 100, 0, True)

    assert (
        decide(r, o(0.06)).fire
        and not decide(r, o(0.04)).fire
        and decide(r, o(0.04)).bad
        and not decide(r, o(0.01)).bad
    )
    both = rules_from("""
- name: both
  metric: mean_score
  baseline: {trailing: 1h}
  condition: {threshold: 0.6, relative_change: 0.1, combine: all}
  test: none
""")[0]

    def b(v: float, base: float) -> Observation:
        return Observation("both", (), v, base, 100, 100, True)

    assert decide(both, b(0.5, 0.8)).fire
    assert not decide(both, b(0.5, 0.52)).fire  # below the floor but not a 10% drop
    assert not decide(both, b(0.65, 0.8)).fire  # a drop but above the floor


def test_for_duration_then_firing_then_hysteresis_then_resolved() -> None:
    """A bad segment is pending for `for`, then fires, stays firing inside the hysteresis band, and resolves past the
    clear level."""
    r = drop_rule()
    s = step(r, None, obs(0.70), decide(r, obs(0.70)), T0)
    assert s.state == "pending" and s.since == T0
    s = step(r, s, obs(0.70), decide(r, obs(0.70)), T0 + timedelta(minutes=5))
    assert s.state == "pending"
    s = step(r, s, obs(0.70), decide(r, obs(0.70)), T0 + timedelta(minutes=10))
    assert s.state == "firing" and s.fired_at == T0 + timedelta(minutes=10) and s.since == T0
    s = step(r, s, obs(0.74), decide(r, obs(0.74)), T0 + timedelta(minutes=15))
    assert s.state == "firing"  # 7.5% down: inside the hysteresis band
    s = step(r, s, obs(0.78), decide(r, obs(0.78)), T0 + timedelta(minutes=20))
    assert s.state == "resolved" and s.resolved_at == T0 + timedelta(minutes=20)
    s = step(r, s, obs(0.70), decide(r, obs(0.70)), T0 + timedelta(minutes=25))
    assert s.state == "pending" and s.since == T0 + timedelta(minutes=25) and s.fired_at is None


def test_pending_that_recovers_never_fires() -> None:
    """A pending segment that recovers before `for` passes goes back to inactive without firing."""
    r = drop_rule()
    s = step(r, None, obs(0.70), decide(r, obs(0.70)), T0)
    s = step(r, s, obs(0.79), decide(r, obs(0.79)), T0 + timedelta(minutes=5))
    assert s.state == "inactive" and s.since is None


def test_for_zero_fires_at_once_and_missing_data_holds_the_state() -> None:
    """With `for: 0s` a bad segment fires at once; missing data keeps the state and its last values, and never starts
    an alert."""
    r = drop_rule(**{"for": "0s"})
    s = step(r, None, obs(0.70), decide(r, obs(0.70)), T0)
    assert s.state == "firing" and s.value == 0.70
    missing = obs(None, sufficient=False)
    s2 = step(r, s, missing, decide(r, missing), T0 + timedelta(minutes=5))
    assert s2.state == "firing" and s2.value == 0.70  # silence is not recovery; last values kept
    assert s2.note.startswith("no decision:") and s2.last_eval_at == T0 + timedelta(minutes=5)
    quiet = step(r, None, missing, decide(r, missing), T0)
    assert quiet.state == "inactive"  # and it is not a page either


def test_notifications_due() -> None:
    """Webhooks are told of a firing once and again after repeat_interval, Alertmanager every round, and of a resolve
    only after a firing."""
    r = drop_rule(repeat_interval="1h")
    firing = AlertState("drop", SEG, "firing", since=T0, fired_at=T0)
    assert notification_due(firing, "slack", r, T0, False) == "firing"
    told = AlertState("drop", SEG, "firing", since=T0, fired_at=T0, notified={"slack": "firing"}, last_notified_at=T0)
    assert notification_due(told, "slack", r, T0 + timedelta(minutes=59), False) is None
    assert notification_due(told, "slack", r, T0 + timedelta(hours=1), False) == "repeat"
    assert notification_due(told, "alertmanager", r, T0, True) == "firing"  # not told yet
    am = AlertState("drop", SEG, "firing", notified={"alertmanager": "firing"}, last_notified_at=T0)
    assert notification_due(am, "alertmanager", r, T0 + timedelta(minutes=1), True) == "repeat"  # re-sent every round
    resolved = AlertState("drop", SEG, "resolved", notified={"slack": "firing"})
    assert notification_due(resolved, "slack", r, T0, False) == "resolved"
    assert (
        notification_due(AlertState("drop", SEG, "resolved", notified={"slack": "resolved"}), "slack", r, T0, False)
        is None
    )
    assert notification_due(AlertState("drop", SEG, "resolved"), "slack", r, T0, False) is None  # never told it fired
    assert notification_due(AlertState("drop", SEG, "pending"), "slack", r, T0, False) is None
