"""Rules files: the shipped defaults, durations, and one-line errors naming the bad field."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import get_args

import pytest

from monitor.alerts.metric_specs import SPECS, MetricName
from monitor.alerts.rules import load_rules, parse_rules
from schemas.durations import parse_duration
from schemas.errors import RulesError

GOOD = """
rules:
  - name: drop
    metric: mean_score
    segment_by: [app, prompt_version]
    window: 30m
    baseline: {trailing: 24h}
    condition: {relative_change: {fire: 0.1, clear: 0.05}}
    for: 10m
"""


def test_default_rules_cover_the_required_alerts() -> None:
    """The shipped rules cover the required metrics, key score metrics by judge_id, and watch silence per segment and
    overall."""
    rules = {r.name: r for r in load_rules().rules}
    metrics = {r.metric for r in rules.values()}
    assert {"mean_score", "low_score_share", "error_rate", "coverage", "scoring_lag_p90", "no_data"} <= metrics
    drop = rules["relevancy_drop"]
    assert drop.key_fields == ("app", "model", "prompt_version", "judge_id")  # judge_id always, for score metrics
    assert drop.detector is not None and drop.baseline is not None and drop.baseline.trailing == timedelta(days=7)
    assert drop.severity == "page" and drop.for_ == timedelta(0)  # the detector's threshold is the evidence
    silent = [r for r in rules.values() if r.metric == "no_data"]
    assert any(r.segment_by == [] for r in silent) and any(r.segment_by for r in silent)  # whole stream and per segment
    assert all(r.key_fields == tuple(r.segment_by) for r in silent)  # silence is not per judge


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("5m", 300), ("1h30m", 5400), ("7d", 604800), (45, 45), ("1w", 604800)]
)
def test_durations(text: object, seconds: int) -> None:
    """Durations parse from unit strings and from plain numbers of seconds."""
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("bad", ["5 minutes", "m", "", "1h-3m", True])
def test_bad_durations(bad: object) -> None:
    """A malformed duration raises ValueError."""
    with pytest.raises(ValueError):
        parse_duration(bad)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (("metric: mean_score", "metric: mean"), "rules[0] (drop).metric: Input should be"),
        (("window: 30m", "window: soon"), "rules[0] (drop).window: 'soon' is not a duration"),
        (("for: 10m", "for: 10m\n    colour: red"), "rules[0] (drop).colour: Extra inputs are not permitted"),
        (
            ("baseline: {trailing: 24h}", "baseline: {trailing: 24h, previous_days: 3}"),
            "rules[0] (drop).baseline: give exactly one of",
        ),
        (("    baseline: {trailing: 24h}\n", ""), "rules[0] (drop): condition compares with a baseline"),
        (
            ("{fire: 0.1, clear: 0.05}", "{fire: 0.1, clear: 0.2}"),
            "rules[0] (drop).condition: relative_change.clear must be between 0 and fire",
        ),
        (
            ("segment_by: [app, prompt_version]", "segment_by: [app, judge]"),
            "rules[0] (drop).segment_by[1]: Input should be",
        ),
    ],
)
def test_errors_are_one_line_and_name_the_field(edit: tuple[str, str], expected: str) -> None:
    """An invalid rule gives one line naming the file, the rule and the bad field."""
    text = GOOD.replace(*edit)
    assert text != GOOD
    with pytest.raises(RulesError) as e:
        parse_rules(text, "my.yaml")
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("my.yaml: ")
    assert expected.split(": ", 1)[0] in msg and expected.split(": ", 1)[1].split(" (got")[0][:30] in msg, msg


def test_threshold_hysteresis_must_point_the_right_way() -> None:
    """A threshold's clear level must lie on the good side of its fire level, which depends on the metric's bad
    direction."""
    text = GOOD.replace(
        "condition: {relative_change: {fire: 0.1, clear: 0.05}}", "condition: {threshold: {fire: 0.5, clear: 0.4}}"
    )
    with pytest.raises(RulesError, match=r"threshold.clear must be >= fire for mean_score"):
        parse_rules(text)
    up = text.replace("metric: mean_score", "metric: error_rate")
    assert (
        parse_rules(up).rules[0].condition.threshold is not None
    )  # for error_rate higher is worse: 0.4 clears below 0.5


def test_duplicate_names_and_files(tmp_path: Path) -> None:
    """Duplicate rule names, a missing file and invalid YAML are rules errors; a valid file loads."""
    with pytest.raises(RulesError, match="two rules are named 'drop'"):
        parse_rules(GOOD + GOOD.replace("rules:\n", ""))
    with pytest.raises(RulesError, match=r"cannot read rules file .*nope.yaml"):
        load_rules(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("rules: [\n", encoding="utf-8")
    with pytest.raises(RulesError, match=r"bad.yaml: line \d+ not valid YAML"):
        load_rules(tmp_path / "bad.yaml")
    (tmp_path / "ok.yaml").write_text(GOOD, encoding="utf-8")
    assert load_rules(tmp_path / "ok.yaml").rules[0].for_ == timedelta(minutes=10)


def test_no_data_rules_need_a_baseline_and_take_no_condition() -> None:
    """A no_data rule needs a baseline, takes no condition, and is keyed by its segment fields only."""
    base = "rules:\n  - name: s\n    metric: no_data\n    window: 15m\n"
    with pytest.raises(RulesError, match="needs a baseline"):
        parse_rules(base)
    with pytest.raises(RulesError, match="takes no condition"):
        parse_rules(base + "    baseline: {trailing: 1h}\n    condition: {threshold: 1}\n")
    assert parse_rules(base + "    baseline: {trailing: 1h}\n").rules[0].key_fields == ()


def test_every_metric_a_rule_can_name_has_one_spec() -> None:
    """Each metric a rule may name has exactly one spec, filed under its own name."""
    assert sorted(SPECS) == sorted(get_args(MetricName))
    assert all(name == spec.name for name, spec in SPECS.items())


def test_every_metric_has_one_reader_of_its_own() -> None:
    """Each metric a rule may name is read by the reader filed under its name, so no spec goes unread."""
    from monitor.alerts.observations import READERS

    assert sorted(READERS) == sorted(get_args(MetricName))
    assert all(reader.__name__ == f"read_{name}" for name, reader in READERS.items())


def test_default_rollout_rules_compare_versions_per_app_and_their_levels_are_derived() -> None:
    """The shipped rollout rules compare the newest prompt version and model per app (keyed by it and the judge) with
    an always-valid test and no 50-event gate; no shipped rule sets alpha: every test's level is derived from its
    share of the budget."""
    rules = {r.name: r for r in load_rules().rules}
    prompt, model = rules["prompt_rollout_regression"], rules["model_rollout_regression"]
    assert (
        prompt.rollout is not None
        and prompt.rollout.of == "prompt_version"
        and prompt.key_fields == ("app", "prompt_version", "judge_id")
    )
    assert (
        model.rollout is not None and model.rollout.of == "model" and model.key_fields == ("app", "model", "judge_id")
    )
    assert prompt.min_events < 10 and prompt.min_baseline_events >= 50 and prompt.spec.tests == ("betting",)
    assert not [r.name for r in rules.values() if r.explicit_alpha is not None]


def test_every_shipped_rule_is_documented() -> None:
    """docs/alerting.md names every shipped rule (its test and alpha are explained there)."""
    docs = (Path(__file__).resolve().parents[3] / "docs" / "alerting.md").read_text(encoding="utf-8")
    assert all(f"`{r.name}`" in docs for r in load_rules().rules)


ROLLOUT = """
rules:
  - name: rollout
    metric: rollout_mean_score
    rollout: {of: prompt_version}
    segment_by: [app]
    window: 6h
    condition: {relative_change: 0.1}
