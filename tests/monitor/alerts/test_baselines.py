"""Pure: which baseline a segment is judged against. New segments borrow their nearest parent's earlier history
under the same judge; old ones keep their own; segments that started together never borrow from each other."""

from __future__ import annotations

from monitor.alerts.baselines import pool, with_parent_baselines
from monitor.alerts.rules import Rule
from monitor.alerts.windows import SegmentData, SegmentKey, WeightedSums, WindowStats
from tests.monitor.alerts.conftest import rules_from

DAY = 86400.0


def _rule(segment_by: str = "[app, prompt_version]", metric: str = "mean_score") -> Rule:
    return rules_from(f"""
- name: drop
  metric: {metric}
  segment_by: {segment_by}
  baseline: {{trailing: 24h}}
  condition: {{relative_change: 0.1}}
  min_baseline_events: 200
""")[0]


def _window(ok: int, mean: float, seconds: float) -> WindowStats:
    """`ok` rows of weight 1 scoring `mean` each, over `seconds` of exposure."""
    return WindowStats(seconds, rows=ok, ok=ok, weighted=WeightedSums(ok, ok, ok * mean, ok * mean * mean, 0.0))


def _seg(baseline_ok: int, baseline_seconds: float, mean: float = 0.8) -> SegmentData:
    return SegmentData(
        _window(60, mean, 1800), _window(baseline_ok, mean, baseline_seconds) if baseline_ok else WindowStats(0.0)
    )


def _key(pv: str, judge: str = "j1", model: str | None = None) -> SegmentKey:
    return (("app", "a"), *((("model", model),) if model else ()), ("prompt_version", pv), ("judge_id", judge))


def test_a_new_version_borrows_the_apps_earlier_history_and_says_so() -> None:
    """A version with no history of its own is judged against the app's other versions under the same judge, and the
    source names them."""
    data = {_key("v1"): _seg(1000, DAY), _key("v0"): _seg(300, DAY), _key("v2"): _seg(0, 0)}
    out = with_parent_baselines(_rule(), data)
    v2 = out[_key("v2")]
    assert v2.baseline.ok == 1300 and v2.baseline.seconds == DAY
    assert v2.baseline_from is not None and v2.baseline_from.baseline_values == ("v1", "v0")  # most events first
    assert (
        v2.baseline_from.describe()
        == "prompt_version v2 against the app's baseline (v1, v0): 0 < 200 baseline events of its own"
    )
    assert out[_key("v1")] is data[_key("v1")] and out[_key("v0")] is data[_key("v0")]  # old ones keep their own


def test_a_young_version_keeps_the_earlier_history_until_it_has_been_around_as_long_as_its_baseline() -> None:
    """A version with enough events but only a few hours old is still judged against the history from before it; once
    old enough, against its own."""
    young = {_key("v1"): _seg(5000, DAY), _key("v2"): _seg(900, 3 * 3600)}
    v2 = with_parent_baselines(_rule(), young)[_key("v2")]
    assert v2.baseline_from is not None and v2.baseline_from.reason == "its own history spans 12% of the baseline"
    grown = {_key("v1"): _seg(5000, DAY), _key("v2"): _seg(4000, 0.95 * DAY)}
    assert with_parent_baselines(_rule(), grown)[_key("v2")].baseline_from is None


def test_a_new_judge_never_borrows_and_segments_that_started_together_do_not_either() -> None:
    """A new judge_id gets no baseline from the old judge, and of two versions that started together neither borrows
    the other's."""
    data = {_key("v1", "j-old"): _seg(5000, DAY), _key("v1", "j-new"): _seg(0, 0), _key("v2", "j-new"): _seg(0, 0)}
    out = with_parent_baselines(_rule(), data)
    assert out[_key("v1", "j-new")].baseline_from is None and out[_key("v2", "j-new")].baseline_from is None
    together = {_key("v1", "j-new"): _seg(400, 4 * 3600), _key("v2", "j-new"): _seg(100, 4 * 3600 - 60)}
    assert with_parent_baselines(_rule(), together)[_key("v2", "j-new")].baseline_from is None  # no decision instead


def test_the_nearest_parent_first_then_other_models_then_the_whole_app() -> None:
    """By model and version: a new version borrows its model's earlier versions, a new model the version's other
    models, both new the app."""
    rule = _rule("[app, model, prompt_version]")
    data = {
        _key("v1", model="m1"): _seg(1000, DAY),
        _key("v2", model="m1"): _seg(0, 0),  # new prompt version on m1
        _key("v1", model="m2"): _seg(0, 0),  # new model, same version
        _key("v3", model="m3"): _seg(0, 0),  # both new
    }
    out = with_parent_baselines(rule, data)
    described = {k: v.baseline_from.describe().split(":")[0] for k, v in out.items() if v.baseline_from is not None}
    assert described == {
        _key("v2", model="m1"): "prompt_version v2 against the baseline of app=a model=m1 (v1)",
        _key("v1", model="m2"): "model m2 against the baseline of app=a prompt_version=v1 (m1)",
        _key("v3", model="m3"): "model/prompt_version m3/v3 against the app's baseline (m1/v1)",
    }


def test_no_parent_with_enough_events_and_metrics_that_cannot_pool_keep_their_own() -> None:
    """Without a parent that has min_baseline_events the segment keeps its (insufficient) own baseline; p10 and
    segment_by [app] never borrow."""
    thin = {_key("v1"): _seg(150, DAY), _key("v2"): _seg(0, 0)}
    assert with_parent_baselines(_rule(), thin)[_key("v2")].baseline_from is None
    data = {_key("v1"): _seg(1000, DAY), _key("v2"): _seg(0, 0)}
    assert with_parent_baselines(_rule(metric="p10"), data)[_key("v2")].baseline_from is None
    per_app = {(("app", "a"), ("judge_id", "j1")): _seg(0, 0)}
    assert with_parent_baselines(_rule("[app]"), per_app) == per_app


def test_pooling_adds_counts_and_weighted_sums_and_keeps_the_longest_exposure() -> None:
    """Pooled windows add their rows and weighted sums, drop the quantiles and keep the longest exposure."""
    a, b = _window(100, 0.8, DAY), _window(300, 0.4, DAY / 2)
    p = pool([a, b])
    assert (p.ok, p.rows, p.seconds, p.p10) == (400, 400, DAY, None)
    assert p.weighted.score / p.weighted.weight == (100 * 0.8 + 300 * 0.4) / 400
