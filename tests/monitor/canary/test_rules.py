"""Canary metrics in the rules: keyed by judge and labelled set, no segment_by, their no-decision reasons in words,
and the examples query of a notification."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from rich.console import Console

from monitor.alerts.engine import evaluate_rules
from monitor.alerts.outcomes import Gap, describe_empty, describe_shortfalls
from monitor.alerts.queries import examples_sql
from monitor.alerts.windows import windows_for
from monitor.cli.alert_check_table import check_rows, print_check
from monitor.store.connection import ClickHouseStore
from schemas.errors import RulesError
from tests.monitor.alerts.conftest import T0, canary_run, default_rules, insert_canary, rules_from

NOW = T0 + timedelta(days=2)


def test_canary_rules_are_per_judge_and_labelled_set_and_take_no_segment_by() -> None:
    """Every shipped canary rule keys on (judge_id, labels); a canary rule with segment_by is refused in one line."""
    canary = [r for r in default_rules().rules if r.spec.table == "canary"]
    assert {r.name for r in canary} == {
        "canary_agreement_drop",
        "canary_agreement_floor",
        "canary_scores_lower",
        "canary_scores_higher",
        "canary_errors",
    }
    assert {r.key_fields for r in canary} == {("judge_id", "labels")}
    with pytest.raises(
        RulesError,
        match=r"rules\[0\] \(c\): a canary_kappa rule is per judge and labelled set: segment_by must be \[\]",
    ):
        rules_from("- name: c\n  metric: canary_kappa\n  segment_by: [app]\n  condition: {threshold: 0.3}\n")


def test_no_decision_says_what_the_canary_lacks(store: ClickHouseStore) -> None:
    """No run, a mostly failed run, or no history yet: each canary rule says which, in words that fit the check
    table."""
    rules = default_rules("canary_agreement_floor", "canary_scores_lower", "canary_errors")
    [empty, *_] = evaluate_rules(store, rules, NOW, {}).empty
    assert empty.gap is Gap.STORE_EMPTY and describe_empty(empty, NOW).startswith("no canary run in the store yet")
    insert_canary(store, [canary_run(NOW - timedelta(minutes=30), errors=111)])
    ev = evaluate_rules(store, rules, NOW, {})
    by = {r.rule.name: r for r in ev.results}
    floor, shift, errors = by["canary_agreement_floor"], by["canary_scores_lower"], by["canary_errors"]
    assert describe_shortfalls(floor.verdict.shortfalls, floor.rule) == "window: 27 of 50 judged canary pairs needed"
    assert (
        describe_shortfalls(shift.verdict.shortfalls[1:], shift.rule)
        == "baseline: 0 of 200 judged canary pairs needed in the previous 7d"
    )
    assert (
        errors.verdict.sufficient
        and errors.state.state == "firing"
        and errors.observation.value == pytest.approx(111 / 138)
    )
    out = io.StringIO()
    print_check(check_rows(ev), NOW, Console(file=out, width=80))
    assert max(len(line) for line in out.getvalue().splitlines()) <= 80 and "judged canary pairs" in " ".join(
        out.getvalue().split()
    )


def test_the_examples_query_lists_the_pairs_that_disagree_most_or_failed(store: ClickHouseStore) -> None:
    """A canary alert's examples_sql runs and lists the window's pairs, largest disagreement first (failed ones for
    errors)."""
    run = canary_run(NOW - timedelta(minutes=30), shift=-0.3, errors=5)
    insert_canary(store, [run])
    segment = (("judge_id", "j1"), ("labels", run.labels))
    for name, want in (("canary_scores_lower", "ok"), ("canary_errors", "error")):
        [rule] = default_rules(name).rules
        rows = store.query(examples_sql(rule, segment, windows_for(rule, NOW), store.database, store.table)).rows
        assert rows and {r[9] for r in rows} == {want}
        if want == "ok":
            gaps = [abs(r[8]) for r in rows]
            assert gaps == sorted(gaps, reverse=True) and gaps[0] >= 0.3
        else:
            assert len(rows) == 5 and all(r[10].startswith("unavailable: ") for r in rows)
