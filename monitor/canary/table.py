"""A canary run as rows of the canary table (`schemas.canary`, `schemas/sql/035_canary_runs.sql`); pure."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from monitor.judges.base import JudgeFailure

if TYPE_CHECKING:
    from monitor.canary.run import CanaryRun

_U32 = 2**32 - 1


def _u32(n: float) -> int:
    return max(0, min(_U32, int(n)))


def canary_rows(run: CanaryRun, written_at: datetime) -> list[tuple[Any, ...]]:
    """One row per pair of `run`, in `COLUMNS` order, the run's figures on each."""
    f, spend, info = run.figures, run.spend, run.judge
    per_run = (
        f.pairs,
        f.errors,
        f.spearman,
        f.kappa,
        f.mean_shift,
        f.error_rate,
        _u32(spend.calls),
        spend.cost_usd,
        run.seconds,
        written_at,
    )
    rows = []
    for j in run.pairs:
        verdict = j.verdict
        usage = verdict.usage
        judgement = j.judgement
        error = verdict.message if isinstance(verdict, JudgeFailure) else ""
        rows.append(
            (
                run.run_id,
                run.run_at,
                info.judge_id,
                info.method,
                info.model,
                run.labels,
                j.pair.key,
                j.pair.category or "",
                j.pair.label,
                j.pair.label_unit,
                "ok" if judgement is not None else "error",
                error,
                judgement.score if judgement is not None else None,
                judgement.raw_score if judgement is not None else None,
                _u32(round(j.latency_s * 1000)),
                _u32(usage.input_tokens),
                _u32(usage.output_tokens),
                _u32(usage.cache_read_tokens),
                _u32(usage.cache_write_tokens),
                usage.cost_usd,
                *per_run,
            )
        )
    return rows
