-- relevancy-monitor schema, step 043: the conversation around the judged pair (issue 43). The judge reads a bounded
-- window of the earlier messages and the assistant's system instructions besides the judged question and answer.
-- `turn` is the judged question's index among the conversation's user messages (0: the first); `context_turns` how
-- many earlier messages the judge read (after MONITOR_JUDGE_CONTEXT_TURNS and MONITOR_JUDGE_CONTEXT_MAX_CHARS cut
-- them). `context` (a JSON array of {"role": ..., "text": ...}, oldest first) and `system_instructions` are stored as
-- the question is (MONITOR_STORE_TEXT: redacted, full, or '' under none); `context_digest` is the hex SHA-256 of what
-- the judge read, redacted, kept under every policy ('' when it read no context). Rows written before this step read
-- as turn 0 with no context.
ALTER TABLE {database}.{table}
    ADD COLUMN IF NOT EXISTS turn UInt32,
    ADD COLUMN IF NOT EXISTS context_turns UInt16,
    ADD COLUMN IF NOT EXISTS context String,
    ADD COLUMN IF NOT EXISTS system_instructions String,
    ADD COLUMN IF NOT EXISTS context_digest String
