"""A recognizer that raises on one event, through the broker and chDB: that event fails closed (dead-lettered with
reason `redaction_failed`, never judged or stored, counted), the others are stored, and the service commits past it
instead of stopping on it (and reading it again at every start)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import structlog

from consumers.deadletter import H_DETAIL, H_OFFSET, H_REASON
from monitor.config import Settings
from monitor.devtools.localbroker import LocalBroker
from monitor.privacy.recognizers import builtin_recognizers
from monitor.privacy.redactor import RecognizerRedactor
from monitor.privacy.settings import DEFAULT_PHONE_REGIONS
from monitor.privacy.spans import Span
from monitor.store.async_store import AsyncStore
from tests.harness import RunningPipeline, all_committed, produce_values, read_all, wait_for

MARKER = "zebra-7781 quotes this text"  # the planted event's text, which no log line or header may carry
GOOD = 8


class RaisingRecognizer:
    """A recognizer with a bug: it raises, quoting its input, on the planted text (and finds nothing elsewhere)."""

    def find(self, text: str) -> Iterator[Span]:
        """Raise on the planted text; nothing found in any other."""
        if MARKER in text:
            raise ValueError(f"cannot parse {text!r}")
        return iter(())


def _event(event_id: str, question: str) -> bytes:
    return json.dumps(
        {"event_id": event_id, "conversation_id": f"c-{event_id}", "timestamp": "2026-11-30T10:00:00Z",
         "user_message": question, "response": "Order A17 shipped on 3 March."}
    ).encode()  # fmt: skip


async def test_a_raising_recognizer_dead_letters_its_event_and_consumption_goes_on(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """The planted event is in the DLQ with reason redaction_failed and not in the store, the good ones are stored,
    the failure metric is 1, every offset is committed, and no log line or DLQ header quotes the text."""
    settings = make_settings()
    topic = settings.kafka.topics[0]
    values = [_event(f"good-{i}", f"When did order A{i} ship?") for i in range(GOOD)]
    values.insert(GOOD // 2, _event("planted", f"My note: {MARKER}"))
    await produce_values(broker.bootstrap, topic, values, key=lambda i: b"same-partition")
    with structlog.testing.capture_logs() as logs:
        async with RunningPipeline(settings, async_store) as run:
            run.pipeline.scorer.redactor = RecognizerRedactor(
                [RaisingRecognizer(), *builtin_recognizers(DEFAULT_PHONE_REGIONS)]
            )
            assert run.task is not None
            task = run.task

            async def committed() -> bool:
                assert not task.done(), f"the pipeline stopped: {task.exception()!r}"
                return await all_committed(broker.bootstrap, settings.kafka.group_id, topic, len(values))

            await wait_for(committed, 60, "every record committed, the planted one included")
            failures = run.counter("relevancy_monitor_redaction_failures")
            dead_lettered = run.counter("relevancy_monitor_events_dead_lettered", reason="redaction_failed")

    assert failures == 1.0 and dead_lettered == 1.0
    stored = await async_store.query(f"SELECT event_id, question FROM {async_store.store.qualified_table} FINAL")
    assert sorted(r[0] for r in stored.rows) == sorted(f"good-{i}" for i in range(GOOD))
    dead = await read_all(broker.bootstrap, settings.kafka.dlq_topic, 1)
    assert len(dead) == 1
    headers = dict(dead[0].headers)
    assert headers[H_REASON] == b"redaction_failed" and dead[0].value == values[GOOD // 2]
    assert int(headers[H_OFFSET]) == GOOD // 2
    assert MARKER.encode() not in headers[H_DETAIL] and b"planted" in headers[H_DETAIL]
    failed = [e for e in logs if e["event"] == "redaction_failed"]
    assert len(failed) == 1
    assert failed[0]["event_id"] == "planted" and failed[0]["offset"] == GOOD // 2 and "partition" in failed[0]
    assert failed[0]["error"] == "ValueError" and failed[0]["log_level"] == "error"
    assert not any(MARKER in repr(e) or "cannot parse" in repr(e) for e in logs)
