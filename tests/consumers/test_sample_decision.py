"""Sampling decisions are typed (a kind, not a string to split), and the per-replica minimum says so in its name."""

from __future__ import annotations

from pathlib import Path

import pytest

from consumers.sampling import DecisionKind, Sampler, SamplingPolicy
from schemas.errors import SamplingConfigError
from schemas.events import ConversationEvent
from tests.consumers.test_sampling import event


def _event(app: str = "a") -> ConversationEvent:
    return event("c1", "e").model_copy(update={"app": app})


def test_each_decision_carries_its_kind_and_the_factor_that_scaled_it() -> None:
    """Kind, rule name and factor are fields; the stored `sample_rule` text is derived from them."""
    policy = SamplingPolicy.model_validate(
        {
            "default_rate": 1.0,
            "rules": [
                {"name": "vip", "match": {"app": "vip"}, "always": True},
                {"name": "off", "match": {"app": "off"}, "never": True},
            ],
        }
    )
    s = Sampler(policy)
    base = s.decide(_event(), factor=0.5, reason="budget")
    assert (base.kind, base.rule_name, base.factor, base.factor_reason, base.rule) == (
        DecisionKind.BASE,
        "",
        0.5,
        "budget",
        "base*0.5:budget",
    )
    assert (s.decide(_event("vip")).kind, s.decide(_event("off")).kind) == (DecisionKind.ALWAYS, DecisionKind.NEVER)
    stopped = s.decide(_event(), factor=0.0, reason="budget")
    assert (stopped.kind, stopped.sampled, stopped.rule) == (DecisionKind.STOPPED, False, "stopped:budget")


def test_the_old_per_segment_key_is_refused_with_the_new_name(tmp_path: Path) -> None:
    """`min_per_segment.events` is rejected with a line naming `events_per_replica` (the count is per replica)."""
    path = tmp_path / "s.yaml"
    path.write_text("min_per_segment: {events: 30}\n", encoding="utf-8")
    with pytest.raises(SamplingConfigError, match="events_per_replica") as info:
        SamplingPolicy.from_yaml(path, 1.0, "conversation_id")
    assert "\n" not in str(info.value)
