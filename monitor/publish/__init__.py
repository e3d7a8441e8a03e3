"""OpenTelemetry out: each scored row of a judged span published as a `gen_ai.evaluation.result` log record, so any
OpenTelemetry backend shows relevancy beside the trace it judged. `evaluations` builds the records (pure);
`publisher` sends them without ever holding up scoring; `settings` is its slice."""
