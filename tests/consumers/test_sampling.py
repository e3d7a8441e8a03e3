"""Deterministic sampling: stable across processes, at the configured rate, by conversation."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import pytest

from consumers.sampling import Sampler, sample_point
from schemas.events import ConversationEvent, KafkaPosition


def event(conv: str, eid: str) -> ConversationEvent:
    return ConversationEvent(event_id=eid, conversation_id=conv, event_time=datetime.now(UTC), app="a", model="", prompt_version="",
                             metadata={}, question="q", response="r", shape="flat", source=KafkaPosition(topic="t", partition=0, offset=0))


def test_hash_is_stable_across_processes_and_hash_seeds() -> None:
    keys = ["conv-1", "conv-2", "ünïcode", ""]
    here = [sample_point(k) for k in keys]
    code = f"from consumers.sampling import sample_point; print([sample_point(k) for k in {keys!r}])"
    for seed in ("0", "12345"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": seed, "PATH": ""},
                             cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2]))
        assert eval(out.stdout) == here  # noqa: S307 - our own list of floats


@pytest.mark.parametrize("rate", [0.0, 0.01, 0.3, 1.0])
def test_rate_within_tolerance(rate: float) -> None:
    n = 40_000
    s = Sampler(rate)
    hits = sum(s.decide(event(f"c{i}", f"e{i}")).sampled for i in range(n))
    sigma = (n * rate * (1 - rate)) ** 0.5
    assert abs(hits - n * rate) <= 4 * sigma + (0 if 0 < rate < 1 else 0)
    if rate in (0.0, 1.0):
        assert hits == n * rate


def test_all_turns_of_a_conversation_share_the_decision() -> None:
    s = Sampler(0.5)
    for c in range(200):
        decisions = {s.decide(event(f"conv-{c}", f"e{c}-{t}")).sampled for t in range(5)}
        assert len(decisions) == 1


def test_event_id_key_samples_turns_independently() -> None:
    s = Sampler(0.5, key="event_id")
    mixed = sum(len({s.decide(event(f"conv-{c}", f"e{c}-{t}")).sampled for t in range(6)}) == 2 for c in range(100))
    assert mixed > 80


def test_decision_records_rate_and_rule() -> None:
    d = Sampler(0.25).decide(event("x", "y"))
    assert (d.rate, d.rule) == (0.25, "base")
    with pytest.raises(ValueError):
        Sampler(1.5)
