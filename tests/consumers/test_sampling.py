"""Deterministic sampling: stable across processes, at the configured rate, by conversation."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from consumers.sampling import (
    DecisionKind,
    SampleDecision,
    Sampler,
    SamplingPolicy,
    ShadowSampler,
    sample_point,
    shadow_point,
)
from schemas.errors import SamplingConfigError
from schemas.events import ConversationEvent, KafkaPosition


def event(conv: str, eid: str) -> ConversationEvent:
    """A minimal flat event in conversation `conv` with event id `eid`."""
    return ConversationEvent(
        event_id=eid,
        conversation_id=conv,
        event_time=datetime.now(UTC),
        app="a",
        model="",
        prompt_version="",
        metadata={},
        question="q",
        response="r",
        shape="flat",
        source=KafkaPosition(topic="t", partition=0, offset=0),
    )


def test_hash_is_stable_across_processes_and_hash_seeds() -> None:
    """sample_point gives the same values in subprocesses run with different PYTHONHASHSEEDs."""
    keys = ["conv-1", "conv-2", "ünïcode", ""]
    here = [sample_point(k) for k in keys]
    code = f"from consumers.sampling import sample_point; print([sample_point(k) for k in {keys!r}])"
    for seed in ("0", "12345"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
            cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2]),
        )
        assert eval(out.stdout) == here


@pytest.mark.parametrize("rate", [0.0, 0.01, 0.3, 1.0])
def test_rate_within_tolerance(rate: float) -> None:
    """The sampled share of 40,000 conversations is within four sigma of the rate, and exact at 0 and 1."""
    n = 40_000
    s = Sampler.at_rate(rate)
    hits = sum(s.decide(event(f"c{i}", f"e{i}")).sampled for i in range(n))
    sigma = (n * rate * (1 - rate)) ** 0.5
    assert abs(hits - n * rate) <= 4 * sigma
    if rate in (0.0, 1.0):
        assert hits == n * rate


def test_all_turns_of_a_conversation_share_the_decision() -> None:
    """Keyed by conversation, every turn of a conversation gets the same sampling decision."""
    s = Sampler.at_rate(0.5)
    for c in range(200):
        decisions = {s.decide(event(f"conv-{c}", f"e{c}-{t}")).sampled for t in range(5)}
        assert len(decisions) == 1


def test_event_id_key_samples_turns_independently() -> None:
    """Keyed by event_id, the turns of one conversation are sampled independently of each other."""
    s = Sampler.at_rate(0.5, key="event_id")
    mixed = sum(len({s.decide(event(f"conv-{c}", f"e{c}-{t}")).sampled for t in range(6)}) == 2 for c in range(100))
    assert mixed > 80


def test_decision_records_rate_and_rule() -> None:
    """A decision records its rate and the base rule, and a rate above 1 is rejected."""
    d = Sampler.at_rate(0.25).decide(event("x", "y"))
    assert (d.rate, d.rule) == (0.25, "base")
    with pytest.raises(ValueError):
        Sampler.at_rate(1.5)


# ---- rules, minimum per segment, factors --------------------------------------------------------------

RULES_YAML = """
default_rate: 0.1
rules:
  - name: negative-feedback
    match: {metadata: {feedback: negative}}
    always: true
  - name: internal
    match: {app: [smoke-test, load-test]}
    never: true
  - name: new-prompt
    match: {app: support-bot, prompt_version: v13}
    rate: 0.5
  - name: all-support
    match: {app: support-bot}
    rate: 0.2
"""


def seg_event(
    i: int, app: str = "support-bot", pv: str = "v12", meta: dict[str, str] | None = None
) -> ConversationEvent:
    """Event number `i` in the segment `app`/`pv`, with optional metadata."""
    return ConversationEvent(
        event_id=f"e{i}",
        conversation_id=f"c{i}",
        event_time=datetime.now(UTC),
        app=app,
        model="m",
        prompt_version=pv,
        metadata=meta or {},
        question="q",
        response="r",
        shape="flat",
        source=KafkaPosition(topic="t", partition=0, offset=i),
    )


def policy(tmp_path: Path, text: str = RULES_YAML) -> SamplingPolicy:
    """A SamplingPolicy loaded from `text`, written to a sampling.yaml in `tmp_path`."""
    f = tmp_path / "sampling.yaml"
    f.write_text(text)
    return SamplingPolicy.from_yaml(f, default_rate=1.0, key="conversation_id")


def test_rules_precedence_first_match_wins(tmp_path: Path) -> None:
    """The first matching rule wins: always before never, a specific rate rule before a broader one."""
    s = Sampler(policy(tmp_path))
    d = s.decide(seg_event(1, app="smoke-test", meta={"feedback": "negative"}))
    assert (d.sampled, d.rule) == (True, "always:negative-feedback")  # listed before `never`
    assert s.decide(seg_event(2, app="load-test")).rule == "never:internal"
    assert s.decide(seg_event(3, pv="v13")).rule == "rule:new-prompt"  # more specific rule listed first
    assert s.decide(seg_event(4, pv="v12")).rule == "rule:all-support"
    d = s.decide(seg_event(5, app="travel"))
    assert (d.rule, d.rate) == ("base", 0.1)


def test_rule_rates_within_tolerance_on_a_large_stream(tmp_path: Path) -> None:
    """Over 30,000 events per segment each rule's rate holds within four sigma, and a never rule samples none."""
    s = Sampler(policy(tmp_path))
    n = 30_000
    for app, pv, rate in (
        ("support-bot", "v13", 0.5),
        ("support-bot", "v12", 0.2),
        ("travel", "v1", 0.1),
        ("smoke-test", "v1", 0.0),
    ):
        hits = sum(s.decide(seg_event(i, app=app, pv=pv)).sampled for i in range(n))
        sigma = (n * rate * (1 - rate)) ** 0.5
        assert abs(hits - n * rate) <= 4 * sigma, (app, pv, hits)


