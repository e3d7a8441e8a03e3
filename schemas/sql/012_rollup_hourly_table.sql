-- relevancy-monitor schema, step 012: per-hour rollup, the same columns as relevancy_rollup_1m (step 010) by
-- hour of event_time; filled by the view in 013, read through relevancy_hourly (015). Same duplicate caveat.
CREATE TABLE IF NOT EXISTS {database}.relevancy_rollup_1h
(
    hour               DateTime('UTC'),
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
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, app, model, prompt_version, judge_id, judge)
