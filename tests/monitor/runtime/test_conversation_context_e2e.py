"""The conversation around the judged pair, through the broker, the fake Messages API and chDB: the window is cut
once, before redaction, so the judge's request and the row hold the same bounded context; personal data in an earlier
turn or in the system instructions reaches neither; a redactor raising on them dead-letters the event."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from typing import Any

from consumers.deadletter import H_REASON
from monitor.config import Settings
from monitor.devtools.localbroker import LocalBroker
from monitor.privacy.recognizers import builtin_recognizers
from monitor.privacy.redactor import RecognizerRedactor
from monitor.privacy.settings import DEFAULT_PHONE_REGIONS
from monitor.privacy.spans import Span
from monitor.store.async_store import AsyncStore
from tests.fake_messages_api import FakeMessagesAPI
from tests.harness import RunningPipeline, all_committed, produce_values, read_all, wait_for
from tests.pii_corpus import planted_snippet, planted_value


def _pii(kind: str, seed: int) -> tuple[str, str]:
    """A valid value of `kind` from the PII corpus: (the value, the text that carries it)."""
    rng = random.Random(seed)
    value, fmt = planted_value(rng, kind)
    return value, planted_snippet(rng, value, fmt)


EMAIL, CARD, IBAN = _pii("EMAIL", 11), _pii("CARD", 12), _pii("IBAN", 13)
DROPPED = "dropped-turn-walrus"  # in the oldest turn, outside a 2-message window


def _chat(event_id: str, *, turns: list[tuple[str, str]], system: str) -> bytes:
    """A chat event: the system message, `turns` as earlier messages, then the judged question and answer."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    messages += [{"role": role, "content": text} for role, text in turns]
    messages += [
        {"role": "user", "content": "How long does the second one take?"},
        {"role": "assistant", "content": "About four days."},
    ]
    return json.dumps(
        {"event_id": event_id, "conversation_id": f"c-{event_id}", "app": "shop", "timestamp": "2026-11-30T10:00:00Z",
         "messages": messages}
    ).encode()  # fmt: skip


def _long_history() -> list[tuple[str, str]]:
    return [
        ("user", f"Hello, {DROPPED}."),
        ("assistant", "Hi! How can I help?"),
        ("user", f"Which kettles ship to Spain? I am {EMAIL[1]}, card {CARD[1]}."),
        ("assistant", "The blue and the steel kettle (kept-turn-heron)."),
    ]


async def test_the_window_is_cut_before_redaction_and_personal_data_reaches_neither_judge_nor_row(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
) -> None:
    """With 2 context messages: the oldest turns are cut (in neither the request nor the row), the kept turn's email
    and card and the brief's IBAN are placeholders in both, and the row's context_turns (2) is what the judge read."""
    settings = make_settings(judge="rubric", judge_context_turns=2, **fake_messages_api.settings_overrides())
    topic = settings.kafka.topics[0]
    system = f"You sell kettles. Refunds go to {IBAN[1]} (brief-osprey)."
    await produce_values(broker.bootstrap, topic, [_chat("conv-1", turns=_long_history(), system=system)])
    async with RunningPipeline(settings, async_store):
        await wait_for(lambda: all_committed(broker.bootstrap, settings.kafka.group_id, topic, 1), 60, "committed")

    bodies = [
        r.raw.decode("utf-8", "replace") + json.dumps(r.body, ensure_ascii=False) for r in fake_messages_api.requests
    ]
    assert len(fake_messages_api.requests) == 1
    table = async_store.store.qualified_table
    (row,) = (
        await async_store.query(
            "SELECT status, turn, context_turns, context, system_instructions, context_digest, redactions "
            f"FROM {table} FINAL"
        )
    ).rows
    status, turn, context_turns, context, system_text, digest, redactions = row
    assert status == "ok" and turn == 2 and context_turns == 2
    stored = json.loads(context)
    assert [t["role"] for t in stored] == ["user", "assistant"] and "kept-turn-heron" in stored[1]["text"]
    assert "[EMAIL]" in stored[0]["text"] and "[CARD]" in stored[0]["text"] and "[IBAN]" in system_text
    assert "kept-turn-heron" in bodies[0] and "brief-osprey" in bodies[0] and "[EMAIL]" in bodies[0]
    for value, _ in (EMAIL, CARD, IBAN):
        assert value not in bodies[0], f"{value!r} reached the judge"
        assert value not in repr(row), f"{value!r} was stored"
    assert DROPPED not in bodies[0] and DROPPED not in context
    assert len(digest) == 64 and {"EMAIL", "CARD", "IBAN"} <= set(redactions)


MARKER = "zebra-9931 quotes this text"


class RaisingRecognizer:
    """A recognizer with a bug: it raises on the planted text (and finds nothing elsewhere)."""

    def find(self, text: str) -> Iterator[Span]:
        """Raise on the planted text; nothing found in any other."""
        if MARKER in text:
            raise ValueError(f"cannot parse {text!r}")
        return iter(())


async def test_a_redactor_raising_on_an_earlier_turn_or_the_brief_dead_letters_the_event(
    broker: LocalBroker, make_settings: Callable[..., Settings], async_store: AsyncStore
) -> None:
    """The planted text in an earlier turn, then in the system message: both events are dead-lettered with
    redaction_failed and never stored, while a clean conversation is stored."""
    settings = make_settings()
    topic = settings.kafka.topics[0]
    values = [
        _chat("in-turn", turns=[("user", f"note: {MARKER}"), ("assistant", "ok")], system="You sell kettles."),
        _chat("in-brief", turns=[("user", "hi"), ("assistant", "hello")], system=f"Brief: {MARKER}"),
        _chat("clean", turns=[("user", "hi"), ("assistant", "hello")], system="You sell kettles."),
    ]
    await produce_values(broker.bootstrap, topic, values, key=lambda i: b"same-partition")
    async with RunningPipeline(settings, async_store) as run:
        run.pipeline.scorer.redactor = RecognizerRedactor(
            [RaisingRecognizer(), *builtin_recognizers(DEFAULT_PHONE_REGIONS)]
        )
        await wait_for(lambda: all_committed(broker.bootstrap, settings.kafka.group_id, topic, 3), 60, "committed")
        failures = run.counter("relevancy_monitor_redaction_failures")
    assert failures == 2.0
    stored = await async_store.query(f"SELECT event_id FROM {async_store.store.qualified_table} FINAL")
    assert [r[0] for r in stored.rows] == ["clean"]
    dead = await read_all(broker.bootstrap, settings.kafka.dlq_topic, 2)
    assert sorted(dict(d.headers)[H_REASON] for d in dead) == [b"redaction_failed"] * 2
