"""The metadata keys that hold a judged span's ids in its event and row. Apart from the reader, so the code that only
looks them up (feedback, evaluations) loads no protobuf."""

TRACE_ID_KEY, SPAN_ID_KEY = "otel.trace_id", "otel.span_id"
