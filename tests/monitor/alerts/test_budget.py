"""One false-alarm budget for every rule that can fire by chance: a severity's `false_alarms_per_week` split over its
rules by `budget_share`, each test's level derived from its share (per window and segment, or per rollout), an
explicit `alpha:` overriding it and counted, and the deployment's totals against the budget."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import pytest

from monitor.alerts.budget import MAX_ALPHA, Per, evaluation_level, rollout_level, rollouts_per_week, significance
from monitor.alerts.detectability import expected_by_rule, expected_per_week
from monitor.alerts.engine import evaluate_rules
from monitor.alerts.rules import load_rules, parse_rules
from monitor.alerts.spending import rule_spends, severity_spends
from monitor.alerts.windows import SegmentKey, VersionStats, WindowStats
from monitor.store.connection import ClickHouseStore
from tests.monitor.alerts.conftest import T0, default_rules, insert, make_row

TWO_PAGES = """
false_alarms_per_week: {page: 2}
rules:
  - {name: big, metric: error_rate, condition: {threshold: 0.05}, budget_share: 3, severity: page}
  - {name: small, metric: error_rate, condition: {threshold: 0.05}, severity: page}
  - {name: lag, metric: scoring_lag_p90, condition: {threshold: 600}, severity: page}
  - {name: untested, metric: error_rate, condition: {threshold: 0.05}, test: none, severity: page}
  - {name: elsewhere, metric: error_rate, condition: {threshold: 0.05}, severity: warning}
"""


def test_a_severitys_budget_is_split_over_its_tested_rules_by_budget_share() -> None:
    """Weights 3 and 1 split 2 false pages a week 1.5 / 0.5; a rule without a test gets none; a severity the file
    does not list has 1 a week; the shipped shares add up to one page and three tickets; chosen rules keep theirs."""
    rules = parse_rules(TWO_PAGES, "test")
    by = {r.name: r for r in rules.rules}
    assert [rules.budget(by[n]) for n in ("big", "small", "lag", "untested", "elsewhere")] == [1.5, 0.5, 0.0, 0.0, 1.0]

    shipped = load_rules()
    share = {r.name: shipped.budget(r) for r in shipped.rules}
    assert share["relevancy_drop"] == pytest.approx(6 / 12) and share["judge_error_rate"] == pytest.approx(1 / 12)
    assert share["follow_up_relevancy_drop"] == share["feedback_negative_rise"] == pytest.approx(1 / 12)
    assert share["prompt_rollout_regression"] == share["model_rollout_regression"] == pytest.approx(1 / 12)
    silence = (share["app_no_data"], share["upstream_silent"], share["stream_silent"])
    assert silence == pytest.approx((0.4 / 12, 0.4 / 12, 0.2 / 12))
    assert share["low_score_share_rise"] == pytest.approx(3 * 6 / 12) and share["relevancy_floor"] == pytest.approx(
        3 / 12
    )
    assert share["feedback_rate_collapse"] == pytest.approx(3 / 12) and share["judge_user_auc_low"] == 0.0
    assert share["canary_agreement_drop"] == share["scoring_lag"] == share["shadow_agreement_drop"] == 0.0
    for severity, budget in (("page", 1.0), ("ticket", 3.0)):
        assert sum(share[r.name] for r in shipped.rules if r.severity == severity) == pytest.approx(budget)
    one = shipped.chosen(["judge_error_rate"])
    assert [r.name for r in one.rules] == ["judge_error_rate"] and one.budget(one.rules[0]) == pytest.approx(1 / 12)


def test_each_kind_of_test_derives_its_level_from_its_share() -> None:
    """On 11 apps: judge_error_rate (1/12 a week, 15 min windows) tests at 1/12 / (672 x 11), app_no_data at
    0.4/12 / (336 x 11), stream_silent (one segment) at 0.2/12 / 672, canary_errors (a ticket) at 3/12 / 168; the
    rollout rules at their share over the week's rollouts (at least one, at most 0.05); detectors and untested rules
    have no level."""
    shipped = load_rules()
    by = {r.name: r for r in shipped.rules}

    def level(name: str, segments: int) -> float:
        got = significance(by[name], shipped.budget(by[name]), segments, {})
        assert got is not None and got.per == Per.EVALUATION and not got.explicit
        assert got.per_week == pytest.approx(shipped.budget(by[name]))  # the union bound spends exactly the share
        return got.alpha

    assert level("judge_error_rate", 11) == pytest.approx(1.1273e-5, rel=1e-4)
    assert level("app_no_data", 11) == pytest.approx(9.0188e-6, rel=1e-4)
    assert level("stream_silent", 1) == pytest.approx(2.4802e-5, rel=1e-4)
    assert level("judged_volume_drop", 11) == pytest.approx(6.7641e-5, rel=1e-4)
    assert level("canary_errors", 1) == pytest.approx(1.4881e-3, rel=1e-4)
    assert level("feedback_rate_collapse", 11) == pytest.approx(2.7056e-4, rel=1e-4)

    prompt = by["prompt_rollout_regression"]
    assert rollout_level(prompt, 0.1, 2.0).alpha == pytest.approx(0.05)
    assert rollout_level(prompt, 0.1, 10.0).alpha == pytest.approx(0.01)
    none = rollout_level(prompt, 0.1, 0.0)
    assert none.alpha == MAX_ALPHA and none.per == Per.ROLLOUT and none.per_week == 0.0  # no rollout spends nothing
    assert rollout_level(prompt, 0.1, 1.0).per_week == pytest.approx(MAX_ALPHA)  # capped: less than its share
    no_segment = evaluation_level(by["judge_error_rate"], 0.1, 0)
    assert no_segment.alpha == pytest.approx(0.1 / 672) and no_segment.per_week == 0.0
    assert significance(by["relevancy_drop"], 0.6, 18, {}) is None
    assert significance(by["scoring_lag"], 0.0, 11, {}) is None


def test_rollouts_are_counted_from_the_versions_read_over_the_lookback() -> None:
    """A version is a rollout when its segment's earliest version started at least min_gap before it: one rollout in
    one app, none in an app with one version or with two that started together; per week over a 14-day lookback."""
    [rule] = default_rules("prompt_rollout_regression").rules

    def v(name: str, after: timedelta) -> VersionStats:
        return VersionStats(name, T0 + after, WindowStats(86400.0))

    versions: dict[SegmentKey, Sequence[VersionStats]] = {
        (("app", "a"),): [v("v1", timedelta(0)), v("v2", timedelta(days=2))],
        (("app", "b"),): [v("v1", timedelta(0))],
        (("app", "c"),): [v("v1", timedelta(0)), v("v2", timedelta(minutes=30))],
    }
    assert rollouts_per_week(rule, versions) == 1.0
    fortnight = rule.model_copy(update={"rollout": rule.rollout.model_copy(update={"lookback": timedelta(days=14)})})  # type: ignore[union-attr]
    assert rollouts_per_week(fortnight, versions) == 0.5
    assert rollouts_per_week(rule, {}) == 0.0


def _errors_three_minutes_in_five(store: ClickHouseStore) -> None:
    """4 rows a minute for 40 min, the first of three minutes in every five an error: 9 errors in any 15-minute
    window's 60."""
    rows = []
    for m in range(40):
        t = T0 + timedelta(minutes=m)
        rows.append(make_row(t, status="error" if m % 5 in (0, 2, 4) else "ok"))
        rows += [make_row(t + timedelta(seconds=15 * k)) for k in (1, 2, 3)]
    insert(store, rows)


