"""Synthetic conversation traffic for the demo and for load: both shapes, several segments, padded and
off-topic answers, a small share of malformed records and optionally personal data in the text (deterministic for
a seed), optionally with users' feedback on a share of the answers (`generate_records`), and `produce`, which sends
records to a topic at a steady rate."""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

from consumers.client_start import start_client
from consumers.clients import make_producer
from consumers.settings import KafkaSettings
from consumers.topics import ensure_topics
from monitor.devtools.feedback_traffic import Answer, FeedbackMix, FeedbackQueue, Quality, interleave
from monitor.devtools.outgoing import Outgoing
from monitor.devtools.pii_samples import Planted, planted_snippet, planted_value
from monitor.privacy.kinds import BUILTIN_KINDS, CARD, EMAIL, IBAN, IP, NATIONAL_ID, PHONE, SECRET, SSN, URL_CREDENTIALS

# (app, question, tight answer, filler that pads it, off-topic answer)
_SCENARIOS = [
    (
        "support-bot",
        "When did order {n} ship?",
        "Order {n} shipped on {d} March.",
        "Thanks for getting in touch. We also sell gift cards.",
        "Our loyalty programme gives you double points this month!",
    ),
    (
        "support-bot",
        "What is the return window for order {n}?",
        "Order {n} can be returned until {d} December.",
        "We appreciate your patience. Have you tried our new app?",
        "Gift cards never expire.",
    ),
    (
        "coding-assistant",
        "How do I reverse a list in Python without modifying the original?",
        "Use slicing: reversed_copy = items[::-1] returns a new list and leaves the original unchanged.",
        "Great question! Python is a popular language.",
        "JavaScript arrays have a sort method.",
    ),
    (
        "coding-assistant",
        "What does HTTP status {c} mean?",
        "HTTP status {c} means the server rejected the request; check the response body.",
        "I hope you're having a productive day.",
        "Kubernetes schedules pods onto nodes.",
    ),
    (
        "travel-agent",
        "Do I need a visa to visit Japan for two weeks with a German passport?",
        "No: German passport holders can visit Japan visa-free for up to 90 days.",
        "Travel is a wonderful way to learn. Check out our premium lounges.",
        "Our loyalty programme gives you double points on all bookings!",
    ),
]
_MODELS = ["assistant-large", "assistant-small"]
_PROMPTS = ["v12", "v13"]
_MALFORMED: list[bytes] = [
    b"this is not json",
    b'{"event_id": "x", "conversation_id": "c", "app": "support-bot"}',
    b'{"user_message": 42, "response": ["not", "a", "string"]}',
    b'{"messages": [{"role": "system", "content": "no user or assistant turn"}]}',
    b"[1, 2, 3]",
    b"\xff\xfe\x00garbage",
]

# How a user or an assistant mentions each kind of personal data: "{x}" is the value with its context.
_ASKED = {
    EMAIL: ("My email is {x}.", "I'm writing from {x}."),
    PHONE: ("My number is {x}.", "You can call me on {x}."),
    CARD: ("I paid with card {x}.", "My card is {x}."),
    IBAN: ("My IBAN is {x}.", "Refunds should go to {x}."),
    SSN: ("For verification: {x}.", "(I gave you {x} last time.)"),
    NATIONAL_ID: ("For verification: {x}.", "My ID is {x}."),
    IP: ("I'm connecting from {x}.", "My IP is {x}."),
    SECRET: ("For context, I'm using {x}.", "Config: {x}"),
    URL_CREDENTIALS: ("My connection string is {x}.", "DATABASE_URL={x}"),
}
_ANSWERED = {
    EMAIL: ("I've sent a confirmation to {x}.",),
    PHONE: ("We'll text updates to {x}.",),
    CARD: ("The charge on {x} has been noted.",),
    IBAN: ("Refunds will go to {x}.",),
    SSN: ("I've noted {x} on your file.",),
    NATIONAL_ID: ("I've noted {x} on your file.",),
    IP: ("Requests from {x} are allowed.",),
    SECRET: ("Please rotate {x} now that it has been shared.",),
    URL_CREDENTIALS: ("Your app connects with {x}.",),
}


def _with_personal_data(rng: random.Random, question: str, answer: str) -> tuple[str, str, tuple[Planted, ...]]:
    """The pair with one or two planted values woven into the question and/or the answer."""
    planted: list[Planted] = []
    for _ in range(rng.choice((1, 1, 2))):
        kind = rng.choice(BUILTIN_KINDS)
        value, fmt = planted_value(rng, kind)
        planted.append(Planted(kind, value, fmt))
        where = rng.random()
        if where < 0.75:
            said = rng.choice(_ASKED[kind]).replace("{x}", planted_snippet(rng, value, fmt))
            question = f"{said} {question}" if rng.random() < 0.5 else f"{question} {said}"
        if where >= 0.5:
            answer = f"{answer} {rng.choice(_ANSWERED[kind]).replace('{x}', planted_snippet(rng, value, fmt))}"
    return question, answer, tuple(planted)


def generate_events(
    count: int, *, seed: int = 7, malformed_share: float = 0.02, now: datetime | None = None, pii_share: float = 0.0
) -> Iterator[bytes]:
    """Yield `count` record values (UTF-8 JSON, or deliberately malformed bytes); `pii_share` of the valid events
    carry one or two items of (synthetic, valid-looking) personal data in the user message and/or the response."""
    for value, _ in generate_labelled_events(
        count, seed=seed, malformed_share=malformed_share, now=now, pii_share=pii_share
    ):
        yield value


