-- relevancy-monitor schema, step 038: the Message Batches a replay sent (`replay --batch-api`), so that an
-- interrupted replay collects what it already paid for instead of sending it again. A batch is `submitted` until its
-- rows are written, then `written`. Its requests' custom ids are derived from the judge id and the event id, so a
-- resumed replay matches each result to its event by reading the range again. ReplacingMergeTree by updated_at keyed
-- on (judge_id, batch_id): read with FINAL.
CREATE TABLE IF NOT EXISTS {database}.replay_batches
(
    judge_id        LowCardinality(String),
    batch_id        String,
    run_id          String,
    scores_table    LowCardinality(String),
    requests        UInt32,
    state           LowCardinality(String),
    submitted_at    DateTime64(3, 'UTC'),
    updated_at      DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY (judge_id, batch_id)
