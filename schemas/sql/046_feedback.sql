-- relevancy-monitor schema, step 046: users' own verdicts on answers (issue 45): one row per feedback event (a thumbs
-- up or down, or a rating), with the segment of the answer it refers to, so it counts in that segment whether the
-- answer was judged, skipped by sampling, or not found at all.
--
-- The answer: `event_id` is the answer's event id ('' when the feedback named it by conversation and turn or by span
-- and it was not found); `conversation_id`, `turn` (-1: unknown), `trace_id` and `span_id` are as the feedback named
-- it. `answer_time` is when the answer was sent, when known. `segment_source` says where app, model and
-- prompt_version came from: the feedback event itself, the answer's scored row (`relevancy_scores`), the answer's
-- record read back from Kafka, or nowhere (`unresolved`: app = model = prompt_version = '').
-- The verdict: `kind` thumbs (value 1 up, 0 down; rating_bucket 0) or rating (value on 1..scale; rating_bucket the
-- nearest point of 1..5); `negative` is the decoder's reading (thumbs down, or a rating at or below the configured
-- level). `comment` is redacted like any other text before it is stored. `kafka_*` is the feedback record's position.
--
-- Deduplication: ReplacingMergeTree keyed on feedback_id; a later write of the same feedback (higher `version`, the
-- time it was received in ms) replaces the earlier one under FINAL. The writer skips ids already stored, so a
-- redelivered event is neither stored twice nor counted twice by the rollup of step 047 (which sums inserted rows);
-- non_replicated_deduplication_window makes a retried insert with the same insert_deduplication_token a no-op.
-- Read with FINAL.
CREATE TABLE IF NOT EXISTS {database}.feedback
(
    feedback_id      String,
    event_id         String,
    conversation_id  String,
    turn             Int32,
    trace_id         String,
    span_id          String,
    feedback_time    DateTime64(3, 'UTC'),
    answer_time      Nullable(DateTime64(3, 'UTC')),
    app              LowCardinality(String),
    model            LowCardinality(String),
    prompt_version   LowCardinality(String),
    segment_source   Enum8('feedback' = 1, 'scored' = 2, 'kafka' = 3, 'unresolved' = 4),
    kind             Enum8('thumbs' = 1, 'rating' = 2),
    value            Float64,
    scale            UInt8,
    negative         Bool,
    rating_bucket    UInt8,
    comment          String,
    reason           LowCardinality(String),
    source           LowCardinality(String),
    kafka_topic      LowCardinality(String),
    kafka_partition  Int32,
    kafka_offset     Int64,
    received_at      DateTime64(3, 'UTC'),
    version          UInt64
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(feedback_time)
ORDER BY feedback_id
SETTINGS non_replicated_deduplication_window = 1000