def test_lower_rates_sample_a_subset_of_higher_ones() -> None:
    """Every event sampled at a lower rate is also sampled at a higher one."""
    low, high = Sampler.at_rate(0.05), Sampler.at_rate(0.2)
    for i in range(5000):
        e = seg_event(i)
        if low.decide(e).sampled:
            assert high.decide(e).sampled


def test_minimum_per_segment_boosts_small_segments_then_falls_back(tmp_path: Path) -> None:
    """A small segment is sampled fully up to its minimum per window, then at base rate; a new window boosts it."""
    p = policy(
        tmp_path, "default_rate: 0.01\nmin_per_segment: {events_per_replica: 30, window_s: 60, segment_by: [app]}\n"
    )
    s = Sampler(p)
    now = 6000.0  # a window boundary
    small = [s.decide(seg_event(i, app="tiny"), now=now + 1) for i in range(40)]
    assert [d.sampled for d in small[:30]] == [True] * 30 and {d.rule for d in small[:30]} == {"min_per_segment"}
    assert all(d.rule == "base" for d in small[30:]) and sum(d.sampled for d in small[30:]) <= 2
    big = [s.decide(seg_event(1000 + i, app="big"), now=now + 2) for i in range(2000)]
    assert sum(d.sampled for d in big) < 30 + 60  # 30 guaranteed, then ~1%
    assert s.decide(seg_event(99, app="tiny"), now=now + 61).rule == "min_per_segment"  # a new window


def test_a_minimum_judged_rate_per_minute_judges_that_many_of_each_segment_each_minute(tmp_path: Path) -> None:
    """`min_per_minute: 3` judges the first 3 events of a thin segment each minute whatever the base rate; under one a
    minute widens the window (0.5: one event per two minutes); giving both minimums is refused in one line."""
    p = policy(tmp_path, "default_rate: 0.0\nmin_per_segment: {min_per_minute: 3, segment_by: [app]}\n")
    s = Sampler(p)
    now = 6000.0
    first = [s.decide(seg_event(i, app="thin"), now=now + 1 + i) for i in range(10)]
    assert [d.sampled for d in first] == [True] * 3 + [False] * 7
    assert s.decide(seg_event(50, app="thin"), now=now + 61).sampled  # the next minute
    half = Sampler(policy(tmp_path, "default_rate: 0.0\nmin_per_segment: {min_per_minute: 0.5}\n"))
    assert [half.decide(seg_event(i), now=now + 30 * i).sampled for i in range(5)] == [True, False, False, False, True]
    with pytest.raises(SamplingConfigError, match="exactly one of events_per_replica or min_per_minute"):
        policy(tmp_path, "min_per_segment: {min_per_minute: 2, events_per_replica: 5}\n")


