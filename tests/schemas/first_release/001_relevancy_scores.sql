-- relevancy-monitor schema, step 001: one row per judged event.
--
-- Deduplication: ReplacingMergeTree keyed on (app, judge_id, event_id). The same event scored twice by the
-- same judge collapses to one row (the higher `version` wins: ok rows outrank error rows, then the later
-- scoring), while a new judge_id (another method, model, prompt or parameter) keeps its own row beside it.
-- Collapsing happens at merge time: read with FINAL, or argMax(col, version) ... GROUP BY judge_id, event_id.
-- non_replicated_deduplication_window makes a retried insert with the same insert_deduplication_token a no-op.
CREATE TABLE IF NOT EXISTS {database}.{table}
(
    event_id            String,
    conversation_id     String,
    event_time          DateTime64(3, 'UTC'),
    app                 LowCardinality(String),
    model               LowCardinality(String),
    prompt_version      LowCardinality(String),
    metadata            Map(LowCardinality(String), String),
    judge               LowCardinality(String),
    judge_model         LowCardinality(String),
    judge_id            LowCardinality(String),
    status              Enum8('ok' = 1, 'error' = 2),
    error               String,
    score               Nullable(Float64),
    raw_score           Nullable(Float64),
    reasoning           String,
    statements          Array(String),
    verdicts            Array(LowCardinality(String)),
    verdict_reasons     Array(String),
    n_statements        UInt32,
    question            String,
    response            String,
    sample_rate         Float64,
    sample_rule         LowCardinality(String),
    cached              Bool,
    latency_ms          UInt32,
    input_tokens        UInt32,
    output_tokens       UInt32,
    cache_read_tokens   UInt32,
    cache_write_tokens  UInt32,
    cost_usd            Nullable(Float64),
    kafka_topic         LowCardinality(String),
    kafka_partition     Int32,
    kafka_offset        Int64,
    scored_at           DateTime64(3, 'UTC'),
    version             UInt64
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(event_time)
ORDER BY (app, judge_id, event_id)
SETTINGS non_replicated_deduplication_window = 1000