def generate_labelled_events(
    count: int, *, seed: int = 7, malformed_share: float = 0.02, now: datetime | None = None, pii_share: float = 0.0
) -> Iterator[tuple[bytes, tuple[Planted, ...]]]:
    """`generate_events`, each record value paired with the personal data planted in it (empty for most)."""
    for value, planted, _ in _generated(count, seed, malformed_share, now, pii_share):
        yield value, planted


def generate_records(
    count: int,
    *,
    seed: int = 7,
    malformed_share: float = 0.02,
    now: datetime | None = None,
    pii_share: float = 0.0,
    feedback: FeedbackMix | None = None,
) -> Iterator[Outgoing]:
    """`generate_events` as records keyed by their conversation id (malformed ones unkeyed) and, with `feedback`,
    users' feedback on a share of the answers, each sent after its answer and keyed like it. The conversations are
    those of `generate_events` whatever the feedback."""
    records = (
        (Outgoing(value, answer.conversation_id.encode()) if answer else Outgoing(value), answer)
        for value, _, answer in _generated(count, seed, malformed_share, now, pii_share)
    )
    if feedback is None:
        yield from (record for record, _ in records)
        return
    yield from interleave(records, FeedbackQueue(feedback, seed))


def _generated(
    count: int, seed: int, malformed_share: float, now: datetime | None, pii_share: float
) -> Iterator[tuple[bytes, tuple[Planted, ...], Answer | None]]:
    """Each record value, the personal data planted in it, and its answer as feedback needs it (None: malformed)."""
    rng = random.Random(seed)
    # The personal data draws from a stream of its own, so a stream with it is the stream without it (same ids,
    # segments and labels) plus the planted text, and pii_share=0 draws nothing extra.
    pii_rng = random.Random(f"{seed}/pii")
    for i in range(count):
        if rng.random() < malformed_share:
            yield rng.choice(_MALFORMED), (), None
            continue
        app, q, tight, filler, off = rng.choice(_SCENARIOS)
        fill = {
            "n": f"{rng.choice('ABCDEFG')}{rng.randint(10, 99)}",
            "d": rng.randint(1, 28),
            "c": rng.choice([404, 429, 503]),
        }
        prompt = rng.choice(_PROMPTS)
        roll = rng.random()
        # prompt v13 pads more often: the demo's "regression" to find in SQL
        pad_p = 0.5 if prompt == "v13" else 0.15
        quality: Quality
        if roll < 0.05:
            answer, quality = off.format(**fill), "off_topic"
        elif roll < 0.05 + pad_p:
            answer, quality = f"{filler} {tight.format(**fill)}", "padded"
        else:
            answer, quality = tight.format(**fill), "good"
        question = q.format(**fill)
        planted: tuple[Planted, ...] = ()
        if pii_share > 0.0 and pii_rng.random() < pii_share:
            question, answer, planted = _with_personal_data(pii_rng, question, answer)
        at = now or datetime.now(UTC)
        event_id, conversation = str(uuid.UUID(int=rng.getrandbits(128))), f"conv-{rng.randint(1, max(1, count // 2))}"
        base: dict[str, object] = {
            "event_id": event_id,
            "conversation_id": conversation,
            "timestamp": at.isoformat().replace("+00:00", "Z"),
            "app": app,
            "model": rng.choice(_MODELS),
            "prompt_version": prompt,
            "metadata": {"channel": rng.choice(["web", "app"]), "seq": str(i)},
        }
        event: dict[str, object]
        if rng.random() < 0.5:
            event = {**base, "user_message": question, "response": answer}
        else:
            event = {
                **base,
                "messages": [
                    {"role": "user", "content": question},
                    {"role": "assistant", "content": [{"type": "text", "text": answer}]},
                ],
            }
        facts = Answer(event_id, conversation, at, app, str(base["model"]), prompt, quality)
        yield json.dumps(event).encode(), planted, facts


async def produce(
    bootstrap: str,
    topic: str,
    values: Iterable[bytes | Outgoing],
    *,
    rate: float = 0.0,
    partitions: int = 3,
    kafka: KafkaSettings | None = None,
) -> int:
    """Produce record values (or keyed records, some perhaps to topics of their own) to `topic` (created if missing,
    like any other topic named), at `rate` per second (0: as fast as possible); `kafka` carries the TLS and SASL
    settings (its bootstrap servers are replaced by `bootstrap`). Returns the records sent."""
    kafka = (
        kafka.model_copy(update={"bootstrap_servers": bootstrap})
        if kafka
        else KafkaSettings(kafka_bootstrap_servers=bootstrap)
    )
    await ensure_topics(kafka, {topic: partitions})
    known = {topic}
    producer = make_producer(kafka, linger_ms=5)
    await start_client(producer, kafka)
    sent = 0
    started = time.monotonic()
    try:
        for item in values:
            record = item if isinstance(item, Outgoing) else Outgoing(item)
            to = record.topic or topic
            if to not in known:
                await ensure_topics(kafka, {to: partitions})
                known.add(to)
            await producer.send(to, record.value, key=record.key)
            sent += 1
            if rate > 0:
                ahead = sent / rate - (time.monotonic() - started)
                if ahead > 0:
                    await asyncio.sleep(ahead)
        await producer.flush()
    finally:
        await producer.stop()
    return sent
