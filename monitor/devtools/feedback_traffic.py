"""Users' feedback on generated answers: a share of the answers get a thumbs or a 1-5 rating (our JSON feedback
object, docs/feedback.md), more often negative on the answers the generator padded or sent off topic, with noise;
each is sent a little after its answer, keyed by the answer's conversation.

Deterministic for a seed: the feedback draws from a stream of its own, so traffic with feedback is the same
conversations as without, with the feedback records between them."""

from __future__ import annotations

import heapq
import json
import math
import random
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from monitor.devtools.outgoing import Outgoing

Quality = Literal["good", "padded", "off_topic"]
# The chance of a thumbs-down (or a 1-2 rating) by how good the answer is, before each user's own noise.
NEGATIVE_CHANCE: Mapping[Quality, float] = {"good": 0.08, "padded": 0.45, "off_topic": 0.7}
NOISE_SD = 0.05  # users differ: each answer's chance is drawn around its quality's
# What a user says when they bother to (a share of the negative ones), by quality: (reason code, comment).
_SAID: Mapping[Quality, tuple[tuple[str, str], ...]] = {
    "good": (("not_helpful", "Not what I needed."), ("other", "Meh.")),
    "padded": (("too_long", "Too much waffle, just answer the question."), ("irrelevant", "Why the sales pitch?")),
    "off_topic": (
        ("off_topic", "That's not what I asked."),
        ("irrelevant", "This has nothing to do with my question."),
    ),
}
_PRAISE = ("Thanks!", "Perfect, that's what I needed.")


@dataclass(frozen=True, slots=True)
class Answer:
    """A generated answer as its feedback needs it: ids, time, segment, and how good the generator made it."""

    event_id: str
    conversation_id: str
    at: datetime
    app: str
    model: str
    prompt_version: str
    quality: Quality


@dataclass(frozen=True, slots=True)
class FeedbackMix:
    """How much feedback, of what kind, and where. `share` of the answers get one feedback event; `rating_share`
    of those are 1-5 ratings (the rest thumbs); `segment_share` carry app/model/prompt_version (the rest only the
    event_id, so the monitor resolves the segment); each is stamped `delay_s` (log-uniform) after its answer and
    sent after `lag_records` more records, or, with a clock, once the clock reaches its timestamp."""

    share: float
    topic: str | None = None  # None: the conversations' topic
    rating_share: float = 0.3
    segment_share: float = 0.5
    comment_share: float = 0.3
    delay_s: tuple[float, float] = (3.0, 300.0)
    lag_records: tuple[int, int] = (1, 40)

    def __post_init__(self) -> None:
        for name in ("share", "rating_share", "segment_share", "comment_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, got {getattr(self, name)}")
        low, high = self.delay_s
        if not 0 < low <= high:
            raise ValueError(f"delay_s must be 0 < low <= high, got {self.delay_s}")


def negative_chance(rng: random.Random, quality: Quality) -> float:
    """The chance this answer's user is unhappy: its quality's, with a user's noise, within 0..1."""
    return min(1.0, max(0.0, rng.gauss(NEGATIVE_CHANCE[quality], NOISE_SD)))


def _stamp(at: datetime) -> str:
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def feedback_object(rng: random.Random, answer: Answer, mix: FeedbackMix) -> dict[str, object]:
    """One feedback event on `answer` (our JSON feedback object): thumbs or a rating, its timestamp after the
    answer's, sometimes the segment, a reason and a comment."""
    negative = rng.random() < negative_chance(rng, answer.quality)
    low, high = mix.delay_s
    delay = math.exp(rng.uniform(math.log(low), math.log(high)))
    out: dict[str, object] = {
        "type": "feedback",
        "feedback_id": f"fb-{uuid.UUID(int=rng.getrandbits(128))}",
        "event_id": answer.event_id,
        "timestamp": _stamp(answer.at + timedelta(seconds=delay)),
        "answer_timestamp": _stamp(answer.at),
    }
    if rng.random() < mix.rating_share:
        rating = rng.choice((1, 1, 2)) if negative else rng.choices((3, 4, 5), weights=(1, 3, 4))[0]
        out |= {"rating": rating, "scale": 5}
    else:
        out["thumbs"] = "down" if negative else "up"
    if rng.random() < mix.segment_share:
        out |= {"app": answer.app, "model": answer.model, "prompt_version": answer.prompt_version}
    if rng.random() < mix.comment_share:
        if negative:
            reason, comment = rng.choice(_SAID[answer.quality])
            out |= {"reason": reason, "comment": comment}
        else:
            out["comment"] = rng.choice(_PRAISE)
    return out


def feedback_time(value: dict[str, object]) -> datetime:
    """The timestamp of a feedback object `feedback_object` made."""
    return datetime.fromisoformat(str(value["timestamp"]).replace("Z", "+00:00"))


class FeedbackQueue:
    """The feedback waiting to be sent after its answer. `add` is called once per record sent (with its answer, or
    None for a malformed record); `due` yields what may be sent now; `rest` what is left when the traffic ends."""

    def __init__(self, mix: FeedbackMix, seed: int | str, clock: Callable[[], datetime] | None = None) -> None:
        self.mix = mix
        self.rng = random.Random(f"{seed}/feedback")
        self.clock = clock
        self.sent = 0  # feedback records handed out so far
        self._records = 0
        self._waiting: list[tuple[float, int, Outgoing]] = []  # (due, sequence, record), earliest first

    def add(self, answer: Answer | None) -> None:
        """Count one record sent; `answer` gets feedback with the mix's share."""
        self._records += 1
        if answer is None or self.rng.random() >= self.mix.share:
            return
        value = feedback_object(self.rng, answer, self.mix)
        low, high = self.mix.lag_records
        lag = self.rng.randint(low, high)  # drawn either way: the values do not depend on a clock
        due = feedback_time(value).timestamp() if self.clock else float(self._records + lag)
        record = Outgoing(json.dumps(value).encode(), answer.conversation_id.encode(), self.mix.topic)
        heapq.heappush(self._waiting, (due, self._records, record))

    def due(self) -> Iterator[Outgoing]:
        """The feedback whose time has come (by the clock, or by the records sent since its answer)."""
        now = self.clock().timestamp() if self.clock else float(self._records)
        while self._waiting and self._waiting[0][0] <= now:
            self.sent += 1
            yield heapq.heappop(self._waiting)[2]

    def rest(self) -> Iterator[Outgoing]:
        """Every feedback still waiting, in the order it was due."""
        while self._waiting:
            self.sent += 1
            yield heapq.heappop(self._waiting)[2]


def interleave(records: Iterable[tuple[Outgoing, Answer | None]], queue: FeedbackQueue) -> Iterator[Outgoing]:
    """The records, each answer's feedback after it (`queue` decides when), and the feedback left at the end."""
    for record, answer in records:
        yield record
        queue.add(answer)
        yield from queue.due()
    yield from queue.rest()
