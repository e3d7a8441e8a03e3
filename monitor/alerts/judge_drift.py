"""Judge drift or product regression, decided where on-call looks (pure).

A live score alert says the scores moved; the canary rules say whether the judge itself moved on a fixed labelled
set. When a canary rule is firing for a judge_id, every active live score alert keyed by that judge_id is the
judge's doing until shown otherwise: it carries the canaries' figures, its note starts with `SUSPECT`, and its
severity drops to `SUSPECT_SEVERITY` (a ticket to look at the judge, not a page about the product). The canary alert
itself keeps its own severity: that is the page."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from monitor.alerts.evaluator import AlertState
from monitor.alerts.observations import Observation
from monitor.alerts.rules import Rule

SUSPECT = "canaries moved too: suspect the judge"
SUSPECT_SEVERITY = "ticket"


class Result(Protocol):
    """What the attribution reads of a rule and segment after an evaluation (`engine.SegmentResult`, a dataclass)."""

    @property
    def rule(self) -> Rule:
        """The rule."""
        ...

    @property
    def state(self) -> AlertState:
        """The segment's new state."""
        ...

    @property
    def observation(self) -> Observation:
        """What the rule observed in the segment."""
        ...


R = TypeVar("R", bound=Result)


@dataclass(frozen=True, slots=True)
class CanaryFigure:
    """One firing canary rule of a judge: its metric now and in its baseline, over how many pairs."""

    rule: str
    metric: str
    value: float | None
    baseline: float | None
    n_current: int

    def text(self) -> str:
        """`canary_scores_lower: canary_mean_shift 0.52 vs 0.75 (107 pairs)`."""
        base = "" if self.baseline is None else f" vs {self.baseline:.3g}"
        value = "n/a" if self.value is None else f"{self.value:.3g}"
        return f"{self.rule}: {self.metric} {value}{base} ({self.n_current} pairs)"


@dataclass(frozen=True, slots=True)
class JudgeSuspect:
    """Why a live alert's judge is suspect: the canary rules firing for its judge_id."""

    judge_id: str
    canaries: tuple[CanaryFigure, ...]

    def text(self) -> str:
        """The line added to the live alert: `SUSPECT` and the canaries' figures."""
        return f"{SUSPECT} ({'; '.join(c.text() for c in self.canaries)})"


def suspects(results: Sequence[Result]) -> dict[str, JudgeSuspect]:
    """The judges whose canary rules are firing in `results`, by judge_id."""
    figures: dict[str, list[CanaryFigure]] = {}
    for r in results:
        judge_id = dict(r.state.segment).get("judge_id")
        if r.rule.spec.table != "canary" or r.state.state != "firing" or judge_id is None:
            continue
        o = r.observation
        figures.setdefault(judge_id, []).append(
            CanaryFigure(r.rule.name, r.rule.metric, o.value, o.baseline, o.n_current)
        )
    return {j: JudgeSuspect(j, tuple(sorted(f, key=lambda c: c.rule))) for j, f in figures.items()}


def attribute(results: Sequence[R]) -> list[R]:
    """`results` with every active live score alert of a suspect judge marked: the suspect attached, its severity
    `SUSPECT_SEVERITY`, its note starting with the canaries' figures. The rest unchanged."""
    by_judge = suspects(results)
    if not by_judge:
        return list(results)
    out = []
    for r in results:
        suspect = by_judge.get(dict(r.state.segment).get("judge_id", ""))
        if suspect is None or r.rule.spec.table != "scores" or not r.state.active:
            out.append(r)
            continue
        note = "; ".join(p for p in (suspect.text(), r.state.note) if p)
        state = dataclasses.replace(r.state, severity=SUSPECT_SEVERITY, note=note)
        out.append(dataclasses.replace(r, state=state, suspect=suspect))  # type: ignore[type-var]
    return out