def test_an_explicit_alpha_overrides_the_derived_level_and_its_spend_is_counted(store: ClickHouseStore) -> None:
    """9 errors in 60 (p = 1.9e-4 against 5 %) do not page at judge_error_rate's derived level (1/12 / 672 = 1.24e-4
    for its one app; the old fixed 0.01 would have paged), but do at an explicit alpha 0.01, whose spend, 0.01 x 672
    windows = 6.7 false pages a week, is counted and puts the page severity over its budget."""
    _errors_three_minutes_in_five(store)
    now = T0 + timedelta(minutes=40)
    shipped = default_rules("judge_error_rate", ignore_for=True)
    ev = evaluate_rules(store, shipped, now, {})
    [derived] = ev.results
    assert derived.observation.p_value == pytest.approx(1.9e-4, rel=0.01)
    assert derived.level is not None and derived.level.alpha == pytest.approx(1 / 12 / 672)
    assert derived.state.state == "inactive" and "not significant" in derived.state.note
    assert expected_by_rule(ev, shipped) == {"judge_error_rate": pytest.approx(1 / 12)}
    assert not [s for s in severity_spends(rule_spends(ev, shipped), shipped) if s.over]

    explicit = shipped.model_copy(update={"rules": [shipped.rules[0].model_copy(update={"alpha": 0.01})]})
    ev = evaluate_rules(store, explicit, now, {})
    [fired] = ev.results
    assert fired.level is not None and fired.level.explicit and fired.level.alpha == 0.01
    assert fired.state.state == "firing"
    assert expected_per_week(ev, explicit) == {"page": pytest.approx(6.72)}
    [page] = [s for s in severity_spends(rule_spends(ev, explicit), explicit) if s.over]
    assert page.severity == "page" and [s.rule for s in page.explicit] == ["judge_error_rate"]
    assert page.warning().startswith("page: the rules expect 6.7 false alarms a week, over its budget of 1")
