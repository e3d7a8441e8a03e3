-- The ten conversations of the last 7 days whose turns the judge found least often relevant (a score of at least
-- 0.5), among those with two or more judged turns, with their lowest-scoring turn (0: the first question) and when.
-- Reads the view relevancy_conversations (migration 044), which counts each event once (FINAL) and gives a
-- conversation whose every judge call failed judged_turns = 0 and a NULL share: it is not ranked, never "relevant".
-- Columns: app, conversation_id, judge_id, judged_turns, relevant_share, lowest_turn, lowest_score,
-- lowest_event_time, first_event_time, last_event_time, error_rows.
SELECT
    app,
    conversation_id,
    judge_id,
    judged_turns,
    round(relevant_share, 3) AS relevant_share,
    lowest_turn,
    round(lowest_score, 3) AS lowest_score,
    lowest_event_time,
    first_event_time,
    last_event_time,
    error_rows
FROM relevancy_conversations
WHERE judged_turns >= 2
  AND last_event_time >= now() - INTERVAL 7 DAY
ORDER BY relevant_share ASC, lowest_score ASC, last_event_time DESC
LIMIT 10
