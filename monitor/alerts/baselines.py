"""Baselines that survive a rollout: a new segment (a new prompt version or model) is compared with the history of
its nearest parent under the same judge, from before it existed, instead of deciding nothing or, within the
hour, taking its own regressed history as the baseline.

Pure: it works on the per-segment data a rule's query returned. A parent's baseline is the sum of the baselines
of its older segments (the same app and judge_id, the earlier prompt versions and/or models), which is why only
metrics made of counts and sums (`MetricSpec.poolable`) can borrow one. A judge_id is never dropped: a new judge
starts a baseline of its own, so a judge change never reads as a product regression; segments that started
together (an A/B split, or all of them after a judge change) are not each other's history either."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from monitor.alerts.observations import READERS
from monitor.alerts.windows import BaselineSource, SegmentData, SegmentKey, WeightedSums, WindowStats

if TYPE_CHECKING:
    from monitor.alerts.rules import Rule

# Nearest parent first: the same model's other prompt versions, then the same prompt version on other models,
# then the app's other segments. Only the fields a rule segments by can be dropped.
PARENT_LEVELS: tuple[tuple[str, ...], ...] = (("prompt_version",), ("model",), ("model", "prompt_version"))

# A segment whose history in the baseline spans less than this share of a sibling's started later than it (inside
# the baseline window): the sibling is earlier history. Until the new segment has been around about as long as
# its baseline, it is judged against that earlier history; with its own, a regression shipped with a new
# version would become its own baseline within the hour. The margin keeps a sparse segment whose first row came
# a little after its sibling's from counting as new.
YOUNG_SHARE = 0.9


def with_parent_baselines(rule: Rule, data: Mapping[SegmentKey, SegmentData]) -> dict[SegmentKey, SegmentData]:
    """`data` with the baseline of each new segment replaced by its nearest parent's earlier history, where that
    has `min_baseline_events`; other segments, and rules whose metric cannot pool, are left as they are."""
    levels = [level for level in PARENT_LEVELS if set(level) <= set(rule.segment_by)]
    if not (rule.spec.poolable and (rule.condition.uses_baseline or rule.detector is not None) and levels):
        return dict(data)
    families = {level: _families(data, level) for level in levels}
    return {key: _chosen(rule, key, seg, families) for key, seg in data.items()}


Family = list[tuple[SegmentKey, SegmentData]]


def _families(data: Mapping[SegmentKey, SegmentData], dropped: tuple[str, ...]) -> dict[SegmentKey, Family]:
    """The segments grouped by their parent (the key without the `dropped` fields; judge_id is always kept)."""
    out: dict[SegmentKey, Family] = defaultdict(list)
    for key, seg in data.items():
        out[_parent_key(key, dropped)].append((key, seg))
    return out


def _parent_key(key: SegmentKey, dropped: tuple[str, ...]) -> SegmentKey:
    return tuple((k, v) for k, v in key if k not in dropped)


def _chosen(
    rule: Rule, key: SegmentKey, seg: SegmentData, families: Mapping[tuple[str, ...], Mapping[SegmentKey, Family]]
) -> SegmentData:
    own = seg.baseline
    for dropped, family in families.items():  # nearest parent first
        scope = _parent_key(key, dropped)
        earlier = [(k, d) for k, d in family[scope] if k != key and _older(d.baseline, own)]
        parent = pool([d.baseline for _, d in earlier])
        if baseline_events(rule, seg, parent) < rule.min_baseline_events:
            continue
        own_n = baseline_events(rule, seg, own)
        if own_n < rule.min_baseline_events:
            reason = f"{own_n} < {rule.min_baseline_events} baseline events of its own"
        else:
            reason = f"its own history spans {own.seconds / parent.seconds:.0%} of the baseline"
        source = BaselineSource(
            kind="parent",
            fields=dropped,
            segment_values=tuple(dict(key)[f] for f in dropped),
            baseline_values=_members(rule, seg, earlier, dropped),
            scope=scope,
            reason=reason,
        )
        return dataclasses.replace(seg, baseline=parent, baseline_from=source)
    return seg


def _older(sibling: WindowStats, own: WindowStats) -> bool:
    """Whether `sibling`'s history in the baseline starts clearly before `own`'s (see YOUNG_SHARE)."""
    return sibling.rows > 0 and own.seconds < YOUNG_SHARE * sibling.seconds


def baseline_events(rule: Rule, seg: SegmentData, baseline: WindowStats) -> int:
    """The baseline's sample size as the rule's metric counts it (ok rows, or all rows for error rates)."""
    return READERS[rule.metric](rule, SegmentData(seg.current, baseline, seg.judge), None, False).n_baseline


def _members(
    rule: Rule, seg: SegmentData, siblings: Sequence[tuple[SegmentKey, SegmentData]], dropped: tuple[str, ...]
) -> tuple[str, ...]:
    """The siblings' values of the dropped fields, most baseline events first."""
    ranked = sorted(siblings, key=lambda kd: -baseline_events(rule, seg, kd[1].baseline))
    return tuple("/".join(dict(k)[f] for f in dropped) for k, _ in ranked)


def pool(stats: Sequence[WindowStats]) -> WindowStats:
    """Several segments' windows as one: counts, costs and weighted sums add; quantiles do not pool (None). Its
    length is the longest exposure among them (the earliest first row, for a trailing baseline)."""
    return WindowStats(
        seconds=max((s.seconds for s in stats), default=0.0),
        rows=sum(s.rows for s in stats),
        ok=sum(s.ok for s in stats),
        errors=sum(s.errors for s in stats),
        invalid=sum(s.invalid for s in stats),
        weighted=WeightedSums(
            weight=sum(s.weighted.weight for s in stats),
            weight_sq=sum(s.weighted.weight_sq for s in stats),
            score=sum(s.weighted.score for s in stats),
            score_sq=sum(s.weighted.score_sq for s in stats),
            low=sum(s.weighted.low for s in stats),
            bins=_added_bins([s.weighted.bins for s in stats]),
        ),
        cost=sum(s.cost for s in stats),
        events=sum(s.events for s in stats),
    )


def _added_bins(parts: Sequence[tuple[float, ...]]) -> tuple[float, ...]:
    present = [p for p in parts if p]
    return tuple(sum(col) for col in zip(*present, strict=True)) if present else ()
