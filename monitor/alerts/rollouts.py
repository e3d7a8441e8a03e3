"""Rollout rules, like a canary analysis: per segment, the newest prompt version (or model) against the one before
it, over the same window.

Pure. "Newest" is decided from the data: the version whose first event is latest, never the ordering of names
(v10 after v9, a re-released v12 after v13). The result is one segment per rollout, keyed by the newest version,
with the version before it as its baseline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from monitor.alerts.windows import BaselineSource, SegmentData, SegmentKey, VersionStats

if TYPE_CHECKING:
    from monitor.alerts.rules import Rule

_KEY_ORDER = ("app", "model", "prompt_version", "judge_id")


def pair_newest(rule: Rule, versions: Mapping[SegmentKey, Sequence[VersionStats]]) -> dict[SegmentKey, SegmentData]:
    """For each segment with a rollout in the window, the newest version (current) against the version before it
    (baseline); segments with a single version, or whose versions all started together, have none (nor has a
    rule without `rollout`)."""
    if rule.rollout is None:
        return {}
    out: dict[SegmentKey, SegmentData] = {}
    for scope, found in versions.items():
        pair = newest_and_previous(rule, found)
        if pair is None:
            continue
        newest, previous = pair
        key = _with_field(scope, rule.rollout.of, newest.name)
        source = BaselineSource("previous_version", (rule.rollout.of,), (newest.name,), (previous.name,), scope)
        out[key] = SegmentData(newest.current, previous.current, newest.judge or previous.judge, source)
    return out


def newest_and_previous(rule: Rule, found: Sequence[VersionStats]) -> tuple[VersionStats, VersionStats] | None:
    """The version whose first event is latest, and the one before it: the latest to start at least
    `rollout.min_gap` earlier, preferring one with `min_baseline_events` in the window (so that an aborted version
    that lived for minutes does not hide the one it replaced). None when there is no such pair."""
    if rule.rollout is None or len(found) < 2:
        return None
    # Ties on the first event are broken by size, then name, only so that the outcome is deterministic.
    ordered = sorted(found, key=lambda v: (v.first_seen, -v.current.ok, v.name))
    newest = ordered[-1]
    earlier = [v for v in ordered[:-1] if v.first_seen <= newest.first_seen - rule.rollout.min_gap]
    if not earlier:
        return None
    enough = [v for v in earlier if v.current.ok >= rule.min_baseline_events]
    return newest, (enough or earlier)[-1]


def without_rollout(rule: Rule, versions: Mapping[SegmentKey, Sequence[VersionStats]]) -> tuple[int, int]:
    """Of the segments with no rollout in the window: how many have a single version, and how many have versions
    that all started within `rollout.min_gap` of the newest (both 0 for a rule without `rollout`)."""
    single = together = 0
    for found in versions.values():
        if len(found) < 2:
            single += 1
        elif newest_and_previous(rule, found) is None:
            together += 1
    return single, together


def _with_field(scope: SegmentKey, field: str, value: str) -> SegmentKey:
    fields = {**dict(scope), field: value}
    return tuple((k, fields[k]) for k in _KEY_ORDER if k in fields)
