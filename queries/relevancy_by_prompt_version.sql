-- Relevancy per app, prompt version and judge over the last 7 days. Compare prompt versions only within one
-- judge_id: another judge (method, model or judge prompt) scores on its own scale.
-- low_score_share is the share of answers scored below 0.5.
SELECT
    app,
    prompt_version,
    judge_id,
    any(judge) AS judge,
    count() AS answers,
    round(avg(score), 4) AS mean_score,
    round(stddevSamp(score) / sqrt(count()), 4) AS std_error,
    round(quantileExact(0.1)(score), 4) AS p10,
    round(countIf(score < 0.5) / count(), 4) AS low_score_share,
    min(event_time) AS first_seen,
    max(event_time) AS last_seen
FROM {table} FINAL
WHERE status = 'ok'
  AND event_time >= now() - INTERVAL 7 DAY
GROUP BY app, prompt_version, judge_id
ORDER BY app, judge_id, first_seen
