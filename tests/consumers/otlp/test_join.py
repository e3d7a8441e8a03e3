"""The join of one-message GenAI log records to their span: either order, a bounded wait, a hard cap, and every
token out exactly once."""

from __future__ import annotations

from typing import Any

from consumers.otlp.join import LogJoin, Lonely, Met, SpanKey
from consumers.otlp.wire import LogRecord, Span

KEY: SpanKey = ("ab" * 16, "cd" * 8)


def _span(key: SpanKey = KEY) -> Span:
    return Span(key[0], key[1], "chat", 3, 1, 2, {"gen_ai.operation.name": "chat"}, (), {}, "")


def _log(name: str, key: SpanKey = KEY) -> LogRecord:
    body: dict[str, Any] = {"content": "q"} if name != "gen_ai.choice" else {"message": {"content": "a"}}
    return LogRecord(key[0], key[1], name, 1, body, {}, {})


QUESTION, ANSWER = _log("gen_ai.user.message"), _log("gen_ai.choice")


def test_a_span_meets_its_messages_in_either_order() -> None:
    """Whichever side comes first waits; the call is met once a question and an answer are in, span token first."""
    join: LogJoin[str] = LogJoin(wait_s=30, capacity=10)
    assert join.add_span(_span(), "s", now=0) == []
    assert join.add_logs(KEY, [QUESTION], "l1", now=1) == []  # no answer yet
    [met] = join.add_logs(KEY, [ANSWER], "l2", now=2)
    assert met == Met(_span(), (QUESTION, ANSWER), ("s", "l1", "l2"), "complete") and len(join) == 0
    other: LogJoin[str] = LogJoin(wait_s=30, capacity=10)
    assert other.add_logs(KEY, [QUESTION, ANSWER], "l", now=0) == []
    assert other.add_span(_span(), "s", now=5) == [Met(_span(), (QUESTION, ANSWER), ("s", "l"), "complete")]


def test_a_wait_ends_after_wait_s_with_what_came() -> None:
    """A span waits `wait_s` and then comes out with whatever arrived; messages without a span come out lonely."""
    join: LogJoin[str] = LogJoin(wait_s=30, capacity=10)
    join.add_span(_span(), "s", now=0)
    join.add_logs(KEY, [QUESTION], "l", now=10)
    other = ("ef" * 16, "01" * 8)
    join.add_logs(other, [ANSWER], "x", now=20)
    assert join.due(now=29.9) == []
    assert join.due(now=30) == [Met(_span(), (QUESTION,), ("s", "l"), "waited")]
    assert join.due(now=50) == [Lonely(other, 1, ("x",), "waited")] and len(join) == 0


def test_the_oldest_call_is_let_go_when_the_cap_is_reached() -> None:
    """At `capacity` waiting calls, a new one evicts the oldest, which comes out at once."""
    join: LogJoin[str] = LogJoin(wait_s=30, capacity=2)
    keys = [(f"{i:032x}", f"{i:016x}") for i in range(3)]
    join.add_span(_span(keys[0]), "s0", now=0)
    join.add_logs(keys[1], [QUESTION], "l1", now=1)
    assert join.add_logs(keys[2], [QUESTION], "l2", now=2) == [Met(_span(keys[0]), (), ("s0",), "evicted")]
    assert len(join) == 2


def test_messages_for_a_call_already_scored_are_late() -> None:
    """Messages after their span met its content, or after a call scored without the join, come out as `late`, and
    a span waiting for a call scored elsewhere (a details log record) is released, not left to count as no content."""
    join: LogJoin[str] = LogJoin(wait_s=30, capacity=10)
    join.add_logs(KEY, [QUESTION, ANSWER], "l", now=0)
    join.add_span(_span(), "s", now=1)
    assert join.add_logs(KEY, [ANSWER], "again", now=2) == [Lonely(KEY, 1, ("again",), "late")]
    assert join.add_span(_span(), "redelivered", now=3) == [Lonely(KEY, 0, ("redelivered",), "late")]
    other = ("ef" * 16, "01" * 8)
    join.add_span(_span(other), "waits", now=4)
    assert join.settle(other) == [Lonely(other, 0, ("waits",), "late")] and len(join) == 0


def test_forget_drops_the_tokens_of_partitions_no_longer_owned() -> None:
    """A revoked span token takes its span out (the next owner re-reads it); the messages keep waiting."""
    join: LogJoin[str] = LogJoin(wait_s=30, capacity=10)
    join.add_span(_span(), "gone:s", now=0)
    join.add_logs(KEY, [QUESTION], "kept:l", now=0)
    join.forget(lambda token: token.startswith("gone:"))
    assert join.due(now=30) == [Lonely(KEY, 1, ("kept:l",), "waited")]
    join.add_logs(KEY, [QUESTION], "gone:l", now=40)
    join.forget(lambda token: token.startswith("gone:"))
    assert len(join) == 0
