"""One page for one incident: a rule's `quiet_while` holds its new episodes pending while a named rule fires on the
same segment (pure), and the rules file names only rules it has."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from monitor.alerts.evaluator import AlertState
from monitor.alerts.inhibition import hold, same_segment
from monitor.alerts.rules import Rule, parse_rules
from schemas.errors import RulesError
from tests.monitor.alerts.conftest import default_rules

NOW = datetime(2026, 12, 6, 12, tzinfo=UTC)
SEGMENT = (("app", "a"), ("model", "m"), ("prompt_version", "v1"), ("judge_id", "j"))
OTHER = (("app", "b"), ("model", "m"), ("prompt_version", "v1"), ("judge_id", "j"))


@dataclass(frozen=True)
class Result:
    """The fields of `engine.SegmentResult` the hold reads."""

    rule: Rule
    previous: AlertState | None
    state: AlertState


def _result(rule: Rule, before: str | None, after: str, segment: tuple[tuple[str, str], ...] = SEGMENT) -> Result:
    previous = None if before is None else AlertState(rule.name, segment, before)  # type: ignore[arg-type]
    fired = NOW if after == "firing" else None
    return Result(rule, previous, AlertState(rule.name, segment, after, since=NOW, fired_at=fired, note="CUSUM 9 of 8"))  # type: ignore[arg-type]


def test_a_new_episode_beside_a_firing_rule_on_the_same_segment_is_held_pending() -> None:
    """The follow-up rule starting to fire beside relevancy_drop on its segment stays pending, its note naming the
    rule that holds it; on another segment, already firing, or beside a rule that is only pending, it fires."""
    rules = {r.name: r for r in default_rules("relevancy_drop", "follow_up_relevancy_drop").rules}
    drop, follow_up = rules["relevancy_drop"], rules["follow_up_relevancy_drop"]
    held = hold([_result(drop, "pending", "firing"), _result(follow_up, None, "firing")])
    assert held[0].state.state == "firing"
    assert held[1].state.state == "pending" and held[1].state.fired_at is None
    assert held[1].state.note == "held while relevancy_drop fires on this segment; CUSUM 9 of 8"
    # Another app's relevancy_drop, a follow-up episode that paged first, a relevancy_drop that is only pending.
    for pair in (
        [_result(drop, None, "firing", OTHER), _result(follow_up, None, "firing")],
        [_result(drop, None, "firing"), _result(follow_up, "firing", "firing")],
        [_result(drop, None, "pending"), _result(follow_up, "pending", "firing")],
    ):
        assert hold(pair)[1].state.state == "firing"
    # relevancy_drop names no rule to be quiet for: the follow-up rule's page does not hold it.
    assert hold([_result(follow_up, None, "firing"), _result(drop, None, "firing")])[1].state.state == "firing"


def test_segments_match_on_the_keys_both_rules_have() -> None:
    """An app-level segment is the same traffic as that app's model and version; no shared key is no match."""
    assert same_segment((("app", "a"),), SEGMENT)
    assert not same_segment((("app", "b"),), SEGMENT)
    assert not same_segment((("labels", "x"),), SEGMENT)


def test_quiet_while_names_other_rules_of_the_file() -> None:
    """A name that is not a rule of the file, or the rule itself, is a one-line error naming the field."""
    base = "[{name: a, metric: error_rate, condition: {threshold: 0.05}}, {name: b, metric: error_rate, "
    assert parse_rules(base + "condition: {threshold: 0.05}, quiet_while: [a]}]").rules[1].quiet_while == ["a"]
    with pytest.raises(RulesError) as e:
        parse_rules(base + "condition: {threshold: 0.05}, quiet_while: [c]}]", "r.yaml")
    assert str(e.value) == "r.yaml: rules[1] (b).quiet_while: no rule named 'c' in the file"
    with pytest.raises(RulesError) as e:
        parse_rules(base + "condition: {threshold: 0.05}, quiet_while: [b]}]", "r.yaml")
    assert str(e.value).startswith("r.yaml: rules[1] (b): quiet_while names the rule itself"), str(e.value)
