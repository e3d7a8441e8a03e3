-- Statement-level padding over the last 7 days (judges that split answers into statements, e.g. `statements`):
-- each statement of an answer gets a verdict (yes = relevant, no = irrelevant, idk = unclear). Answers padded
-- with filler have many `no` statements. Per app and prompt version: statements per answer, the share of
-- statements judged irrelevant, and the share of answers where at least a third of the statements are.
SELECT
    app,
    prompt_version,
    judge_id,
    uniqExact(event_id) AS answers,
    count() AS statements,
    round(count() / uniqExact(event_id), 2) AS statements_per_answer,
    round(countIf(verdict = 'no') / count(), 4) AS irrelevant_share,
    round(countIf(verdict = 'idk') / count(), 4) AS unclear_share,
    round(uniqExactIf(event_id, padded) / uniqExact(event_id), 4) AS padded_answer_share
FROM
(
    SELECT
        app, prompt_version, judge_id, event_id,
        arrayJoin(verdicts) AS verdict,
        countEqual(verdicts, 'no') * 3 >= length(verdicts) AS padded
    FROM {table} FINAL
    WHERE status = 'ok'
      AND length(verdicts) > 0
      AND event_time >= now() - INTERVAL 7 DAY
)
GROUP BY app, prompt_version, judge_id
ORDER BY irrelevant_share DESC
