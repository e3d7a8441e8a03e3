-- relevancy-monitor schema, step 002: traffic per segment and minute (judged or not), for volume and coverage.
-- SummingMergeTree adds up rows with the same key at merge time: always read with sum() ... GROUP BY.
-- Approximate across crashes (an unflushed minute is lost, a redelivered event counts again).
CREATE TABLE IF NOT EXISTS {database}.traffic_counts
(
    minute          DateTime('UTC'),
    app             LowCardinality(String),
    model           LowCardinality(String),
    prompt_version  LowCardinality(String),
    consumed        UInt64,
    sampled         UInt64,
    not_sampled     UInt64,
    dead_lettered   UInt64
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(minute)
ORDER BY (minute, app, model, prompt_version)