def test_factor_scales_rates_and_zero_stops_everything(tmp_path: Path) -> None:
    """A factor scales base rates and names its reason, spares always rules, and at zero stops everything."""
    s = Sampler(policy(tmp_path))
    d = s.decide(seg_event(7, app="travel"), factor=0.5, reason="budget")
    assert d.rate == 0.05 and d.rule == "base*0.5:budget"
    d = s.decide(seg_event(8, meta={"feedback": "negative"}), factor=0.5, reason="budget")
    assert (d.sampled, d.rate) == (True, 1.0)  # always is not scaled
    d = s.decide(seg_event(8, meta={"feedback": "negative"}), factor=0.0, reason="budget")
    assert (d.sampled, d.rule) == (False, "stopped:budget")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rules: [{name: x, rate: 0.5, never: true}]", "exactly one of"),
        ("rules: [{name: x, rate: 2}]", "rules.0.rate"),
        ("rules: [{name: x, match: {colour: red}, never: true}]", "colour"),
        ("default_rate: [", "not valid YAML"),
        ("- a\n- b", "must hold a mapping"),
    ],
)
def test_bad_sampling_files_are_one_line_errors(tmp_path: Path, text: str, message: str) -> None:
    """A bad sampling file raises a one-line SamplingConfigError that names the problem."""
    with pytest.raises(SamplingConfigError) as info:
        policy(tmp_path, text)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_the_shadow_sample_is_stable_independent_of_the_primary_draw_and_at_its_rate() -> None:
    """The shadow point differs from the sampling point (its own salt), is the same in a subprocess, and hits its
    rate."""
    keys = [f"conv-{i}" for i in range(20_000)]
    assert all(shadow_point(k) != sample_point(k) for k in keys[:100])
    code = f"from consumers.sampling import shadow_point; print([shadow_point(k) for k in {keys[:5]!r}])"
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "7", "PATH": ""},
        cwd=root,
    ).stdout
    assert out.strip() == str([shadow_point(k) for k in keys[:5]])
    sampled = Sampler.at_rate(0.5)
    shadow = ShadowSampler(0.1)
    judged = [e for e in (event(k, k) for k in keys) if sampled.decide(e).sampled]
    both = [e for e in judged if shadow.decide(e, sampled.decide(e)) is not None]
    assert abs(len(both) / len(judged) - 0.1) < 0.01  # a tenth of the judged, not skewed by the primary's draw
    low_primary = sum(sample_point(e.conversation_id) < 0.25 for e in both) / len(both)
    assert abs(low_primary - 0.5) < 0.06  # among the shadowed, the primary's points are spread as among the judged


def test_a_shadow_decision_follows_the_primary_and_records_both_rates() -> None:
    """Only a judged event is shadowed; its rate is the product of both, its rule `shadow:` and the primary's, and
    every turn of a conversation (or each event, with the event_id key) decides alike."""
    shadow = ShadowSampler(1.0)
    e = event("conv-1", "e1")
    assert shadow.decide(e, SampleDecision(False, 0.0, DecisionKind.STOPPED, factor_reason="budget")) is None
    primary = SampleDecision(True, 0.5, DecisionKind.RULE, "vip", factor=0.5, factor_reason="budget")
    got = shadow.decide(e, primary)
    assert got is not None and got.sampled and got.rate == 0.5 and got.rule == "shadow:rule:vip*0.5:budget"
    assert ShadowSampler(0.0).decide(e, primary) is None
    by_conversation = ShadowSampler(0.5)
    base = SampleDecision(True, 1.0, DecisionKind.BASE)
    for conv in (f"c{i}" for i in range(50)):
        assert len({by_conversation.decide(event(conv, f"{conv}-{t}"), base) is None for t in range(5)}) == 1
    by_event = ShadowSampler(0.5, key="event_id")
    assert len({by_event.decide(event("one", f"e{i}"), base) is None for i in range(50)}) == 2
    with pytest.raises(ValueError, match="within"):
        ShadowSampler(1.5)


def test_repeated_decisions_share_one_instance_equal_to_a_fresh_one() -> None:
    """Equal decisions are one shared (frozen) instance, and each equals the decision built from its values."""
    sampler = Sampler.at_rate(0.5)
    factors = [1.0, 1.0, 0.5, 1.0, 0.0, 0.5, 0.25]
    decisions = [
        sampler.decide(event(f"c{i}", f"e{i}"), factor=f, reason="budget" if f < 1 else "")
        for i, f in enumerate(factors * 20)
    ]
    for d in decisions:
        assert d == SampleDecision(d.sampled, d.rate, d.kind, d.rule_name, d.factor, d.factor_reason)
    by_value: dict[SampleDecision, SampleDecision] = {}
    assert all(by_value.setdefault(d, d) is d for d in decisions)
    assert {d.factor for d in decisions} == set(factors) and {d.sampled for d in decisions} == {True, False}


def test_the_key_is_hashed_only_where_its_point_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    """At an effective rate of 0 (the base rate, a `never` rule, a factor that stops judging) no point is below the
    rate, so the key is not hashed (the 0 % path's cost per event); where the rate is above 0 it is, once."""
    hashed: list[str] = []

    def counted(key: str) -> float:
        hashed.append(key)
        return sample_point(key)

    monkeypatch.setattr("consumers.sampling.sample_point", counted)
    policy = SamplingPolicy.model_validate(
        {"default_rate": 0.5, "rules": [{"name": "off", "match": {"app": "off"}, "never": True}]}
    )
    off = event("c1", "e1").model_copy(update={"app": "off"})
    decisions = [
        Sampler.at_rate(0.0).decide(event("c1", "e1")),
        Sampler(policy).decide(off),
        Sampler(policy).decide(event("c1", "e1"), factor=0.0, reason="budget"),
    ]
    assert [d.sampled for d in decisions] == [False, False, False] and hashed == []
    assert Sampler(policy).decide(event("c2", "e2")).sampled == (sample_point("c2") < 0.5)
    assert hashed == ["c2"]
