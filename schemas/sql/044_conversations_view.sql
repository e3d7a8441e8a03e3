-- relevancy-monitor schema, step 044: relevancy_conversations, one row per (app, conversation_id, judge_id): how the
-- judge found a whole conversation, turn by turn (issue 43).
--
-- Read from the scores table with FINAL, so a redelivered or replayed event counts once, as its latest scoring (the
-- replacing key is (app, judge_id, event_id); ok rows outrank error rows). `judged_turns` counts the ok rows,
-- `relevant_turns` those scoring at least 0.5 (the threshold below which the rollups and the report call a score
-- low), `relevant_share` their share. A conversation with no valid verdict (only error rows) has judged_turns = 0
-- and NULL relevant_share, lowest_score, lowest_turn and lowest_event_time: it scores nothing, never 1.0.
-- `lowest_turn` is the turn index (0: the first user question) of the lowest-scoring turn, the earliest of equal
-- ones, with its score and event time; first_event_time and last_event_time span every row, error rows included.
-- Rows written before step 043 all read as turn 0.
CREATE VIEW IF NOT EXISTS {database}.relevancy_conversations AS
SELECT
    app, conversation_id, judge_id,
    any(judge) AS judge,
    count() AS rows,
    countIf(status = 'error') AS error_rows,
    countIf(status = 'ok') AS judged_turns,
    countIf(status = 'ok' AND score >= 0.5) AS relevant_turns,
    if(judged_turns > 0, relevant_turns / judged_turns, NULL) AS relevant_share,
    if(judged_turns > 0, minIf(score, status = 'ok'), NULL) AS lowest_score,
    if(judged_turns > 0, argMinIf(turn, (assumeNotNull(score), event_time, turn), status = 'ok'), NULL) AS lowest_turn,
    if(judged_turns > 0, argMinIf(event_time, (assumeNotNull(score), event_time, turn), status = 'ok'), NULL)
        AS lowest_event_time,
    min(event_time) AS first_event_time,
    max(event_time) AS last_event_time
FROM {database}.{table} FINAL
GROUP BY app, conversation_id, judge_id
