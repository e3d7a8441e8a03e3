"""What a canary run is and what a round did with it: plain data, no statistics, SQL or judging, so the alert
engine can name these types without loading any of that."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class RunFigures:
    """A run's agreement with the labels, over its scored pairs: Spearman ρ and quadratic-weighted κ (None when
    undefined: fewer than 3 scored pairs, or one side without spread), the mean shift mean(score) − mean(label/4)
    (None without a scored pair), and the share of pairs the judge could not score."""

    pairs: int
    errors: int
    spearman: float | None
    kappa: float | None
    mean_shift: float | None

    @property
    def scored(self) -> int:
        """Pairs with a score."""
        return self.pairs - self.errors

    @property
    def error_rate(self) -> float:
        """Errors over all pairs (0 for an empty set)."""
        return self.errors / self.pairs if self.pairs else 0.0


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One finished run, as logs, `alerts run --once` and the metrics tell it: ids, figures and what it cost
    (`cost_usd` None when some call's model has no price)."""

    run_id: str
    run_at: datetime
    judge_id: str
    judge: str
    labels: str
    figures: RunFigures
    calls: int
    cost_usd: float | None
    seconds: float
    heuristic: bool = False  # the judge calls no API (lexical): it costs nothing


@dataclass(frozen=True, slots=True)
class CanaryTick:
    """What the canary did in one round of the evaluator: `written` a finished run (this round), `started` a new one,
    `running` one still judging (in the background), `failed` why a run or its write failed (it is retried: a write
    next round, a run at its next due time), and `next_due` when the next run starts (None: at the next round)."""

    written: RunSummary | None = None
    started: bool = False
    running: bool = False
    failed: str = ""
    next_due: datetime | None = None

    def log_fields(self) -> dict[str, object]:
        """The round's canary in a few fields for the round's log line (ids and figures, never text)."""
        out: dict[str, object] = {"started": self.started, "running": self.running}
        if self.written is not None:
            f = self.written.figures
            out["written"] = {
                "run_id": self.written.run_id,
                "pairs": f.pairs,
                "errors": f.errors,
                "spearman": f.spearman,
                "kappa": f.kappa,
            }
        if self.failed:
            out["failed"] = self.failed
        return out
