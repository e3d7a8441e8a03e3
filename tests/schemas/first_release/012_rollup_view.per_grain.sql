-- relevancy-monitor schema, step 012: relevancy_minutely and relevancy_hourly, plain columns per minute or hour and
-- segment over the rollups of step 010 (no -Merge functions needed), one view per grain with the same columns.
-- mean_score, low_score_share and the quantiles are over ok rows; error_rate over all rows; weighted_mean_score
-- weights each row by 1/sample_rate (traffic-weighted); events is distinct event ids (approximate), rows counts
-- redelivered duplicates too. Aggregate further with sums of the counts, never by averaging means. score_q and
-- lag_q are the quantile arrays the single columns come from.
--
-- Placeholders: {grain.view} is the view, {grain.rollup} the rollup it reads, {grain.column} the time column.
CREATE VIEW IF NOT EXISTS {database}.{grain.view} AS
SELECT
    {grain.column}, app, model, prompt_version, judge, judge_id,
    sum(n_rows) AS rows,
    uniqMerge(event_ids) AS events,
    sum(n_ok) AS ok_rows,
    sum(n_error) AS error_rows,
    sum(n_error) / nullIf(sum(n_rows), 0) AS error_rate,
    sum(score_sum) / nullIf(sum(n_ok), 0) AS mean_score,
    sqrt(greatest(sum(score_sq_sum) / nullIf(sum(n_ok), 0) - pow(sum(score_sum) / nullIf(sum(n_ok), 0), 2), 0)) AS score_stddev,
    sum(weighted_score_sum) / nullIf(sum(weight_sum), 0) AS weighted_mean_score,
    sum(weight_sum) AS estimated_traffic,
    sum(n_low_score) AS low_score_rows,
    sum(n_low_score) / nullIf(sum(n_ok), 0) AS low_score_share,
    if(sum(n_ok) > 0, min(score_lowest), NULL) AS score_min,
    quantilesTDigestMerge(0.1, 0.25, 0.5, 0.75, 0.9)(score_quantiles) AS score_q,
    if(sum(n_ok) > 0, score_q[1], NULL) AS p10,
    if(sum(n_ok) > 0, score_q[2], NULL) AS p25,
    if(sum(n_ok) > 0, score_q[3], NULL) AS median,
    if(sum(n_ok) > 0, score_q[4], NULL) AS p75,
    if(sum(n_ok) > 0, score_q[5], NULL) AS p90,
    sum(cost_usd_sum) AS cost_usd,
    sum(n_cost_known) AS cost_known_rows,
    sum(input_tokens_sum) AS input_tokens,
    sum(output_tokens_sum) AS output_tokens,
    sum(lag_sum_s) / nullIf(sum(n_rows), 0) AS lag_mean_s,
    quantilesTDigestMerge(0.5, 0.9, 0.99)(lag_quantiles) AS lag_q,
    lag_q[1] AS lag_p50_s,
    lag_q[2] AS lag_p90_s,
    lag_q[3] AS lag_p99_s,
    max(lag_highest_s) AS lag_max_s
FROM {database}.{grain.rollup}
GROUP BY {grain.column}, app, model, prompt_version, judge, judge_id
