"""The review queue's routing rules file: the shipped defaults, one-line errors naming the file and the field, and
the pure route draw (shares, fallback to control, inclusion probability)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from monitor.review.queue import choose_route, effective_shares, inclusion_probability, parse_segment_key, unit_draw
from monitor.review.routing import Route, RoutingRules, load_routing, parse_routing
from schemas.errors import ConfigError

ALL: dict[Route, bool] = {"control": True, "disagree": True, "borderline": True, "firing": True}


def test_the_shipped_defaults_are_the_contracts() -> None:
    """No file: the shipped default_routes.yaml, equal to RoutingRules() (control 0.2 of what the queue serves)."""
    rules = load_routing(None)
    assert rules == RoutingRules()
    assert rules.shares["control"] == 0.2 and sum(rules.shares.values()) == pytest.approx(1.0)
    assert rules.reserve_for == timedelta(minutes=5) and rules.window == timedelta(days=14)


def test_a_partial_file_keeps_the_other_defaults(tmp_path: Path) -> None:
    """A file giving only some fields: those change, the rest stay the defaults; routes left out get share 0."""
    path = tmp_path / "routes.yaml"
    path.write_text("shares: {control: 0.5, borderline: 0.5}\nreserve_for: 90s\nwindow: 2d\n", encoding="utf-8")
    rules = load_routing(path)
    assert rules.shares == {"control": 0.5, "disagree": 0.0, "borderline": 0.5, "firing": 0.0}
    assert rules.reserve_for == timedelta(seconds=90) and rules.window == timedelta(days=2)
    assert rules.borderline == (0.375, 0.625) and rules.disagree_levels == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("shares: [1", "r.yaml: line 1 not valid YAML"),
        ("- control", "r.yaml: expected a mapping of routing fields"),
        ("sharez: {control: 1}", "r.yaml: unknown field 'sharez'"),
        ("shares: {control: 0.5, disagree: 0.2}", "r.yaml: shares: the shares add up to 0.7, not 1"),
        ("shares: {control: 0, disagree: 1}", "r.yaml: shares.control: must be above 0"),
        ("shares: {control: 0.5, random: 0.5}", "r.yaml: shares.random: unknown route"),
        ("shares: {control: 1.5}", "r.yaml: shares.control: expected a number from 0 to 1, got 1.5"),
        ("disagree_levels: 0", "r.yaml: disagree_levels: expected an integer from 1 to 4"),
        ("borderline: [0.7, 0.3]", "r.yaml: borderline: low 0.7 is above high 0.3"),
        ("borderline: 0.5", "r.yaml: borderline: expected [low, high]"),
        ("low_confidence: yes", "r.yaml: low_confidence: expected a number from 0 to 1"),
        ("reserve_for: soon", "r.yaml: reserve_for: 'soon' is not a duration"),
        ("window: 0s", "r.yaml: window: must be longer than 0"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_file_and_field(text: str, message: str) -> None:
    """Each mistake is refused with one ConfigError line starting with the file and the field."""
    with pytest.raises(ConfigError) as e:
        parse_routing(text, "r.yaml")
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_an_unreadable_file_is_one_line(tmp_path: Path) -> None:
    """A missing rules file is named in one line."""
    with pytest.raises(ConfigError, match=r"^cannot read review routes file .*missing\.yaml"):
        load_routing(tmp_path / "missing.yaml")


def test_routes_are_drawn_by_their_shares_and_an_empty_one_goes_to_control() -> None:
    """The draw falls on the routes in order by cumulative share; an empty targeted pool gives control its share."""
    shares = RoutingRules().shares  # control 0.2, disagree 0.3, borderline 0.3, firing 0.2
    assert choose_route(0.1, shares, ALL) == ("control", 0.2)
    assert choose_route(0.3, shares, ALL) == ("disagree", 0.3)
    assert choose_route(0.75, shares, ALL)[0] == "borderline"
    assert choose_route(0.95, shares, ALL)[0] == "firing"
    no_disagree: dict[Route, bool] = {**ALL, "disagree": False}
    assert effective_shares(shares, no_disagree)["control"] == pytest.approx(0.5)
    assert choose_route(0.3, shares, no_disagree)[1] == pytest.approx(0.5)
    only_control: dict[Route, bool] = {r: r == "control" for r in ALL}
    assert choose_route(0.99, shares, only_control) == ("control", 1.0)


def test_the_draws_repeat_for_a_seed_and_spread_over_the_unit_interval() -> None:
    """The sequence of a seed is the same each time; 10,000 draws land on control about its share of the time."""
    assert [unit_draw(7, i) for i in range(5)] == [unit_draw(7, i) for i in range(5)]
    assert [unit_draw(7, i) for i in range(5)] != [unit_draw(8, i) for i in range(5)]
    shares = RoutingRules().shares
    control = sum(choose_route(unit_draw(0, i), shares, ALL)[0] == "control" for i in range(10_000))
    assert 1800 < control < 2200


def test_inclusion_probability_is_the_share_over_the_pool() -> None:
    """A route drawn with probability 0.2 among 50 items: each had 0.2 / 50."""
    assert inclusion_probability(0.2, 50) == pytest.approx(0.004)


def test_a_segment_key_gives_its_answer_fields() -> None:
    """app, model and prompt_version select answers; judge_id and malformed keys give nothing to select by."""
    key = '[["app","shop"],["model","m"],["judge_id","rubric-1"]]'
    assert parse_segment_key(key) == (("app", "shop"), ("model", "m"))
    assert parse_segment_key("not json") == () and parse_segment_key('{"app": "x"}') == ()
