-- Judge spend per day, judge and judge model over the last 30 days (UTC days). cost_usd is NULL for models
-- without a known price: priced_share says how much of the day's calls spend_usd covers. Cached verdicts cost 0.
SELECT
    toDate(event_time) AS day,
    judge,
    judge_model,
    count() AS rows,
    countIf(cached) AS cached,
    round(sum(cost_usd), 4) AS spend_usd,
    round(countIf(cost_usd IS NOT NULL) / count(), 3) AS priced_share,
    sum(input_tokens) AS input_tokens,
    sum(output_tokens) AS output_tokens,
    sum(cache_read_tokens) AS cache_read_tokens
FROM {table} FINAL
WHERE event_time >= today() - 30
GROUP BY day, judge, judge_model
ORDER BY day DESC, spend_usd DESC
