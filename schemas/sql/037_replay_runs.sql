-- relevancy-monitor schema, step 037: one row per replay run (`relevancy-monitor replay`), rewritten as it goes:
-- what it scores (source, range, filter, judge), what it estimated and may spend, and what it did. A run that was
-- interrupted or stopped at its cap says so here, and `replay --resume` reads which judge and range it had.
-- ReplacingMergeTree by updated_at keyed on run_id: read with FINAL for the latest state of each run.
CREATE TABLE IF NOT EXISTS {database}.replay_runs
(
    run_id          String,
    scores_table    LowCardinality(String),
    source          LowCardinality(String),
    since           DateTime64(3, 'UTC'),
    until           DateTime64(3, 'UTC'),
    filter          String,
    topics          Array(String),
    judge           LowCardinality(String),
    judge_id        LowCardinality(String),
    batch_api       Bool,
    status          LowCardinality(String),
    estimate_usd    Nullable(Float64),
    max_usd         Nullable(Float64),
    spent_usd       Float64,
    events          UInt64,
    scored          UInt64,
    skipped         UInt64,
    failed          UInt64,
    started_at      DateTime64(3, 'UTC'),
    updated_at      DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY run_id
