-- relevancy-monitor schema, step 035: the judge's canaries. `relevancy-monitor alerts run` re-scores a labelled set
-- (the shipped golden set, or ALERTS_CANARY_FILE) with the live judge configuration every ALERTS_CANARY_INTERVAL, to
-- tell a judge that drifted (a provider model update, a prompt edit) from a product that got worse.
--
-- One row per run and labelled pair. The run's figures (run_*: Spearman rho and quadratic-weighted kappa against the
-- labels, mean shift = mean(score) - mean(label / 4), error rate, calls and spend) are computed once the run ends and
-- repeated on each of its rows, so one insert writes a whole run (one partition: its rows share run_at) and no reader
-- sees a run's figures without its pairs or the reverse; readers take any(run_*) per run_id.
--
-- ReplacingMergeTree by written_at keyed on (judge_id, labels, run_id, pair_id): a run written again (a retried
-- insert) collapses to one row per pair. Read with FINAL. `labels` names the labelled set (file name and the first
-- 12 hex digits of its SHA-256): a changed set starts a history of its own instead of reading as judge drift. No
-- conversation text is stored (the pairs are in the labels file): pair_id, category and label say which pair.
CREATE TABLE IF NOT EXISTS {database}.canary_runs
(
    run_id              String,
    run_at              DateTime64(3, 'UTC'),
    judge_id            LowCardinality(String),
    judge               LowCardinality(String),
    judge_model         LowCardinality(String),
    labels              LowCardinality(String),
    pair_id             String,
    category            LowCardinality(String),
    label               Float64,
    label_unit          Float64,
    status              Enum8('ok' = 1, 'error' = 2),
    error               String,
    score               Nullable(Float64),
    raw_score           Nullable(Float64),
    latency_ms          UInt32,
    input_tokens        UInt32,
    output_tokens       UInt32,
    cache_read_tokens   UInt32,
    cache_write_tokens  UInt32,
    cost_usd            Nullable(Float64),
    run_pairs           UInt32,
    run_errors          UInt32,
    run_spearman        Nullable(Float64),
    run_kappa           Nullable(Float64),
    run_mean_shift      Nullable(Float64),
    run_error_rate      Float64,
    run_calls           UInt32,
    run_cost_usd        Nullable(Float64),
    run_seconds         Float64,
    written_at          DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(written_at)
PARTITION BY toYYYYMM(run_at)
ORDER BY (judge_id, labels, run_id, pair_id)
