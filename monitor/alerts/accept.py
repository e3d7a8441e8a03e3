"""`alerts accept RULE SEGMENT`: a person accepts a detector segment's new level. The episode resolves, the level
since it started becomes the segment's frozen reference until the change has left the baseline, and the state
records who accepted it and when. Until someone does, a level alert stays firing: it never resolves by taking
the regression into its own baseline.

`choose` and `accepted` are pure; `accept` is the thin shell that reads the window and writes the state."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime

import numpy as np
from numpy.typing import NDArray

from monitor.alerts.evaluator import AlertState, Frozen
from monitor.alerts.likelihood import with_baseline
from monitor.alerts.rules import Rule
from monitor.alerts.sequential import BIN_VALUES, Buckets, Reference, change_point, distribution
from monitor.alerts.sources import RuleData
from monitor.alerts.windows import windows_for
from schemas.errors import UsageError


def parse_segment(text: str) -> dict[str, str]:
    """`app=support-bot,prompt_version=v13` as a mapping; raises `UsageError` on another shape."""
    out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UsageError(
                f"segment {text!r}: expected field=value pairs separated by commas (app=support-bot,prompt_version=v13)"
            )
        out[key.strip()] = value.strip()
    if not out:
        raise UsageError("segment: give at least one field=value pair (app=support-bot)")
    return out


def choose(rule: Rule, states: Mapping[tuple[str, str], AlertState], wanted: Mapping[str, str]) -> AlertState:
    """The one state of `rule` whose segment has every field of `wanted`; raises `UsageError` naming the candidates."""
    if rule.detector is None:
        raise UsageError(f"rule {rule.name} has no detector: only a detector rule's level can be accepted")
    mine = [s for s in states.values() if s.rule == rule.name]
    found = [s for s in mine if all(dict(s.segment).get(k) == v for k, v in wanted.items())]
    shown = ", ".join(_segment_text(s) for s in (found or mine)[:5]) or "none"
    if not found:
        raise UsageError(
            f"rule {rule.name} has no stored segment matching {_pairs(wanted)} (segments with a state: {shown})"
        )
    if len(found) > 1:
        raise UsageError(f"{len(found)} segments of {rule.name} match {_pairs(wanted)}: {shown}; name more fields")
    state = found[0]
    if not state.active:
        raise UsageError(f"{rule.name} on {_segment_text(state)} is {state.state}: there is no open episode to accept")
    return state


def accepted(
    rule: Rule,
    state: AlertState,
    level: float,
    by: str,
    now: datetime,
    histogram: NDArray[np.float64] | None = None,
) -> AlertState:
    """`state` resolved by `by` at `now`, with `level` (oriented: lower is worse) as the reference from here on; the
    statistic restarts at `now`, and the threshold stays the one frozen with the episode; `histogram` (effective
    events per score bin since the change) is the likelihood ratio's new baseline."""
    assert rule.baseline is not None
    assert rule.baseline.trailing is not None
    assert state.frozen is not None
    old = state.frozen.reference
    ref = Reference(level, old.slack, old.threshold, old.resolve_at)  # the level as measured: no margin
    if old.bank is not None:
        # The histogram since the change is the new baseline of the likelihood ratio; without one (a state stored
        # before bins were read), the old histogram stays and only the level moves.
        probs = distribution(histogram) if histogram is not None else old.bank.probs
        ref = dataclasses.replace(ref, bank=with_baseline(old.bank, probs, BIN_VALUES))
    frozen = Frozen(ref, now + rule.baseline.trailing, by, now)
    shown = level if rule.metric == "mean_score" else 1.0 - level
    note = (
        f"accepted by {by} at {now:%Y-%m-%d %H:%M}: the new level ({shown:.3g}) is the reference until "
        f"{frozen.until:%Y-%m-%d}"
    )
    return dataclasses.replace(state, state="resolved", resolved_at=now, frozen=frozen, note=note, last_eval_at=now)


def accept(
    data: RuleData,
    rule: Rule,
    states: Mapping[tuple[str, str], AlertState],
    wanted: Mapping[str, str],
    by: str,
    now: datetime,
) -> AlertState:
    """The accepted state of the one segment `wanted` names, its new level read from the window since the episode
    started; raises `UsageError` when there is no such episode or no judged event since it started."""
    state = choose(rule, states, wanted)
    if state.frozen is None or state.since is None:
        raise UsageError(f"{rule.name} on {_segment_text(state)} has no frozen reference yet: wait for the next round")
    windows = windows_for(rule, now)
    buckets: Buckets | None = data.buckets(rule, windows).get(state.segment)
    # The new level is the one since the change began (the CUSUM's estimate), or since the page if that is earlier.
    start = change_point(buckets, state.frozen.reference) if buckets is not None else None
    since_ms = min(round(state.since.timestamp() * 1000), start if start is not None else 2**62)
    recent = buckets.since(since_ms) if buckets is not None else None
    level = recent.mean() if recent is not None else None
    if level is None:
        raise UsageError(
            f"{rule.name} on {_segment_text(state)}: no judged event since the episode started, no level to accept"
        )
    return accepted(rule, state, level, by, now, recent.histogram() if recent is not None else None)


def _segment_text(state: AlertState) -> str:
    return " ".join(f"{k}={v}" for k, v in state.segment)


def _pairs(wanted: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in wanted.items())
