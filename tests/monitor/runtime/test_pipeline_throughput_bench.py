"""The pipeline throughput benchmark at a tiny size, so that CI runs it: the bare loop and every monitor scenario over
one backlog, the table printed and the figures written. No timing is asserted (the benchmark reports ratios; CI
machines vary, and a tiny backlog may finish within one fetch, leaving no steady-state window)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from bench import pipeline_throughput
from monitor.devtools.localbroker import LocalBroker
from monitor.devtools.otlp_traffic import otlp_records
from monitor.devtools.traffic import generate_events


@pytest.mark.long(seconds=65)
async def test_the_throughput_benchmark_runs_at_a_tiny_size(
    broker: LocalBroker, clickhouse_url: str, database: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """bench/pipeline_throughput.py runs each scenario once on the tiny backlog, prints its table and writes the same
    figures."""
    path = tmp_path / "pipeline_throughput.json"
    n = pipeline_throughput.TINY_EVENTS
    result = await pipeline_throughput.main(
        n, rounds=1, json_path=path, bootstrap=broker.bootstrap, url=clickhouse_url, prefix=database, quiet=False
    )
    assert json.loads(path.read_text(encoding="utf-8")) == result
    assert result["events"] == n and result["rounds"] == 1
    for scenario in pipeline_throughput.SCENARIOS:
        (run,) = result[scenario]["runs"]
        assert 0 <= run["window_events"] <= n and result[scenario]["ratios_per_round"] == [
            result[scenario]["ratio_to_bare"]
        ]
    assert result["bare"]["events_per_s"] > 0
    out = capsys.readouterr().out
    assert "÷ bare" in out and all(label in out for label in pipeline_throughput.LABELS.values())


def test_the_floors_read_what_they_say() -> None:
    """On one record of the bench's spans, `read_span_keys` reads exactly the spans' attribute keys and
    `read_every_attribute` those and the resources' and span events' attributes as well."""
    events = generate_events(pipeline_throughput.SPANS_PER_RECORD, seed=5, malformed_share=0.0)
    (record,) = otlp_records(
        events, encoding="otlp_proto", dialect="gen_ai", per_record=pipeline_throughput.SPANS_PER_RECORD
    )
    request = ExportTraceServiceRequest.FromString(record)
    spans = [span for rs in request.resource_spans for scope in rs.scope_spans for span in scope.spans]
    span_keys = sum(len(span.attributes) for span in spans)
    everything = span_keys + sum(len(rs.resource.attributes) for rs in request.resource_spans)
    everything += sum(len(event.attributes) for span in spans for event in span.events)
    assert span_keys > len(spans) > pipeline_throughput.SPANS_PER_RECORD
    assert pipeline_throughput.read_span_keys(record) == span_keys
    assert pipeline_throughput.read_every_attribute(record) == everything > span_keys
