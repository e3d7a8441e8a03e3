"""Joining the log records that hold one message each (the legacy GenAI events) to the span of their call, by
(trace id, span id). Spans and log records arrive on different topics, in either order and perhaps on different
partitions, so each side waits for the other: at most `wait_s`, with at most `capacity` calls waiting at once (the
oldest is let go first). Pure bookkeeping: the caller's tokens (its offsets) ride along, the first token of a
`Met` is its span's, and every token added comes out exactly once, in a `Met` or a `Lonely`, unless `forget`
drops it.

    span without content ──┐                 ┌─ Met (complete): a question and an answer are in
                           ├─ waiting[key] ──┼─ Met (waited / evicted): the span, with whatever came
    message log records ───┘                 └─ Lonely (waited / evicted / late): messages whose span never came,
                                                or came with its content on the span itself"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from consumers.otlp.wire import LogRecord, Span

T = TypeVar("T")
SpanKey = tuple[str, str]  # (trace id, span id), lower-case hex
Why = Literal["complete", "waited", "evicted", "late"]
_ANSWER, _QUESTION = "gen_ai.choice", "gen_ai.user.message"


@dataclass(frozen=True)
class Met(Generic[T]):
    """A span and the log records that arrived for it (none, if its wait ended first)."""

    span: Span
    logs: tuple[LogRecord, ...]
    tokens: tuple[T, ...]  # the span's first
    why: Why


@dataclass(frozen=True)
class Lonely(Generic[T]):
    """Log records whose span did not come in time, or whose span was already settled (`late`)."""

    key: SpanKey
    records: int
    tokens: tuple[T, ...]
    why: Why


Joined = Met[T] | Lonely[T]


@dataclass
class _Waiting(Generic[T]):
    since: float
    span: Span | None = None
    span_tokens: list[T] = field(default_factory=list)
    logs: list[LogRecord] = field(default_factory=list)
    log_tokens: list[T] = field(default_factory=list)

    def complete(self) -> bool:
        names = {log.event_name or str(log.attributes.get("event.name") or "") for log in self.logs}
        return self.span is not None and _ANSWER in names and _QUESTION in names


class LogJoin(Generic[T]):
    """The calls waiting for their other half, oldest first."""

    def __init__(self, wait_s: float, capacity: int) -> None:
        self.wait_s = wait_s
        self.capacity = capacity
        self._waiting: OrderedDict[SpanKey, _Waiting[T]] = OrderedDict()
        self._settled: OrderedDict[SpanKey, None] = OrderedDict()  # recently met, or scored from the span alone

    def __len__(self) -> int:
        return len(self._waiting)

    def add_span(self, span: Span, token: T, now: float) -> list[Joined[T]]:
        """A span of an LLM call without content: it waits for its message log records."""
        key = (span.trace_id, span.span_id)
        if key in self._settled:  # a redelivered span whose call already met its content
            return [Lonely(key, 0, (token,), "late")]
        out, waiting = self._entry(key, now)
        if waiting.span is None:
            waiting.span = span
        waiting.span_tokens.append(token)
        return out + self._if_complete(key, waiting)

    def add_logs(self, key: SpanKey, logs: Iterable[LogRecord], token: T, now: float) -> list[Joined[T]]:
        """Message log records of one call, from one Kafka record."""
        got = list(logs)
        if key in self._settled:
            return [Lonely(key, len(got), (token,), "late")]
        out, waiting = self._entry(key, now)
        waiting.logs += got
        waiting.log_tokens.append(token)
        return out + self._if_complete(key, waiting)

    def settle(self, key: SpanKey) -> list[Joined[T]]:
        """A call scored without the join (content on its span, or a details log record): message log records that
        come for it later are `late`, and so is what waits for it now (its span is no `no_content`)."""
        self._settled[key] = None
        self._settled.move_to_end(key)
        while len(self._settled) > self.capacity:
            self._settled.popitem(last=False)
        waiting = self._waiting.pop(key, None)
        if waiting is None:
            return []
        return [Lonely(key, len(waiting.logs), (*waiting.span_tokens, *waiting.log_tokens), "late")]

    def due(self, now: float) -> list[Joined[T]]:
        """The calls whose wait has ended."""
        out: list[Joined[T]] = []
        while self._waiting:
            key, waiting = next(iter(self._waiting.items()))
            if waiting.since + self.wait_s > now:
                break
            del self._waiting[key]
            out.append(self._release(key, waiting, "waited"))
        return out

    def forget(self, gone: Callable[[T], bool]) -> None:
        """Drop the tokens of partitions no longer owned (their records are read again by the next owner)."""
        for key in list(self._waiting):
            waiting = self._waiting[key]
            waiting.span_tokens = [t for t in waiting.span_tokens if not gone(t)]
            waiting.log_tokens = [t for t in waiting.log_tokens if not gone(t)]
            if not waiting.span_tokens:
                waiting.span = None
            if not waiting.span_tokens and not waiting.log_tokens:
                del self._waiting[key]

    def _entry(self, key: SpanKey, now: float) -> tuple[list[Joined[T]], _Waiting[T]]:
        waiting = self._waiting.get(key)
        if waiting is not None:
            return [], waiting
        out: list[Joined[T]] = []
        while len(self._waiting) >= self.capacity:
            old_key, old = self._waiting.popitem(last=False)
            out.append(self._release(old_key, old, "evicted"))
        waiting = self._waiting[key] = _Waiting(since=now)
        return out, waiting

    def _if_complete(self, key: SpanKey, waiting: _Waiting[T]) -> list[Joined[T]]:
        if not waiting.complete():
            return []
        del self._waiting[key]
        return [self._release(key, waiting, "complete")]

    def _release(self, key: SpanKey, waiting: _Waiting[T], why: Why) -> Joined[T]:
        if waiting.span is None:
            return Lonely(key, len(waiting.logs), tuple(waiting.log_tokens), why)
        self.settle(key)  # after the pop: nothing waits for the key any more
        return Met(waiting.span, tuple(waiting.logs), (*waiting.span_tokens, *waiting.log_tokens), why)
