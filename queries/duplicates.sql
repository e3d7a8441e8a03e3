-- Rows written more than once for the same (app, judge_id, event_id) and not yet collapsed by a merge, per day
-- over the last 7 days: redelivered events. Queries with FINAL count them once; the rollup tables
-- (relevancy_minutely, relevancy_hourly) count them twice.
SELECT
    toDate(event_time) AS day,
    app,
    count() AS rows,
    uniqExact(judge_id, event_id) AS distinct_events,
    count() - uniqExact(judge_id, event_id) AS duplicate_rows
FROM {table}
WHERE event_time >= today() - 7
GROUP BY day, app
ORDER BY day DESC, app
