-- relevancy-monitor schema, step 036: which replay wrote a row. `relevancy-monitor replay` scores history (a time
-- range of the topics, or text already stored) and marks each row with its run id; the live consumer writes ''.
-- The replacing key stays (app, judge_id, event_id): a replay with the same judge collapses with its earlier rows
-- under FINAL, as a redelivery does, and a replay with another judge keeps its rows beside them. Alert rules leave
-- replayed rows out unless a rule includes them (`include_replays`), so history scored today cannot move a live
-- baseline. Rows written before this step read as ''.
ALTER TABLE {database}.{table}
    ADD COLUMN IF NOT EXISTS replay_run LowCardinality(String)
