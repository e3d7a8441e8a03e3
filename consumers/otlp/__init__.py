"""OpenTelemetry in: the records an OpenTelemetry Collector's Kafka exporter writes (`otlp_proto` or `otlp_json`),
read into plain spans and log records (`wire`), and the GenAI spans among them mapped to the monitor's events
(`dialects`). Both are pure functions of the record's bytes."""
