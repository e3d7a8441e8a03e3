-- relevancy-monitor schema, step 047: users' feedback per segment and minute of feedback_time (issue 45), so the
-- feedback alert rules and pages never scan the rows of step 046. Filled by the materialized view
-- feedback_rollup_1m_mv (step 048) on every insert into `feedback`; only rows inserted after it exists are counted.
--
-- Counts: n_feedback every event, n_negative the negative ones (thumbs down, or a rating at or below the configured
-- level), n_thumbs and n_thumbs_down the thumbs, n_ratings the ratings with rating_unit_sum their sum mapped to 0..1
-- ((value - 1) / (scale - 1); mean = rating_unit_sum / n_ratings) and n_rating_1 .. n_rating_5 their histogram on
-- a 1..5 scale (rating_bucket), n_unresolved those whose answer's segment was found nowhere (they are also in the
-- other counts, under app = model = prompt_version = '').
--
-- SummingMergeTree adds up rows with the same key at merge time: always read with sum() ... GROUP BY. A materialized
-- view counts inserted rows, so a redelivered event must not be inserted twice: the writer skips feedback ids already
-- stored, and retries a batch with the same insert_deduplication_token and deduplicate_blocks_in_dependent_
-- materialized_views = 1, which (with the deduplication window below) drops the retried block here as well as in
-- `feedback` (ClickHouse 24.x and later derive the view's block id from the token, so equal counts from other
-- batches are not dropped).
CREATE TABLE IF NOT EXISTS {database}.feedback_rollup_1m
(
    minute           DateTime('UTC'),
    app              LowCardinality(String),
    model            LowCardinality(String),
    prompt_version   LowCardinality(String),
    n_feedback       UInt64,
    n_negative       UInt64,
    n_thumbs         UInt64,
    n_thumbs_down    UInt64,
    n_ratings        UInt64,
    rating_unit_sum  Float64,
    n_rating_1       UInt64,
    n_rating_2       UInt64,
    n_rating_3       UInt64,
    n_rating_4       UInt64,
    n_rating_5       UInt64,
    n_unresolved     UInt64
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(minute)
ORDER BY (minute, app, model, prompt_version)
SETTINGS non_replicated_deduplication_window = 1000
