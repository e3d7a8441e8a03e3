"""Pure: which versions a rollout rule compares (the newest by its first event, never by name, against the one
before it), and how borrowed baselines read in notifications."""

from __future__ import annotations

from datetime import timedelta

from monitor.alerts.evaluator import AlertState
from monitor.alerts.notifiers import AlertmanagerNotifier, AlertMessage, slack_payload
from monitor.alerts.rollouts import newest_and_previous, pair_newest
from monitor.alerts.rules import Rule
from monitor.alerts.windows import BaselineSource, VersionStats, WeightedSums, WindowStats
from tests.monitor.alerts.conftest import T0, default_rules


def _rule() -> Rule:
    return default_rules("prompt_rollout_regression").rules[0]


def _version(name: str, first_hours_ago: float, ok: int = 100) -> VersionStats:
    stats = WindowStats(6 * 3600, rows=ok, ok=ok, weighted=WeightedSums(ok, ok, 0.8 * ok, 0.64 * ok))
    return VersionStats(name, T0 - timedelta(hours=first_hours_ago), stats, "lexical")


def _pair(*versions: VersionStats) -> tuple[str, str] | None:
    pair = newest_and_previous(_rule(), versions)
    return None if pair is None else (pair[0].name, pair[1].name)


def test_newest_is_the_version_whose_first_event_is_latest_whatever_the_names() -> None:
    """The newest version is the one first seen last (a re-released v12 after v13, v10 after v9), compared with the one
    started before it."""
    assert _pair(_version("v13", 48), _version("v12", 2)) == ("v12", "v13")
    assert _pair(_version("v9", 100), _version("v10", 3), _version("v8", 150)) == ("v10", "v9")


def test_no_rollout_when_versions_started_together_or_only_one_is_live() -> None:
    """Versions that started within min_gap (1 h) of each other are an A/B split, not a rollout; a single version is
    none either."""
    assert _pair(_version("a", 5), _version("b", 4.5)) is None
    assert _pair(_version("v1", 30)) is None
    # Started together after v1: the newest is compared with v1, not with its twin.
    assert _pair(_version("v1", 30), _version("v2", 3), _version("v3", 2.9)) == ("v3", "v1")


def test_a_short_lived_predecessor_does_not_hide_the_version_it_replaced() -> None:
    """The version before the newest is the latest to start among those with min_baseline_events in the window, else
    simply the latest."""
    assert _pair(_version("v1", 30, ok=500), _version("v2", 5, ok=10), _version("v3", 2)) == ("v3", "v1")
    assert _pair(_version("v1", 30, ok=20), _version("v2", 5, ok=10), _version("v3", 2)) == ("v3", "v2")


def test_pairs_are_keyed_by_the_newest_version_and_name_both() -> None:
    """Each rollout becomes one segment keyed by its newest version, with the version before it as the named
    baseline."""
    scope = (("app", "a"), ("judge_id", "j1"))
    out = pair_newest(
        _rule(),
        {scope: [_version("v1", 30), _version("v2", 2)], (("app", "b"), ("judge_id", "j1")): [_version("v1", 30)]},
    )
    [(key, data)] = out.items()
    assert key == (("app", "a"), ("prompt_version", "v2"), ("judge_id", "j1"))
    assert data.baseline_from == BaselineSource("previous_version", ("prompt_version",), ("v2",), ("v1",), scope)
    assert data.judge == "lexical"


def _message(source: BaselineSource | None, rule: Rule | None = None) -> AlertMessage:
    rule = rule or _rule()
    segment = (("app", "a"), ("prompt_version", "v2"), ("judge_id", "j1"))
    state = AlertState(
        rule.name,
        segment,
        "firing",
        since=T0,
        fired_at=T0,
        value=0.342,
        baseline=1.0,
        n_current=187,
        n_baseline=111,
        p_value=1.6e-62,
        severity="page",
    )
    return AlertMessage(
        "firing",
        rule,
        state,
        T0,
        T0 - timedelta(hours=6),
        T0,
        "SELECT 1",
        test="welch_t / one_sample_t",
        baseline_from=source,
    )


def _slack_fields(m: AlertMessage) -> list[str]:
    return [f["text"] for block in slack_payload(m)["blocks"] for f in block.get("fields", [])]


def test_a_rollout_notification_names_both_versions_with_their_means_sizes_and_p_value() -> None:
    """The rollout alert's summary, Slack message, webhook and Alertmanager payloads name v2 and v1, both means and
    sizes, and the p-value."""
    source = BaselineSource(
        "previous_version", ("prompt_version",), ("v2",), ("v1",), (("app", "a"), ("judge_id", "j1"))
    )
    m = _message(source)
    assert m.summary() == (
        "[PAGE] prompt_rollout_regression: prompt_version v2 mean 0.342 (n=187) vs v1 before it mean 1 (n=111), "
        "p=1.6e-62, "
        "for app=a prompt_version=v2 judge_id=j1"
    )
    assert (
        m.as_dict()["baseline_source"]["description"]
        == "prompt_version v2 against v1, the prompt_version before it, in the same window"
    )
    assert (
        "*Baseline*\nprompt_version v2 against v1, the prompt_version before it, in the same window" in _slack_fields(m)
    )
    annotations = AlertmanagerNotifier("http://am").alert(m)["annotations"]
    assert annotations["summary"] == m.summary() and annotations["baseline_source"].startswith(
        "prompt_version v2 against v1"
    )


def test_a_borrowed_baseline_is_named_in_every_notification_and_an_own_one_changes_nothing() -> None:
    """With a parent's baseline the summary and payloads say whose; with the segment's own history they read as
    before."""
    drop = default_rules("relevancy_drop").rules[0]
    source = BaselineSource(
        "parent",
        ("prompt_version",),
        ("v2",),
        ("v1",),
        (("app", "a"), ("judge_id", "j1")),
        "0 < 200 baseline events of its own",
    )
    m = _message(source, drop)
    assert m.summary().endswith(
        "for app=a prompt_version=v2 judge_id=j1; prompt_version v2 against the app's baseline (v1): 0 < 200 baseline "
        "events of its own"
    )
    assert m.as_dict()["baseline_source"]["baseline_values"] == ["v1"]
    assert (
        "against the app's baseline (v1)"
        in AlertmanagerNotifier("http://am").alert(m)["annotations"]["baseline_source"]
    )
    own = _message(None, drop)
    assert own.summary() == (
        "[PAGE] relevancy_drop: mean_score 0.342 vs baseline 1 (n=187/111, p=1.6e-62) for app=a prompt_version=v2 "
        "judge_id=j1"
    )
    assert (
        own.as_dict()["baseline_source"] is None
        and "baseline_source" not in AlertmanagerNotifier("http://am").alert(own)["annotations"]
    )
    assert not any(f.startswith("*Baseline*") for f in _slack_fields(own))
