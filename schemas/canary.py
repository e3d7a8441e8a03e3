"""The canary table (`sql/035_canary_runs.sql`): its name and its columns, in insert order."""

from __future__ import annotations

CANARY_TABLE = "canary_runs"

COLUMNS = (
    "run_id",
    "run_at",
    "judge_id",
    "judge",
    "judge_model",
    "labels",
    "pair_id",
    "category",
    "label",
    "label_unit",
    "status",
    "error",
    "score",
    "raw_score",
    "latency_ms",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
    "run_pairs",
    "run_errors",
    "run_spearman",
    "run_kappa",
    "run_mean_shift",
    "run_error_rate",
    "run_calls",
    "run_cost_usd",
    "run_seconds",
    "written_at",
)
