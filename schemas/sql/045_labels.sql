-- relevancy-monitor schema, step 045: reviewers' labels of judged answers (issue 44: the review queue of
-- `relevancy-monitor ui`), on the rubric's 0..4 scale, to measure each judge against the people who know the product.
--
-- ReplacingMergeTree by labelled_at keyed on (event_id, reviewer): a reviewer who labels an item again replaces their
-- earlier label (read with FINAL), while a second reviewer's label of the same item stays beside it, for
-- human-against-human agreement. `route` says which queue route picked the item (control: a uniform random slice of
-- judged rows; disagree, borderline, firing: targeted) and `inclusion_probability` the chance it had of being picked
-- at that draw, so agreement on the control slice is an unbiased estimate and the targeted routes can be reweighted.
-- `judge_id` and `judge_score` are the routing (primary) judge's as they were when the label was written, since a
-- replay may score the event again later; app, model, prompt_version, turn and event_time are copied from that scored
-- row so the labels can be read and sliced without joining the scores table. No conversation text is stored here.
CREATE TABLE IF NOT EXISTS {database}.labels
(
    event_id              String,
    app                   LowCardinality(String),
    model                 LowCardinality(String),
    prompt_version        LowCardinality(String),
    turn                  UInt32,
    judge_id              LowCardinality(String),
    judge_score           Nullable(Float64),
    reviewer              String,
    label                 UInt8,
    comment               String,
    route                 LowCardinality(String),
    inclusion_probability Float64,
    event_time            DateTime64(3, 'UTC'),
    labelled_at           DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(labelled_at)
ORDER BY (event_id, reviewer)
