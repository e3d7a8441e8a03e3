"""`produce --feedback` through a real broker: conversation records keyed by their conversation, users' feedback on
a share of them in the same partition after its answer (or on a topic of its own), and, with OTLP, as
`gen_ai.evaluation.result` log records parented to the answer's span."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from consumers.feedback import decode_feedback
from consumers.otlp.records import RecordContext, decode_logs_record, decode_traces_record
from consumers.otlp.wire import read_logs, read_spans
from monitor.config import load_settings
from monitor.devtools.feedback_traffic import FeedbackMix
from monitor.devtools.localbroker import LocalBroker
from monitor.devtools.otlp_traffic import EVALUATION_EVENT, otlp_outgoing
from monitor.devtools.traffic import generate_records
from tests.harness import cli, monitor_env, read_all

NOW = datetime(2026, 3, 3, 12, 0, tzinfo=UTC)


async def _produce(broker: LocalBroker, topic: str, *args: str) -> None:
    code, _, err = await cli(
        "produce", *args, "--kafka-bootstrap-servers", broker.bootstrap, "--kafka-topic", topic, env=monitor_env()
    )
    assert code == 0, err


async def test_feedback_follows_its_answer_in_the_answers_partition(broker: LocalBroker, topic: str) -> None:
    """`produce --generate 300 --feedback 0.5`: every conversation record is keyed by its conversation id; each
    feedback record names an answer on the topic and sits after it in the same partition, keyed alike."""
    await _produce(broker, topic, "--generate", "300", "--malformed-share", "0", "--feedback", "0.5", "--seed", "4")
    records = await read_all(broker.bootstrap, topic, 300)
    answers, feedback = {}, []
    for r in records:
        value = json.loads(r.value)
        if value.get("type") == "feedback":
            feedback.append((r, value))
        else:
            assert r.key == value["conversation_id"].encode()
            answers[value["event_id"]] = r
    assert len(answers) == 300 and 100 <= len(feedback) <= 200, (len(answers), len(feedback))
    assert len({r.partition for r in answers.values()}) == 3
    for r, value in feedback:
        answer = answers[value["event_id"]]
        assert (r.key, r.partition) == (answer.key, answer.partition) and r.offset > answer.offset


async def test_feedback_topic_takes_the_feedback(broker: LocalBroker, topic: str) -> None:
    """With --feedback-topic the feedback goes there (created if missing) and the conversations' topic holds none."""
    elsewhere = f"feedback-{uuid.uuid4().hex[:8]}"
    await _produce(broker, topic, "--generate", "200", "--feedback", "0.5", "--feedback-topic", elsewhere)
    conversations = await read_all(broker.bootstrap, topic, 200)
    feedback = await read_all(broker.bootstrap, elsewhere, 60)
    assert len(conversations) == 200 and all(b'"type": "feedback"' not in r.value for r in conversations)
    assert len(feedback) >= 60 and all(json.loads(r.value)["type"] == "feedback" for r in feedback)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--generate", "10", "--format", "otlp_json", "--feedback", "0.5", "--feedback-topic", "{topic}"),
         "need a topic of their own"),
        (("--generate", "10", "--feedback", "1.5"), "--feedback must be between 0 and 1"),
        (("--file", "{file}", "--feedback", "0.5"), "--feedback needs --generate"),
    ],
)  # fmt: skip
async def test_produce_refuses_feedback_it_cannot_send(
    broker: LocalBroker, topic: str, tmp_path: Path, args: tuple[str, ...], says: str
) -> None:
    """A share outside 0..1, feedback on a file's lines, or OTLP feedback (log records) on the spans' own topic is
    refused in one line, nothing sent."""
    (tmp_path / "events.jsonl").write_text('{"conversation_id": "c"}\n')
    filled = [a.format(topic=topic, file=tmp_path / "events.jsonl") for a in args]
    code, _, err = await cli(
        "produce", *filled, "--kafka-bootstrap-servers", broker.bootstrap, "--kafka-topic", topic, env=monitor_env()
    )
    assert (code, len(err.strip().splitlines())) == (2, 1) and says in err, err
    assert await read_all(broker.bootstrap, topic, 1, timeout_s=1.0) == []


