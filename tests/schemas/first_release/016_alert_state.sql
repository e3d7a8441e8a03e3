-- relevancy-monitor schema, step 016: alert state of `relevancy-monitor alerts run`, one row per rule and segment.
--
-- The latest row (updated_at) per (rule, segment_key) wins: read with FINAL. `notified` maps a notifier name to
-- the state it last delivered, so a restarted or replacement evaluator neither re-sends nor forgets a resolve.
-- `alerts backtest` never writes here.
CREATE TABLE IF NOT EXISTS {database}.alert_state
(
    rule             LowCardinality(String),
    segment_key      String,
    segment          String,
    state            Enum8('inactive' = 0, 'pending' = 1, 'firing' = 2, 'resolved' = 3),
    since            Nullable(DateTime64(3, 'UTC')),
    fired_at         Nullable(DateTime64(3, 'UTC')),
    resolved_at      Nullable(DateTime64(3, 'UTC')),
    last_eval_at     DateTime64(3, 'UTC'),
    last_notified_at Nullable(DateTime64(3, 'UTC')),
    notified         Map(String, String),
    value            Nullable(Float64),
    baseline         Nullable(Float64),
    n_current        UInt64,
    n_baseline       UInt64,
    p_value          Nullable(Float64),
    severity         LowCardinality(String),
    note             String,
    updated_at       DateTime64(3, 'UTC'),
    writer           String
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY (rule, segment_key)
