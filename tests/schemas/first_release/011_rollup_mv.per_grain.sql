-- relevancy-monitor schema, step 011: the materialized views filling the rollups of step 010 on every insert
-- into the scores table, one per grain (relevancy_rollup_1m_mv, relevancy_rollup_1h_mv). Low scores are those
-- below 0.5. Lag is scored_at - event_time in seconds (never negative).
--
-- Placeholders: {grain.mv} is the view, {grain.rollup} the table it fills, {grain.bucket}(event_time) the start
-- of the row's minute or hour (toStartOfMinute, toStartOfHour), stored as {grain.column}.
CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.{grain.mv} TO {database}.{grain.rollup} AS
SELECT
    {grain.bucket}(event_time) AS {grain.column},
    app, model, prompt_version, judge, judge_id,
    toUInt64(count()) AS n_rows,
    toUInt64(countIf(status = 'ok')) AS n_ok,
    toUInt64(countIf(status = 'error')) AS n_error,
    toUInt64(countIf(status = 'ok' AND score < 0.5)) AS n_low_score,
    sum(ifNull(score, 0)) AS score_sum,
    sum(ifNull(score, 0) * ifNull(score, 0)) AS score_sq_sum,
    sum(if(status = 'ok', ifNull(score, 0) / sample_rate, 0)) AS weighted_score_sum,
    sum(if(status = 'ok', 1 / sample_rate, 0)) AS weight_sum,
    min(ifNull(score, inf)) AS score_lowest,
    sum(ifNull(cost_usd, 0)) AS cost_usd_sum,
    toUInt64(countIf(cost_usd IS NOT NULL)) AS n_cost_known,
    toUInt64(sum(input_tokens)) AS input_tokens_sum,
    toUInt64(sum(output_tokens)) AS output_tokens_sum,
    sum(greatest(dateDiff('millisecond', event_time, scored_at), 0) / 1000.0) AS lag_sum_s,
    max(greatest(dateDiff('millisecond', event_time, scored_at), 0) / 1000.0) AS lag_highest_s,
    uniqState(event_id) AS event_ids,
    quantilesTDigestState(0.1, 0.25, 0.5, 0.75, 0.9)(score) AS score_quantiles,
    quantilesTDigestState(0.5, 0.9, 0.99)(toFloat64(greatest(dateDiff('millisecond', event_time, scored_at), 0) / 1000.0)) AS lag_quantiles
FROM {database}.{table}
GROUP BY {grain.column}, app, model, prompt_version, judge, judge_id