def test_otlp_feedback_is_evaluation_log_records_on_the_answers_span() -> None:
    """As OTLP, each feedback is a logs record after the spans record holding its answer: one
    `gen_ai.evaluation.result` on the answer's LLM-call span, thumbs as 1/0 and ratings as 1-5, with
    gen_ai.response.id where the span's dialect carries it."""
    mix = FeedbackMix(0.5, topic="otlp_logs")
    records = list(
        otlp_outgoing(
            generate_records(200, seed=2, now=NOW, malformed_share=0, feedback=mix), encoding="otlp_json", per_record=20
        )
    )
    calls: dict[tuple[str, str], str] = {}  # (trace, span) of each LLM call -> its answer's id ('' if none)
    names, response_ids = set(), 0
    for r in records:
        if r.topic is None:
            for span in read_spans(r.value, "otlp_json"):
                if span.name.startswith("chat "):
                    calls[(span.trace_id, span.span_id)] = str(span.attributes.get("gen_ai.response.id", ""))
            continue
        assert r.topic == "otlp_logs" and r.key
        (log,) = read_logs(r.value, "otlp_json")
        assert log.event_name == EVALUATION_EVENT and (log.trace_id, log.span_id) in calls  # its answer came first
        name, score = log.attributes["gen_ai.evaluation.name"], log.attributes["gen_ai.evaluation.score.value"]
        names.add(name)
        assert score in ((0.0, 1.0) if name == "user_feedback" else (1.0, 2.0, 3.0, 4.0, 5.0))
        response_id = log.attributes.get("gen_ai.response.id")
        assert response_id in (None, calls[(log.trace_id, log.span_id)])
        response_ids += response_id is not None
    assert names == {"user_feedback", "user_rating"} and 0 < response_ids < len(records) - 10


def test_otlp_feedback_decodes_to_the_answers_the_spans_decode_to() -> None:
    """The monitor's OTLP decoders read every evaluation log record as one feedback event naming an answer that the
    spans records decode to (by gen_ai.response.id, else the answer's span: `otel:<trace>/<span>`)."""
    options = load_settings().feedback.options()
    context = RecordContext("otlp_logs", 0, 0, None, now=datetime(2100, 1, 1, tzinfo=UTC), feedback=options)
    mix = FeedbackMix(0.5, topic="otlp_logs")
    generated = generate_records(300, seed=6, now=NOW, malformed_share=0, feedback=mix)
    answers, feedback = set(), []
    for r in otlp_outgoing(generated, encoding="otlp_proto", per_record=25):
        if r.topic is None:
            answers |= {e.event_id for e in decode_traces_record(r.value, "otlp_proto", context).events}
        else:
            out = decode_logs_record(r.value, "otlp_proto", context)
            assert len(out.feedback) == 1 and not out.skipped, out.skipped
            feedback.append(out.feedback[0].answer.event_id)
            assert feedback[-1] in answers  # its answer's spans came first
    assert len(answers) == 300 and 100 < len(feedback) < 200
    assert any(f.startswith("otel:") for f in feedback) and not all(f.startswith("otel:") for f in feedback)


def test_json_feedback_beside_otlp_names_the_answers_as_the_spans_decode_to() -> None:
    """Without evaluation records (the OTLP demo's JSON feedback topic) each feedback stays our JSON object and names
    its answer by the id the spans decode to: gen_ai.response.id where the dialect sets it, else the span's
    `otel:<trace>/<span>`."""
    options = load_settings().feedback.options()
    context = RecordContext("spans", 0, 0, None, now=datetime(2100, 1, 1, tzinfo=UTC))
    mix = FeedbackMix(0.5, topic="feedback")
    generated = generate_records(300, seed=6, now=NOW, malformed_share=0, feedback=mix)
    answers, named = set(), []
    for i, r in enumerate(otlp_outgoing(generated, encoding="otlp_json", per_record=25, evaluations=False)):
        if r.topic is None:
            answers |= {e.event_id for e in decode_traces_record(r.value, "otlp_json", context).events}
            continue
        feedback = decode_feedback(
            r.value, topic="feedback", partition=0, offset=i, record_timestamp_ms=None, options=options, now=NOW
        )
        assert feedback.answer.event_id in answers  # its answer's spans came first
        named.append(feedback.answer.event_id)
    assert 100 < len(named) < 200 and any(n.startswith("otel:") for n in named)
    assert not all(n.startswith("otel:") for n in named)
