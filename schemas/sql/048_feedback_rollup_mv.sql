-- relevancy-monitor schema, step 048: the materialized view feedback_rollup_1m_mv filling the rollup of step 047 on
-- every insert into `feedback`, by the minute of feedback_time and the segment. Ratings are mapped to 0..1 as
-- (value - 1) / (scale - 1) for rating_unit_sum; rating_bucket (1..5) gives the histogram; thumbs down are the
-- negative thumbs. A view counts the rows inserted: see step 047 on why a redelivered event counts once.
CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.feedback_rollup_1m_mv TO {database}.feedback_rollup_1m AS
SELECT
    toStartOfMinute(feedback_time) AS minute,
    app, model, prompt_version,
    toUInt64(count()) AS n_feedback,
    toUInt64(countIf(negative)) AS n_negative,
    toUInt64(countIf(kind = 'thumbs')) AS n_thumbs,
    toUInt64(countIf(kind = 'thumbs' AND negative)) AS n_thumbs_down,
    toUInt64(countIf(kind = 'rating')) AS n_ratings,
    sumIf((value - 1) / (scale - 1), kind = 'rating' AND scale > 1) AS rating_unit_sum,
    toUInt64(countIf(kind = 'rating' AND rating_bucket = 1)) AS n_rating_1,
    toUInt64(countIf(kind = 'rating' AND rating_bucket = 2)) AS n_rating_2,
    toUInt64(countIf(kind = 'rating' AND rating_bucket = 3)) AS n_rating_3,
    toUInt64(countIf(kind = 'rating' AND rating_bucket = 4)) AS n_rating_4,
    toUInt64(countIf(kind = 'rating' AND rating_bucket = 5)) AS n_rating_5,
    toUInt64(countIf(segment_source = 'unresolved')) AS n_unresolved
FROM {database}.feedback
GROUP BY minute, app, model, prompt_version
