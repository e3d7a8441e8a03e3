"""Scores as `gen_ai.evaluation.result` records: what they carry, that OpenTelemetry's own readers decode them with
the judged span's ids, and that publishing drops (and counts) rather than holding up scoring."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto_json.collector.logs.v1.logs_service import ExportLogsServiceRequest as JsonRequest

from consumers.otlp.records import SPAN_ID_KEY, TRACE_ID_KEY
from consumers.otlp.wire import read_logs
from monitor.publish.destinations import KafkaDestination, OtlpHttpDestination
from monitor.publish.evaluations import EVENT_NAME, encode, evaluation_request
from monitor.publish.publisher import EvaluationPublisher
from monitor.publish.settings import PublishSettings
from schemas.scored import ScoredRow
from tests.monitor.alerts.conftest import make_row

TRACE, SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"


def _row(score: float | None = 0.75, status: str = "ok", span: bool = True, event_id: str = "msg_1") -> ScoredRow:
    row = make_row(datetime(2030, 1, 1, tzinfo=UTC), score=score, status=status, event_id=event_id)
    metadata = {TRACE_ID_KEY: TRACE, SPAN_ID_KEY: SPAN} if span else {}
    return row.model_copy(update={"metadata": metadata, "reasoning": "addresses the question"})


def test_a_record_carries_the_score_its_label_the_explanation_and_the_judged_span() -> None:
    """One record per score of a span: name `relevance`, the value, the label at the threshold, the reasoning, the
    response id, and the trace and span ids; rows without a span or without a score are not published."""
    rows = [_row(0.75), _row(0.25, event_id="otel:x/y"), _row(status="error"), _row(span=False)]
    request = evaluation_request(rows, 0.5, "relevancy-monitor")
    assert request is not None
    decoded = ExportLogsServiceRequest.FromString(request.SerializeToString())
    [resource] = decoded.resource_logs
    first, second = resource.scope_logs[0].log_records
    attributes = {kv.key: kv.value for kv in first.attributes}
    assert first.event_name == EVENT_NAME and (first.trace_id.hex(), first.span_id.hex()) == (TRACE, SPAN)
    assert attributes["gen_ai.evaluation.name"].string_value == "relevance"
    assert attributes["gen_ai.evaluation.score.value"].double_value == 0.75
    assert attributes["gen_ai.evaluation.score.label"].string_value == "relevant"
    assert attributes["gen_ai.evaluation.explanation"].string_value == "addresses the question"
    assert attributes["gen_ai.response.id"].string_value == "msg_1"
    second_attributes = {kv.key: kv.value.string_value for kv in second.attributes}
    assert second_attributes["gen_ai.evaluation.score.label"] == "not_relevant"
    assert "gen_ai.response.id" not in second_attributes  # made of span ids, not the provider's response id
    assert evaluation_request([_row(status="error"), _row(span=False)], 0.5, "m") is None


@pytest.mark.parametrize("encoding", ["otlp_proto", "otlp_json"])
def test_both_encodings_decode_with_opentelemetry_s_readers_and_keep_hex_ids(encoding: Any) -> None:
    """The protobuf bytes decode with opentelemetry-proto, the JSON with opentelemetry-proto-json (hex ids), and
    both with the monitor's own reader, to the same records."""
    request = evaluation_request([_row(0.75)], 0.5, "relevancy-monitor")
    assert request is not None
    value = encode(request, encoding)
    if encoding == "otlp_proto":
        assert ExportLogsServiceRequest.FromString(value) == request
    else:
        record = JsonRequest.from_json(value).resource_logs[0].scope_logs[0].log_records[0]
        assert (record.trace_id.hex(), record.span_id.hex(), record.event_name) == (TRACE, SPAN, EVENT_NAME)
    [log] = read_logs(value, encoding)
    assert (log.trace_id, log.span_id, log.event_name) == (TRACE, SPAN, EVENT_NAME)
    assert log.attributes["gen_ai.evaluation.score.value"] == 0.75


class _Producer:
    """A stand-in for the Kafka producer (the Kafka destination's own Protocol): records what it is asked to send."""

    def __init__(self, fail: bool = False) -> None:
        self.sent: list[tuple[str, bytes]] = []
        self.fail = fail

    async def send_and_wait(self, topic: str, value: bytes) -> object:
        """Record the send, or fail like a lost broker."""
        if self.fail:
            raise ConnectionError("broker gone")
        self.sent.append((topic, value))
        return None


async def test_a_full_queue_drops_the_oldest_and_a_failed_send_is_counted_never_raised() -> None:
    """Over the queue's cap the oldest scores are dropped and counted; a send that fails is counted; nothing raises."""
    dropped: list[tuple[str, int]] = []
    published: list[int] = []
    producer = _Producer()
    settings = PublishSettings(publish_evaluations="kafka", publish_queue_max=3)
    publisher = EvaluationPublisher(
        KafkaDestination(producer, settings.publish_topic),
        settings,
        service="m",
        on_published=published.append,
        on_dropped=lambda r, n: dropped.append((r, n)),
    )
    publisher.offer([_row(event_id=f"msg_{i}") for i in range(5)])
    assert dropped == [("queue_full", 2)]
    await publisher.drain()
    [(topic, value)] = producer.sent
    assert topic == "relevancy-monitor.evaluations" and published == [3]
    ids = [log.attributes["relevancy_monitor.event_id"] for log in read_logs(value, "otlp_proto")]
    assert ids == ["msg_2", "msg_3", "msg_4"]
    producer.fail = True
    publisher.offer([_row()])
    await asyncio.wait_for(publisher.drain(), 5)
    assert dropped[-1] == ("send_failed", 1)


class _Collector(ThreadingHTTPServer):
    """A local OTLP/HTTP logs endpoint: keeps each request's content type and body, answers `status`."""

    def __init__(self) -> None:
        self.received: list[tuple[str, bytes]] = []
        self.status = 200
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                collector.received.append((self.path + " " + self.headers["Content-Type"], body))
                self.send_response(collector.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


async def test_otlp_http_posts_export_requests_a_collector_decodes_and_counts_a_refusal() -> None:
    """With `otlp_http` each batch is one protobuf POST to the logs endpoint that `opentelemetry-proto` decodes, with
    the judged span's ids; a 503 is counted as `send_failed`, never raised."""
    collector = _Collector()
    try:
        endpoint = f"http://127.0.0.1:{collector.server_port}/v1/logs"
        settings = PublishSettings(publish_evaluations="otlp_http", publish_endpoint=endpoint)
        dropped: list[tuple[str, int]] = []
        publisher = EvaluationPublisher(
            OtlpHttpDestination(endpoint, settings.publish_encoding), settings, service="m",
            on_published=lambda _n: None, on_dropped=lambda r, n: dropped.append((r, n)),
        )  # fmt: skip
        publisher.offer([_row(event_id="msg_a"), _row(event_id="msg_b")])
        await publisher.drain()
        [(where, body)] = collector.received
        assert where == "/v1/logs application/x-protobuf"
        records = ExportLogsServiceRequest.FromString(body).resource_logs[0].scope_logs[0].log_records
        assert [(r.trace_id.hex(), r.span_id.hex(), r.event_name) for r in records] == [(TRACE, SPAN, EVENT_NAME)] * 2
        collector.status = 503
        publisher.offer([_row()])
        await publisher.drain()
        assert dropped == [("send_failed", 1)]
        await publisher.aclose()
    finally:
        collector.shutdown()
