"""The demo's traffic: three assistants with a history of hours behind them, then live traffic in which one of them
rolls out a new prompt version that pads its answers (the regression the demo's alert finds).

Pure: every function takes its random generator and times, and returns record values (UTF-8 JSON, or a few
deliberately malformed records), so a test can replay a story exactly."""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from monitor.devtools.feedback_traffic import Answer, Quality

# (question, tight answer, padding sentences, off-topic answer, earlier turns of a chat)
_Pair = tuple[str, str, tuple[str, ...], str, tuple[tuple[str, str], ...]]

_SUPPORT: tuple[_Pair, ...] = (
    (
        "When did order {n} ship?",
        "Order {n} shipped on {d} March and arrives within three days.",
        ("Thanks for getting in touch with us today.", "We also sell gift cards for every occasion."),
        "Our loyalty programme gives you double points this month!",
        (),
    ),
    (
        "What is the return window for order {n}?",
        "Order {n} can be returned until {d} December from the Orders page.",
        ("We appreciate your patience and your loyalty.", "Have you tried our new mobile app?"),
        "Gift cards never expire.",
        (("Hi, I want to return my shoes.", "Sure. Which order are they from?"),),
    ),
    (
        "Can I change the delivery address of order {n}?",
        "Yes: order {n} has not shipped yet, so change the address under Orders, Delivery.",
        ("Great question, we love hearing from customers.", "Remember to follow us for weekly deals."),
        "Our stores open at nine every morning.",
        (),
    ),
)
_CODING: tuple[_Pair, ...] = (
    (
        "How do I reverse a list in Python without modifying the original?",
        "Use slicing: reversed_copy = items[::-1] returns a new list and leaves the original list unchanged.",
        ("Great question!", "Python is a popular language."),
        "JavaScript arrays have a sort method.",
        (),
    ),
    (
        "What does HTTP status {c} mean?",
        "HTTP status {c} means the server refused the request; the response body and headers say why.",
        ("I hope you're having a productive day.",),
        "Kubernetes schedules pods onto nodes.",
        (("My API client keeps failing.", "Which status code does the server return?"),),
    ),
)
_TRAVEL: tuple[_Pair, ...] = (
    (
        "Do I need a visa to visit Japan for two weeks with a German passport?",
        "No: German passport holders can visit Japan visa-free for up to 90 days as tourists.",
        ("Travel is a wonderful way to learn.", "Check out our premium lounges."),
        "Our loyalty programme gives you double points on all bookings!",
        (),
    ),
    (
        "Can I take a power bank in my hand luggage on a flight to Lisbon?",
        "Yes: a power bank under 100 Wh may travel in hand luggage, never in checked luggage.",
        ("Lisbon is lovely in spring.",),
        "Our hotel partners offer late checkout.",
        (("I fly to Lisbon on Friday.", "Great, how can I help with the trip?"),),
    ),
)

_MALFORMED: tuple[bytes, ...] = (
    b"this is not json",
    b'{"event_id": "x", "conversation_id": "c", "app": "support-bot"}',
    b'{"user_message": 42, "response": ["not", "a", "string"]}',
    b"\xff\xfe\x00garbage",
)


@dataclass(frozen=True, slots=True)
class App:
    """One assistant of the story: its traffic share, model, prompt versions and how often each pads."""

    name: str
    share: float
    model: str
    pairs: tuple[_Pair, ...]
    version: str  # the prompt version it runs before the rollout
    pad_share: float = 0.12
    off_topic_share: float = 0.04
    new_version: str | None = None  # rolled out when the regression starts
    new_pad_share: float = 0.0


APPS: tuple[App, ...] = (
    App("support-bot", 0.45, "assistant-large", _SUPPORT, "v12", new_version="v13", new_pad_share=0.7),
    App("coding-assistant", 0.35, "assistant-small", _CODING, "v7"),
    App("travel-agent", 0.20, "assistant-large", _TRAVEL, "v3"),
)
REGRESSED = next(a for a in APPS if a.new_version)
MALFORMED_SHARE = 0.01


def regressed_segment() -> dict[str, str]:
    """The segment whose alert the demo plants: the app and its new prompt version."""
    assert REGRESSED.new_version is not None
    return {"app": REGRESSED.name, "prompt_version": REGRESSED.new_version}


def story_event(rng: random.Random, at: datetime, *, regressed: bool) -> bytes:
    """One record value at event time `at`; once `regressed`, the regressed app runs its new, padding version."""
    return story_record(rng, at, regressed=regressed)[0]


def story_record(rng: random.Random, at: datetime, *, regressed: bool) -> tuple[bytes, Answer | None]:
    """`story_event` and its answer as feedback needs it (how good it is, its ids and segment); None when the record
    is malformed."""
    if rng.random() < MALFORMED_SHARE:
        return rng.choice(_MALFORMED), None
    app = rng.choices(APPS, weights=[a.share for a in APPS])[0]
    version, pad_share = app.version, app.pad_share
    if regressed and app.new_version:
        version, pad_share = app.new_version, app.new_pad_share
    question, tight, padding, off_topic, turns = rng.choice(app.pairs)
    fill = {
        "n": f"{rng.choice('ABCDEFG')}{rng.randint(10, 99)}",
        "d": str(rng.randint(1, 28)),
        "c": str(rng.choice([404, 429, 503])),
    }
    question, tight = question.format(**fill), tight.format(**fill)
    roll = rng.random()
    quality: Quality
    if roll < app.off_topic_share:
        answer, quality = off_topic, "off_topic"
    elif roll < app.off_topic_share + pad_share:
        answer, quality = " ".join((padding[0], tight, *padding[1:])), "padded"
    else:
        answer, quality = tight, "good"
    value = _record(rng, at, app, version, question, answer, turns)
    event = json.loads(value)
    return value, Answer(event["event_id"], event["conversation_id"], at, app.name, app.model, version, quality)


def _record(
    rng: random.Random,
    at: datetime,
    app: App,
    version: str,
    question: str,
    answer: str,
    turns: tuple[tuple[str, str], ...],
) -> bytes:
    event: dict[str, object] = {
        "event_id": str(uuid.UUID(int=rng.getrandbits(128))),
        "conversation_id": f"conv-{rng.getrandbits(40):010x}",
        "timestamp": at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "app": app.name,
        "model": app.model,
        "prompt_version": version,
        "metadata": {"channel": rng.choice(("web", "app")), "source": "demo"},
    }
    if turns or rng.random() < 0.4:  # the chat shape, with its earlier turns
        messages: list[dict[str, object]] = [
            {"role": role, "content": text}
            for user, bot in turns
            for role, text in (("user", user), ("assistant", bot))
        ]
        messages += [
            {"role": "user", "content": question},
            {"role": "assistant", "content": [{"type": "text", "text": answer}]},
        ]
        event["messages"] = messages
    else:
        event |= {"user_message": question, "response": answer}
    return json.dumps(event).encode()


def history(rng: random.Random, now: datetime, hours: float, count: int) -> list[bytes]:
    """`count` events spread evenly over the `hours` before `now`, oldest first: the baseline real history gives."""
    return [value for value, _ in history_records(rng, now, hours, count)]


def history_records(rng: random.Random, now: datetime, hours: float, count: int) -> list[tuple[bytes, Answer | None]]:
    """`history`, each value with its answer (None: malformed)."""
    span = timedelta(hours=hours)
    return [story_record(rng, now - span + span * (i + rng.random()) / count, regressed=False) for i in range(count)]
