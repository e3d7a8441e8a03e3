-- relevancy-monitor schema, step 039: what `relevancy-monitor forget` erased, so that nothing scores it again. A replay
-- reads the topics' history, which still holds an erased person's events until the topic's own retention drops them:
-- it skips every event whose conversation id or event id is here. Only a SHA-256 of each id is kept (hex), never the
-- id, so the list says whether an id was erased without naming it. ReplacingMergeTree keyed on (kind, id_sha256).
CREATE TABLE IF NOT EXISTS {database}.erased_ids
(
    kind            LowCardinality(String),
    id_sha256       FixedString(64),
    erased_at       DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(erased_at)
ORDER BY (kind, id_sha256)
