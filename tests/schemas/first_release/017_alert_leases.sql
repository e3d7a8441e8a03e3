-- relevancy-monitor schema, step 017: heartbeats of `relevancy-monitor alerts run` replicas. Among replicas with
-- a heartbeat younger than the lease TTL and not released, the one that joined first evaluates and notifies.
-- Replacing by replica keeps one row per replica after merges, so the table stays tiny.
CREATE TABLE IF NOT EXISTS {database}.alert_leases
(
    replica      String,
    joined_at    DateTime64(3, 'UTC'),
    heartbeat_at DateTime64(3, 'UTC'),
    released     UInt8
)
ENGINE = ReplacingMergeTree(heartbeat_at)
ORDER BY replica
