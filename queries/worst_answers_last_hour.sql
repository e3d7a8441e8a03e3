-- The five lowest-scored answers of the last hour per app, worst first, with the judge's reasoning.
-- Columns: app, prompt_version, judge_id, score, event_time, question, response, reasoning, event_id.
SELECT
    app,
    prompt_version,
    judge_id,
    round(score, 3) AS score,
    event_time,
    substring(question, 1, 200) AS question,
    substring(response, 1, 300) AS response,
    substring(reasoning, 1, 300) AS reasoning,
    event_id
FROM {table} FINAL
WHERE status = 'ok'
  AND event_time >= now() - INTERVAL 1 HOUR
ORDER BY app, score ASC, event_time DESC
LIMIT 5 BY app
