-- Mean relevancy as users experienced it over the last 24 hours: each judged answer stands for 1/sample_rate
-- answers, so segments sampled at different rates are weighted by their real traffic.
-- estimated_events is the traffic the judged rows represent.
SELECT
    app,
    judge_id,
    count() AS judged,
    round(sum(1 / sample_rate)) AS estimated_events,
    round(avg(score), 4) AS plain_mean,
    round(sum(score / sample_rate) / sum(1 / sample_rate), 4) AS traffic_weighted_mean
FROM {table} FINAL
WHERE status = 'ok'
  AND event_time >= now() - INTERVAL 24 HOUR
GROUP BY app, judge_id
ORDER BY app, judge_id
