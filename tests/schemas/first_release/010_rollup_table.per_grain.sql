-- relevancy-monitor schema, step 010: the rollups of the scores table, one per grain (schemas/ddl.py renders this
-- file once per grain): relevancy_rollup_1m per minute and relevancy_rollup_1h per hour of event_time, with the
-- same columns; filled by the materialized views of step 011.
--
-- One row per (minute or hour of event_time, app, model, prompt_version, judge, judge_id) after merges; read them
-- through the views relevancy_minutely and relevancy_hourly (step 012), which need no knowledge of -State/-Merge
-- functions.
-- Materialized views fire on inserted blocks: a redelivered event written twice is counted twice here (the
-- scores table collapses it, these sums do not), so `rows` can exceed `events` (distinct event ids, uniq).
-- Alert rules read the scores table with FINAL instead; the rollups are for dashboards and history.
-- Only rows inserted after this table exists are counted (a materialized view does not backfill).
--
-- Placeholders: {grain.rollup} is the table (relevancy_rollup_1m, relevancy_rollup_1h), {grain.column} its time
-- column (minute, hour).
CREATE TABLE IF NOT EXISTS {database}.{grain.rollup}
(
    {grain.column}     DateTime('UTC'),
    app                LowCardinality(String),
    model              LowCardinality(String),
    prompt_version     LowCardinality(String),
    judge              LowCardinality(String),
    judge_id           LowCardinality(String),
    n_rows             SimpleAggregateFunction(sum, UInt64),
    n_ok               SimpleAggregateFunction(sum, UInt64),
    n_error            SimpleAggregateFunction(sum, UInt64),
    n_low_score        SimpleAggregateFunction(sum, UInt64),
    score_sum          SimpleAggregateFunction(sum, Float64),
    score_sq_sum       SimpleAggregateFunction(sum, Float64),
    weighted_score_sum SimpleAggregateFunction(sum, Float64),
    weight_sum         SimpleAggregateFunction(sum, Float64),
    score_lowest       SimpleAggregateFunction(min, Float64),
    cost_usd_sum       SimpleAggregateFunction(sum, Float64),
    n_cost_known       SimpleAggregateFunction(sum, UInt64),
    input_tokens_sum   SimpleAggregateFunction(sum, UInt64),
    output_tokens_sum  SimpleAggregateFunction(sum, UInt64),
    lag_sum_s          SimpleAggregateFunction(sum, Float64),
    lag_highest_s      SimpleAggregateFunction(max, Float64),
    event_ids          AggregateFunction(uniq, String),
    score_quantiles    AggregateFunction(quantilesTDigest(0.1, 0.25, 0.5, 0.75, 0.9), Nullable(Float64)),
    lag_quantiles      AggregateFunction(quantilesTDigest(0.5, 0.9, 0.99), Float64)
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM({grain.column})
ORDER BY ({grain.column}, app, model, prompt_version, judge_id, judge)