"""


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (("    rollout: {of: prompt_version}\n", ""), "needs rollout: {of: prompt_version} or {of: model}"),
        (("segment_by: [app]", "segment_by: [app, prompt_version]"), "segment_by must not list prompt_version"),
        (("window: 6h", "window: 6h\n    baseline: {trailing: 24h}"), "takes no baseline"),
        (
            ("{of: prompt_version}", "{of: prompt_version, lookback: 1h}"),
            "rollout.lookback must be at least the window",
        ),
        (
            ("metric: rollout_mean_score", "metric: mean_score\n    baseline: {trailing: 1h}"),
            "rollout applies to rollout_mean_score rules only",
        ),
        (("{of: prompt_version}", "{of: judge_id}"), "rules[0] (rollout).rollout.of: Input should be"),
    ],
)
def test_rollout_rules_are_checked(edit: tuple[str, str], expected: str) -> None:
    """A rollout rule needs `rollout`, compares a field it is not segmented by, takes no baseline; other metrics take
    no `rollout`."""
    assert parse_rules(ROLLOUT).rules[0].rollout is not None
    with pytest.raises(RulesError) as e:
        parse_rules(ROLLOUT.replace(*edit), "r.yaml")
    assert expected in str(e.value) and "\n" not in str(e.value)


def test_include_replays_is_off_by_default_and_checked() -> None:
    """include_replays defaults to false, takes a boolean, and applies to rules over the scores table only."""
    assert not parse_rules(GOOD).rules[0].include_replays
    assert parse_rules(GOOD.replace("for: 10m", "for: 10m\n    include_replays: true")).rules[0].include_replays
    canary = "[{name: c, metric: canary_mean_shift, window: 6h, condition: {threshold: -0.1}, include_replays: true}]"
    traffic = (
        "[{name: t, metric: no_data, source: traffic, window: 10m, baseline: {trailing: 1h}, include_replays: true}]"
    )
    wrong = [
        (
            GOOD.replace("for: 10m", "for: 10m\n    include_replays: sometimes"),
            "rules[0] (drop).include_replays: Input should be a valid boolean",
        ),
        (
            canary,
            "rules[0] (c): include_replays applies to rules over the scores table only (canary runs hold no replayed "
            "rows)",
        ),
        (
            traffic,
            "rules[0] (t): include_replays applies to rules over the scores table only (the traffic counts hold no "
            "replayed rows)",
        ),
    ]
    for text, expected in wrong:
        with pytest.raises(RulesError) as e:
            parse_rules(text, "r.yaml")
        assert str(e.value).startswith(f"r.yaml: {expected}"), str(e.value)


def test_turns_is_all_by_default_and_checked() -> None:
    """turns defaults to all, takes all, first or follow_up, and applies to rules over the scores table only."""
    assert parse_rules(GOOD).rules[0].turns == "all"
    assert parse_rules(GOOD.replace("for: 10m", "for: 10m\n    turns: follow_up")).rules[0].turns == "follow_up"
    canary = "[{name: c, metric: canary_mean_shift, window: 6h, condition: {threshold: -0.1}, turns: first}]"
    traffic = "[{name: t, metric: no_data, source: traffic, window: 10m, baseline: {trailing: 1h}, turns: follow_up}]"
    coverage = "[{name: v, metric: coverage, window: 15m, condition: {threshold: 0.9}, turns: first}]"
    wrong = [
        (
            GOOD.replace("for: 10m", "for: 10m\n    turns: later"),
            "rules[0] (drop).turns: Input should be 'all', 'first' or 'follow_up'",
        ),
        (canary, "rules[0] (c): turns applies to rules over the scores table only (canary runs have no turns)"),
        (traffic, "rules[0] (t): turns applies to rules over the scores table only (the traffic counts have no turns)"),
        (
            coverage,
            "rules[0] (v): turns applies to rules over the scores table only (the traffic counts have no turns)",
        ),
    ]
    for text, expected in wrong:
        with pytest.raises(RulesError) as e:
            parse_rules(text, "r.yaml")
        assert str(e.value).startswith(f"r.yaml: {expected}"), str(e.value)


DETECTOR = """
rules:
  - name: drop
    metric: mean_score
    segment_by: [app]
    window: 6h
    baseline: {trailing: 7d}
    detector: {shift: 0.1}
