"""A batch the publisher cannot encode is a bug of ours, not the destination's failure: it is counted as
`encode_failed` (never `send_failed`), logged as an error with its traceback, nothing is sent for it, and the next
batch is published."""

from __future__ import annotations

import structlog

from consumers.otlp.records import TRACE_ID_KEY
from monitor.publish.destinations import KafkaDestination
from monitor.publish.publisher import EvaluationPublisher
from monitor.publish.settings import PublishSettings
from tests.monitor.publish.test_evaluations import _Producer, _row


async def test_an_encoding_bug_is_counted_apart_from_failed_sends_and_publishing_goes_on() -> None:
    """A row whose trace id is not hex fails to encode with its batch: counted `encode_failed` for the batch, logged
    at error level with the exception, the destination never called; a later good row is published."""
    dropped: list[tuple[str, int]] = []
    published: list[int] = []
    producer = _Producer()
    settings = PublishSettings(publish_evaluations="kafka")
    publisher = EvaluationPublisher(
        KafkaDestination(producer, settings.publish_topic),
        settings,
        service="m",
        on_published=published.append,
        on_dropped=lambda r, n: dropped.append((r, n)),
    )
    broken = _row(event_id="msg_bad").model_copy(update={"metadata": {TRACE_ID_KEY: "not-hex"}})
    publisher.offer([_row(event_id="msg_good"), broken])
    with structlog.testing.capture_logs() as logs:
        await publisher.drain()
    assert dropped == [("encode_failed", 2)] and producer.sent == [] and published == []
    [entry] = logs
    assert (entry["event"], entry["log_level"], entry["rows"]) == ("evaluations_not_encoded", "error", 2), entry
    assert entry.get("exc_info") is True, entry
    publisher.offer([_row(event_id="msg_next")])
    await publisher.drain()
    assert published == [1] and len(producer.sent) == 1 and dropped == [("encode_failed", 2)]
