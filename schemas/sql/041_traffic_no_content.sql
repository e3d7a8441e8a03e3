-- relevancy-monitor schema, step 041: OpenTelemetry LLM calls that arrived without their text (the instrumentation
-- captures no content by default), per segment and minute, so that "no scores" never looks like "no traffic".
-- Not part of `consumed`: coverage stays judged / scorable events.
ALTER TABLE {database}.traffic_counts
    ADD COLUMN IF NOT EXISTS no_content UInt64
