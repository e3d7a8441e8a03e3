"""A calibration run's statistics, and the report as one JSON-ready document (what `calibrate --json` prints;
a scheduled canary can store the same)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from monitor.calibration.agreement import GROUPS, Agreement, Bootstrap, Statistic, agreement, bucket
from monitor.calibration.labels import Scale
from monitor.calibration.run import CalibrationRun, PairOutcome
from monitor.judges.base import JudgeFailure

GROUP_BUCKETS = {"low": [0, 1], "mid": [2], "high": [3, 4]}


def compare(run: CalibrationRun, boot: Bootstrap, top: int = 10) -> Agreement:
    """The judge's scores against the labels, over the scored pairs only (failures are left out)."""
    scored = run.scored
    return agreement(
        [o.pair.label_unit for o in scored],
        [_score(o) for o in scored],
        [o.pair.category for o in scored],
        boot,
        top,
        tags=[o.pair.tags for o in scored],
    )


def document(run: CalibrationRun, result: Agreement, source: str, scale: Scale) -> dict[str, Any]:
    """The whole report as JSON-ready values: judge, labels, cost, failures, statistics and disagreements."""
    scored = run.scored
    spend = run.spend
    return {
        "judge": asdict(run.judge),
        "labels": {"source": source, "scale": scale, "pairs": len(run.outcomes)},
        "judged": len(scored),
        "failed": len(run.failed),
        "failures": [failure_dict(o) for o in run.failed],
        "cost": {
            "usd": spend.cost_usd,
            "calls": spend.calls,
            "tokens": spend.tokens,
            "input_tokens": spend.input_tokens,
            "output_tokens": spend.output_tokens,
            "cache_read_tokens": spend.cache_read_tokens,
            "cache_write_tokens": spend.cache_write_tokens,
        },
        "statistics": {
            "n": result.n,
            "failures_excluded": len(run.failed),
            "spearman_rho": statistic_dict(result.spearman),
            "kendall_tau_b": statistic_dict(result.kendall),
            "weighted_kappa_quadratic": statistic_dict(result.kappa),
            "mae": statistic_dict(result.mae),
            "bootstrap": {**asdict(result.bootstrap), "method": "percentile, pairs resampled with replacement"},
            "confusion": {
                "rows": "label",
                "columns": "judge",
                "groups": GROUP_BUCKETS,
                "counts": {
                    g: dict(zip(GROUPS, row, strict=True)) for g, row in zip(GROUPS, result.confusion, strict=True)
                },
            },
            "categories": [
                {
                    "category": c.category,
                    "n": c.n,
                    "mean_label": c.mean_reference,
                    "mean_score": c.mean_score,
                    "mae": c.mae,
                    "spearman_rho": statistic_dict(c.spearman),
                }
                for c in result.categories
            ],
            # Pairs with no tag are the row whose tag is null; the list is empty when no pair has a tag.
            "tags": [
                {
                    "tag": t.category,
                    "n": t.n,
                    "mean_label": t.mean_reference,
                    "mean_score": t.mean_score,
                    "mae": t.mae,
                    "spearman_rho": statistic_dict(t.spearman),
                }
                for t in result.tags
            ],
        },
        "disagreements": [disagreement_dict(scored[i]) for i in result.disagreements],
    }


def statistic_dict(s: Statistic) -> dict[str, Any]:
    """A statistic as JSON: value (null when undefined, with the reason), interval and resamples behind it."""
    return {
        "value": s.value,
        "ci": list(s.ci) if s.ci is not None else None,
        "undefined": s.undefined,
        "resamples_used": s.resamples_used,
    }


def pair_dict(o: PairOutcome) -> dict[str, Any]:
    """Which pair an outcome is about, as JSON."""
    return {"id": o.pair.id, "line": o.pair.line, "category": o.pair.category, "tags": list(o.pair.tags)}


def failure_dict(o: PairOutcome) -> dict[str, Any]:
    """A pair the judge could not score, with the reason code and message."""
    failure = o.verdict
    assert isinstance(failure, JudgeFailure)
    return {**pair_dict(o), "reason": failure.reason, "message": failure.message}


def disagreement_dict(o: PairOutcome) -> dict[str, Any]:
    """A scored pair with its texts, label, score and the judge's reasons."""
    j = o.judgement
    assert j is not None
    return {
        **pair_dict(o),
        # What the judge read before the question, so a reader can tell a follow-up's meaning.
        "context": [{"role": t.role, "text": t.text} for t in o.pair.context],
        "system": o.pair.system,
        "question": o.pair.question,
        "answer": o.pair.answer,
        "label": int(o.pair.label)
        if o.pair.label.is_integer()
        else o.pair.label,  # as written: rubric labels are whole
        "label_unit": o.pair.label_unit,
        "score": j.score,
        "raw_score": j.raw_score,
        "bucket": bucket(j.score),
        "gap": abs(o.pair.label_unit - j.score),
        "reasoning": j.reasoning,
        "statements": [
            {"statement": s, "verdict": v, "reason": r}
            for s, v, r in zip(j.statements, j.verdicts, j.verdict_reasons, strict=True)
        ],
    }


def _score(o: PairOutcome) -> float:
    j = o.judgement
    assert j is not None  # only called on scored outcomes
    return j.score
