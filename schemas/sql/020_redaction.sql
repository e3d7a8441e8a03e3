-- relevancy-monitor schema, step 020: what redaction removed from each row's text before the judge and the store
-- saw it: `redactions` maps an entity kind (EMAIL, CARD, ...) to the items replaced by its placeholder, `redactor`
-- names the recognizers and their version ('' when MONITOR_REDACT=false, so "nothing found" and "not checked"
-- differ). Rows written before this step read as an empty map and ''.
ALTER TABLE {database}.{table}
    ADD COLUMN IF NOT EXISTS redactions Map(LowCardinality(String), UInt32),
    ADD COLUMN IF NOT EXISTS redactor LowCardinality(String)