"""


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            ("metric: mean_score", "metric: error_rate"),
            "detector applies to mean_score, low_score_share and feedback_negative_share rules only",
        ),
        (("baseline: {trailing: 7d}", "baseline: {previous_days: 7}"), "needs baseline: {trailing: ...}"),
        (("detector: {shift: 0.1}", "detector: {shift: 0.1}\n    condition: {threshold: 0.5}"), "takes no condition"),
        (("detector: {shift: 0.1}", "detector: {shift: 0}"), "detector.shift"),
        (("detector: {shift: 0.1}", "detector: {shift: 0.1}\n    for: 3h"), "a detector rule takes no for"),
        (
            ("detector: {shift: 0.1}", "detector: {shift: 0.1, fresh: 7h}"),
            "detector.fresh must be positive and at most the window",
        ),
        (("rules:", "false_alarms_per_week: {page: 0}\nrules:"), "false_alarms_per_week"),
    ],
)
def test_detector_rules_are_checked_in_one_line(edit: tuple[str, str], expected: str) -> None:
    """A detector rule needs a score metric and a trailing baseline, takes no condition and no `for`, and a budget is
    positive."""
    assert parse_rules(DETECTOR).rules[0].detector is not None
    with pytest.raises(RulesError, match=expected.replace("{", r"\{").replace("}", r"\}").replace(".", r"\.")) as info:
        parse_rules(DETECTOR.replace(*edit))
    assert "\n" not in str(info.value)
