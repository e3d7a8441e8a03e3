"""A rule whose data cannot be read is reported as an exception of the one tree: a `QueryError` naming the rule,
with the store's line and its cause kept, and the round goes on with the other rules."""

from __future__ import annotations

import pytest

from monitor.alerts.engine import evaluate_rules
from monitor.alerts.rules import RuleSet
from monitor.store.connection import ClickHouseStore
from schemas.errors import MonitorError, QueryError, RuleError, StoreError
from tests.monitor.alerts.conftest import T0, rules_from

RULES = """
- name: coverage
  metric: coverage
  segment_by: [app]
  window: 30m
  condition: {threshold: {fire: 0.9, clear: 0.95}}
  min_events: 50
"""


def test_a_rule_error_is_an_exception_of_the_tree_naming_its_rule() -> None:
    """RuleError is a QueryError (so a MonitorError) that can be raised and caught; `rule` and `error` are as before
    and its one line names the rule."""
    [rule] = rules_from(RULES)
    with pytest.raises(QueryError) as caught:
        raise RuleError(rule, rule.name, "Table t.traffic_counts does not exist")
    err = caught.value
    assert isinstance(err, RuleError) and isinstance(err, MonitorError)
    assert err.rule is rule and err.error == "Table t.traffic_counts does not exist"
    assert str(err) == "alert rule coverage: Table t.traffic_counts does not exist"


def test_a_round_reports_a_failing_rule_as_a_rule_error_keeping_its_cause(store: ClickHouseStore) -> None:
    """Without the traffic table, the coverage rule's round error is a RuleError whose cause is the store's error."""
    store.command(f"DROP TABLE {store.database}.traffic_counts")
    evaluation = evaluate_rules(store, RuleSet(rules=rules_from(RULES)), T0, {})
    [err] = evaluation.errors
    assert isinstance(err, RuleError) and err.rule.name == "coverage" and "traffic_counts" in err.error
    assert isinstance(err.__cause__, StoreError) and str(err.__cause__) == err.error
    assert evaluation.counts().rule_errors == 1
