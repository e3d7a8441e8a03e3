-- relevancy-monitor schema, step 042: the certainty of a probability-weighted score. With MONITOR_JUDGE_SCORE=expected
-- the rubric's score is the expected level over the provider's log-probabilities of its 0..4 tokens (raw_score keeps
-- the integer level the model wrote), and `score_confidence` is one minus the normalised entropy of those
-- probabilities: 1 when one level holds all the mass, 0 when the five are equally likely. NULL for every other score
-- (and for rows written before this step).
ALTER TABLE {database}.{table}
    ADD COLUMN IF NOT EXISTS score_confidence Nullable(Float32)
