"""OpenTelemetry topics end to end through tansu and chDB: a Collector record of many spans becomes one row per
LLM span, a record that is no OTLP is dead-lettered, and a record's offset is committed only when all its events are
written, so a stop in the middle of a record loses nothing and stores nothing twice."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import structlog
from aiokafka import TopicPartition
from aiokafka.structs import ConsumerRecord
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.sdk.trace import ReadableSpan

from consumers.deadletter import H_REASON
from consumers.otlp.wire import Encoding
from consumers.settings import KafkaSettings
from monitor.config import Settings
from monitor.devtools.localbroker import LocalBroker
from monitor.judging.traffic_counts import TrafficCounter
from monitor.runtime.metrics import Metrics
from monitor.runtime.no_content import NoContentNotice
from monitor.runtime.record_events import RecordDecoder
from monitor.store.async_store import AsyncStore
from tests.consumers.otlp.collector import collector_logs_record, collector_record, recorded_logs, recorded_spans
from tests.harness import (
    RunningPipeline,
    committed_offsets,
    count_rows,
    create_topic,
    produce_values,
    read_all,
    wait_for,
)
from tests.monitor.runtime.test_pipeline import ScriptedJudge

TP = TopicPartition("otlp_spans", 0)


def _batch(n: int, first: int = 0) -> list[ReadableSpan]:
    """`n` chat spans of an agent run (each with its question and answer), with the agent's and a tool's spans."""
    with recorded_spans("support-bot") as (provider, exporter):
        tracer = provider.get_tracer("app")
        with tracer.start_as_current_span("invoke_agent helper") as agent:
            agent.set_attribute("gen_ai.operation.name", "invoke_agent")
            with tracer.start_as_current_span("execute_tool lookup") as tool:
                tool.set_attribute("gen_ai.operation.name", "execute_tool")
            for i in range(first, first + n):
                with tracer.start_as_current_span("chat claude") as span:
                    span.set_attributes(
                        {
                            "gen_ai.operation.name": "chat",
                            "gen_ai.request.model": "claude-test",
                            "gen_ai.response.id": f"msg_{i}",
                            "gen_ai.conversation.id": f"conv-{i % 7}",
                            "gen_ai.input.messages": json.dumps(
                                [{"role": "user", "parts": [{"type": "text", "content": f"When did order A{i} ship?"}]}]
                            ),
                            "gen_ai.output.messages": json.dumps(
                                [{"role": "assistant", "parts": [{"type": "text", "content": f"Order A{i} shipped."}]}]
                            ),
                        }
                    )
        return list(exporter.get_finished_spans())


async def _committed(bootstrap: str, settings: Settings) -> int:
    committed = await committed_offsets(bootstrap, settings.kafka.group_id, settings.kafka.topics[0])
    return sum(v or 0 for v in committed.values())


@pytest.mark.parametrize("encoding", ["otlp_proto", "otlp_json"])
async def test_collector_records_become_one_row_per_llm_span(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore, encoding: Encoding
) -> None:
    """Two records of 30 and 20 chat spans give 50 rows with the span's app, model and conversation; the agent and
    tool spans are counted, and a record that is no OTLP is dead-lettered."""
    settings = make_settings(input_format=encoding)
    topic = settings.kafka.topics[0]
    values = [collector_record(_batch(30), encoding), b"\x00not otlp", collector_record(_batch(20, 30), encoding)]
    await produce_values(broker.bootstrap, topic, values, key=lambda i: b"same-partition")
    async with RunningPipeline(settings, async_store) as run:
        await wait_for(lambda: _rows(async_store, 50), 60, "50 rows")
        await wait_for(lambda: _done(broker.bootstrap, settings, 3), 60, "3 offsets committed")
    assert await count_rows(async_store, final=False) == 50
    t = async_store.store.qualified_table
    rows = (await async_store.query(f"SELECT app, model, conversation_id, event_id FROM {t} FINAL")).rows
    assert {(r[0], r[1]) for r in rows} == {("support-bot", "claude-test")}
    assert {r[2] for r in rows} == {f"conv-{k}" for k in range(7)}
    assert {r[3] for r in rows} == {f"msg_{i}" for i in range(50)}
    assert run.counter("relevancy_monitor_otlp_spans_skipped", kind="invoke_agent") == 2
    assert run.counter("relevancy_monitor_otlp_spans_skipped", kind="execute_tool") == 2
    [dead] = await read_all(broker.bootstrap, settings.kafka.dlq_topic, 1)
    assert dict(dead.headers)[H_REASON] == (b"invalid_otlp" if encoding == "otlp_proto" else b"invalid_json")


@pytest.mark.long(seconds=16)
async def test_a_stop_in_the_middle_of_a_record_loses_nothing_and_writes_nothing_twice(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """Stopped while a 300-span record is half judged, the monitor commits nothing of it; started again, it scores
    the record whole, and the rows written the first time are not stored twice."""
    settings = make_settings(input_format="otlp_proto", judge_concurrency=4, shutdown_grace_s=0.5)
    await produce_values(broker.bootstrap, settings.kafka.topics[0], [collector_record(_batch(300), "otlp_proto")])
    first = RunningPipeline(settings, async_store, judge=ScriptedJudge(delay_s=0.02))
    async with first:
        await wait_for(lambda: _rows(async_store, 20), 60, "the first rows")
    written = await count_rows(async_store, final=False)
    assert 20 <= written < 300
    assert await _committed(broker.bootstrap, settings) == 0  # the record is not finished: its offset is not committed
    async with RunningPipeline(settings, async_store, judge=ScriptedJudge()) as second:  # the same judge id
        await wait_for(lambda: _done(broker.bootstrap, settings, 1), 60, "the record committed")
    assert await count_rows(async_store) == 300  # every span once (FINAL)
    assert second.counter("relevancy_monitor_otlp_spans_skipped", kind="invoke_agent") == 1


async def _rows(store: AsyncStore, n: int) -> bool:
    return await count_rows(store, final=False) >= n


async def _done(bootstrap: str, settings: Settings, n: int) -> bool:
    return await _committed(bootstrap, settings) == n


def _record(value: bytes, offset: int = 0) -> ConsumerRecord[Any, Any]:
    return ConsumerRecord("otlp_spans", 0, offset, 0, 0, None, value, None, 0, len(value), ())


def test_the_decoder_reads_the_app_and_prompt_version_attributes_from_the_settings() -> None:
    """MONITOR_OTLP_APP_ATTRIBUTE and MONITOR_OTLP_PROMPT_VERSION_ATTRIBUTES reach the mapping of every span."""
    kafka = KafkaSettings(
        kafka_topics="otlp_spans",
        input_format="otlp_proto",
        otlp_app_attribute="gen_ai.request.model",
        otlp_prompt_version_attributes="gen_ai.conversation.id",
    )
    events = RecordDecoder(kafka, Metrics(), TrafficCounter()).events(
        TP, _record(collector_record(_batch(2), "otlp_proto"))
    )
    assert [(e.app, e.prompt_version) for e in events] == [("claude-test", "conv-0"), ("claude-test", "conv-1")]


def test_spans_without_content_are_named_once_a_minute() -> None:
    """The warning that names the content switch is logged on the first such span, then at most once a minute."""
    notice = NoContentNotice(every_s=60)
    with structlog.testing.capture_logs() as logs:
        assert notice.seen("otlp_spans", 3, now=0.0)
        assert not notice.seen("otlp_spans", 2, now=30.0)
        assert notice.seen("otlp_spans", 1, now=61.0)
    assert [e["spans"] for e in logs] == [{"otlp_spans": 3}, {"otlp_spans": 3}]
    assert all("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" in e["hint"] for e in logs)


async def test_published_evaluations_point_at_the_judged_spans(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """With publishing on, each stored score goes out as a `gen_ai.evaluation.result` record that
    opentelemetry-proto decodes, carrying the trace and span ids of the span it judged."""
    topic = make_settings().kafka.topics[0]
    settings = make_settings(input_format="otlp_proto", publish_evaluations="kafka", publish_topic=f"{topic}.evals")
    spans = _batch(12)
    await produce_values(broker.bootstrap, topic, [collector_record(spans, "otlp_proto")])
    async with RunningPipeline(settings, async_store) as run:
        await wait_for(lambda: _done(broker.bootstrap, settings, 1), 60, "the record committed")
        await wait_for(lambda: _published(run, 12), 30, "12 evaluations published")
    records = [
        log
        for message in await read_all(broker.bootstrap, f"{topic}.evals", 1)
        for rl in ExportLogsServiceRequest.FromString(message.value).resource_logs
        for sl in rl.scope_logs
        for log in sl.log_records
    ]
    judged = {(f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}") for s in spans if s.name == "chat claude"}
    assert {(r.trace_id.hex(), r.span_id.hex()) for r in records} == judged
    assert {r.event_name for r in records} == {"gen_ai.evaluation.result"}


async def _published(run: RunningPipeline, n: int) -> bool:
    return run.counter("relevancy_monitor_evaluations_published") >= n


def _joinable_records(encoding: Encoding) -> tuple[bytes, bytes]:
    """(a traces record, a logs record) as a legacy-event instrumentation writes them: three chat spans without
    text; the messages of the first as log records inside its span, and a message whose span never comes."""
    with (
        recorded_spans("support-bot") as (tracer_provider, spans),
        recorded_logs("support-bot") as (logger_provider, logs),
    ):
        tracer, logger = tracer_provider.get_tracer("app"), logger_provider.get_logger("app")
        for i in range(3):
            with tracer.start_as_current_span("chat claude") as span:
                span.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.request.model": "claude-test"})
                if i == 0:
                    logger.emit(event_name="gen_ai.user.message", body={"content": "When did order A17 ship?"})
                    message = {"role": "assistant", "content": "Order A17 shipped on 3 March."}
                    logger.emit(event_name="gen_ai.choice", body={"index": 0, "message": message})
        with tracer.start_as_current_span("lost"):
            logger.emit(event_name="gen_ai.user.message", body={"content": "Where is my refund?"})
        return (
            collector_record(spans.get_finished_spans(), encoding),
            collector_logs_record(logs.get_finished_logs(), encoding),
        )


async def _committed_on(bootstrap: str, settings: Settings, topic: str) -> int:
    return sum(v or 0 for v in (await committed_offsets(bootstrap, settings.kafka.group_id, topic)).values())


@pytest.mark.long(seconds=17)
async def test_log_records_join_their_span_across_topics_and_commit_only_with_its_row(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore, topic: str
) -> None:
    """The messages on the logs topic meet their span on the traces topic; stopped before the row is written,
    neither record is committed; started again, the call is stored once, the spans that met no messages count as
    `no_content` in the traffic counts, the lonely message as unjoined, and both topics are committed."""
    spans_topic, logs_topic = f"{topic}.spans", f"{topic}.logs"
    settings = make_settings(
        kafka_topics=[spans_topic, logs_topic], input_format="otlp_proto", otlp_logs_topics=logs_topic,
        otlp_join_wait_s=1.0, shutdown_grace_s=0.5,
    )  # fmt: skip
    traces, logs = _joinable_records("otlp_proto")
    for name in (spans_topic, logs_topic):
        await create_topic(broker.bootstrap, name, partitions=3)
    await produce_values(broker.bootstrap, logs_topic, [logs])
    await produce_values(broker.bootstrap, spans_topic, [traces])
    async with RunningPipeline(settings, async_store, judge=ScriptedJudge(delay_s=60)) as first:

        async def waited() -> bool:  # the call met its messages, and everything else in both records is done
            joined = first.counter("relevancy_monitor_otlp_calls_joined", why="complete") == 1
            return joined and first.counter("relevancy_monitor_otlp_log_records_unjoined", why="waited") == 1

        await wait_for(waited, 60, "the call joined, the lonely message let go")
    assert await count_rows(async_store, final=False) == 0
    assert await _committed_on(broker.bootstrap, settings, logs_topic) == 0  # held by the span's unwritten row
    async with RunningPipeline(settings, async_store, judge=ScriptedJudge()) as second:

        async def committed() -> bool:
            on = [await _committed_on(broker.bootstrap, settings, t) for t in (logs_topic, spans_topic)]
            return on == [1, 1]

        await wait_for(committed, 60, "both records committed")
    t = async_store.store.qualified_table
    [(question, response, model)] = (await async_store.query(f"SELECT question, response, model FROM {t} FINAL")).rows
    assert (question, response, model) == ("When did order A17 ship?", "Order A17 shipped on 3 March.", "claude-test")
    assert second.counter("relevancy_monitor_otlp_calls_joined", why="waited") == 2
    assert second.counter("relevancy_monitor_otlp_log_records_unjoined", why="waited") == 1
    db = async_store.store.database
    [(no_content, consumed)] = (
        await async_store.query(
            f"SELECT sum(no_content), sum(consumed) FROM {db}.traffic_counts WHERE app = 'support-bot'"
        )
    ).rows
    assert (no_content, consumed) >= (2, 1)
