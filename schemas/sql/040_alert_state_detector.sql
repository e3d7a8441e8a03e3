-- relevancy-monitor schema, step 040: a detector rule's frozen reference. When a sequential detector's episode
-- starts, the level it compares with (mean, slack, threshold) is frozen, so that the regression never becomes its
-- own baseline, and kept until the episode has left the baseline; `alerts accept` replaces it with the new level
-- and records who and when. JSON ('' for every other rule, and for rows written before this step).
ALTER TABLE {database}.alert_state
    ADD COLUMN IF NOT EXISTS detector String
