"""Scored rows as OpenTelemetry `gen_ai.evaluation.result` log records, in one `ExportLogsServiceRequest` (pure).

Per the GenAI semantic conventions' evaluation event: `gen_ai.evaluation.name` (`relevance`), the score's value and
label, the judge's reasoning as the explanation, the judged call's `gen_ai.response.id`, and the record parented to
the judged span by its trace and span ids. Only rows that carry a span (read from an OTLP topic) and a score are
published: an error row has no score to show."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from consumers.otlp.records import SPAN_ID_KEY, TRACE_ID_KEY
from consumers.otlp.wire import key_values, to_otlp_json
from schemas.scored import ScoredRow

EVENT_NAME = "gen_ai.evaluation.result"
EVALUATION_NAME = "relevance"
SEVERITY_INFO = 9  # SeverityNumber.INFO


def label(score: float, threshold: float) -> Literal["relevant", "not_relevant"]:
    """The score's label: `relevant` at or above `threshold`."""
    return "relevant" if score >= threshold else "not_relevant"


def publishable(row: ScoredRow) -> bool:
    """Whether the row judged an OpenTelemetry span and has a score."""
    return row.status == "ok" and row.score is not None and bool(row.metadata.get(TRACE_ID_KEY))


def evaluation_attributes(row: ScoredRow, threshold: float) -> dict[str, Any]:
    """The evaluation event's attributes for one publishable row."""
    assert row.score is not None
    attributes: dict[str, Any] = {
        "gen_ai.evaluation.name": EVALUATION_NAME,
        "gen_ai.evaluation.score.value": row.score,
        "gen_ai.evaluation.score.label": label(row.score, threshold),
        "gen_ai.evaluation.explanation": row.reasoning,
        "relevancy_monitor.judge_id": row.judge_id,
        "relevancy_monitor.event_id": row.event_id,
    }
    if not row.event_id.startswith("otel:"):  # an id of the provider's, not one made of the span's ids
        attributes["gen_ai.response.id"] = row.event_id
    return attributes


def evaluation_request(rows: Iterable[ScoredRow], threshold: float, service: str) -> ExportLogsServiceRequest | None:
    """One export request with an evaluation record per publishable row (None when there is none)."""
    records = [_record(row, threshold) for row in rows if publishable(row)]
    if not records:
        return None
    resource = Resource(attributes=key_values({"service.name": service}))
    return ExportLogsServiceRequest(
        resource_logs=[ResourceLogs(resource=resource, scope_logs=[ScopeLogs(log_records=records)])]
    )


def _record(row: ScoredRow, threshold: float) -> LogRecord:
    at = int(row.scored_at.timestamp() * 1e9)
    return LogRecord(
        time_unix_nano=at,
        observed_time_unix_nano=at,
        severity_number=SEVERITY_INFO,  # type: ignore[arg-type]
        severity_text="INFO",
        event_name=EVENT_NAME,
        attributes=key_values(evaluation_attributes(row, threshold)),
        trace_id=bytes.fromhex(row.metadata[TRACE_ID_KEY]),
        span_id=bytes.fromhex(row.metadata.get(SPAN_ID_KEY, "")),
    )


def encode(request: ExportLogsServiceRequest, encoding: Literal["otlp_proto", "otlp_json"]) -> bytes:
    """The request's bytes in `encoding`, as a Collector's Kafka receiver reads them."""
    return request.SerializeToString() if encoding == "otlp_proto" else to_otlp_json(request)
