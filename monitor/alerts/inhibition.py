"""One page for one incident (pure): a rule that watches a part of another rule's traffic holds its new episodes
back while that rule fires on the same segment.

`follow_up_relevancy_drop` reads the follow-up turns of the segments `relevancy_drop` reads, so a regression of
every turn would page on both in the same round. A rule's `quiet_while` names the rules whose firing holds it: an
episode that would start firing stays pending instead, its note saying which rule holds it, and fires at a later
round if its evidence still says so once they have resolved. An episode already firing is never taken back, so a
regression confined to follow-ups that paged first keeps its page. Segments match on the keys both rules have."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Protocol, TypeVar

from monitor.alerts.evaluator import AlertState
from monitor.alerts.rules import Rule
from monitor.alerts.windows import SegmentKey


class Result(Protocol):
    """What the hold reads of a rule and segment after an evaluation (`engine.SegmentResult`, a dataclass)."""

    @property
    def rule(self) -> Rule:
        """The rule."""
        ...

    @property
    def previous(self) -> AlertState | None:
        """The segment's state before this round."""
        ...

    @property
    def state(self) -> AlertState:
        """The segment's new state."""
        ...


R = TypeVar("R", bound=Result)


def same_segment(a: SegmentKey, b: SegmentKey) -> bool:
    """Whether two rules' segments are the same traffic: equal on every key they share (and they share one)."""
    da, db = dict(a), dict(b)
    common = da.keys() & db.keys()
    return bool(common) and all(da[k] == db[k] for k in common)


def holding(result: Result, firing: Sequence[tuple[str, SegmentKey]]) -> list[str]:
    """The rules among `firing` ((rule, segment) pairs firing this round) that hold `result` back: named in its
    `quiet_while`, on the same segment, while its episode would start firing this round."""
    starts = result.state.state == "firing" and (result.previous is None or result.previous.state != "firing")
    if not starts or not result.rule.quiet_while:
        return []
    quiet = set(result.rule.quiet_while)
    return sorted({name for name, segment in firing if name in quiet and same_segment(segment, result.state.segment)})


def hold(results: Sequence[R]) -> list[R]:
    """`results` with every episode that would start firing beside a rule in its `quiet_while` held pending (no
    notification), its note naming the rule; the rest unchanged."""
    firing = [(r.rule.name, r.state.segment) for r in results if r.state.state == "firing"]
    out = []
    for r in results:
        by = holding(r, firing)
        if not by:
            out.append(r)
            continue
        note = "; ".join(p for p in (f"held while {', '.join(by)} fires on this segment", r.state.note) if p)
        state = dataclasses.replace(r.state, state="pending", fired_at=None, note=note)
        out.append(dataclasses.replace(r, state=state))  # type: ignore[type-var]
    return out
