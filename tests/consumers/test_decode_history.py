"""A chat event's history: the messages before the judged question (`context`), the system instructions (`system`)
and the question's index among the user messages (`turn`), the same on both decoding paths; flat events have none."""

from __future__ import annotations

import json
from typing import Any
from unittest.mock import patch

import pytest

import consumers.decode as decode_module
from consumers.decode import _fast, decode_event
from schemas.events import ConversationEvent, KafkaPosition, Turn
from tests.conftest import EXAMPLES

POS = KafkaPosition(topic="conv", partition=0, offset=3)
TS_MS = 1_795_000_000_000


def _both_ways(event: dict[str, Any]) -> ConversationEvent:
    """The event decoded by the fast path and by the reference path, which must agree."""
    value = json.dumps(event).encode()
    fast = decode_event(value, position=POS, record_timestamp_ms=TS_MS, max_future_skew_s=None)
    with patch.object(decode_module, "_fast", lambda _: None):
        reference = decode_event(value, position=POS, record_timestamp_ms=TS_MS, max_future_skew_s=None)
    assert fast == reference
    return reference


def _chat(*messages: tuple[str, Any]) -> dict[str, Any]:
    return {"messages": [{"role": role, "content": content} for role, content in messages]}


def test_a_three_turn_conversation_gives_its_earlier_turns_oldest_first() -> None:
    """The third question is judged with the two earlier exchanges as context and turn index 2, on the fast path."""
    event = _chat(
        ("user", "Which kettles ship to Spain?"),
        ("assistant", "The blue and the steel kettle."),
        ("user", "How much is the steel one?"),
        ("assistant", [{"type": "text", "text": "39 euros."}]),
        ("user", "How long does the second one take?"),
        ("assistant", "About four days."),
    )
    assert _fast(json.dumps(event).encode()) is not None
    e = _both_ways(event)
    assert (e.question, e.response) == ("How long does the second one take?", "About four days.")
    assert e.context == (
        Turn("user", "Which kettles ship to Spain?"),
        Turn("assistant", "The blue and the steel kettle."),
        Turn("user", "How much is the steel one?"),
        Turn("assistant", "39 euros."),
    )
    assert (e.system, e.turn) == ("", 2)


def test_system_and_developer_messages_are_the_system_instructions_not_context() -> None:
    """Every system or developer message the assistant read before answering (one between the question and the answer
    included) joins the system instructions, by a blank line, and none is a context turn."""
    e = _both_ways(
        _chat(
            ("system", "You sell kettles."),
            ("user", "Hi"),
            ("assistant", "Hello!"),
            ("developer", "Answer in one sentence."),
            ("user", "Do you ship to Spain?"),
            ("system", "Never promise dates."),
            ("assistant", "Yes, we do."),
            ("system", "after the answer: not read"),
        )
    )
    assert e.system == "You sell kettles.\n\nAnswer in one sentence.\n\nNever promise dates."
    assert e.context == (Turn("user", "Hi"), Turn("assistant", "Hello!"))
    assert e.turn == 1


def test_messages_without_text_are_left_out_of_the_context_but_count_as_turns() -> None:
    """An assistant turn that only calls a tool, and a user turn with only an image, give the judge nothing to read:
    they are left out; the tool's result (with text) stays, and the image-only user message still counts as a turn."""
    e = _both_ways(
        {
            "messages": [
                {"role": "user", "content": [{"type": "image", "source": {}}]},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "t1", "type": "function"}]},
                {"role": "tool", "tool_call_id": "t1", "content": "Order K19: not shipped."},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t2"}]},
                {"role": "assistant", "content": "   "},
                {"role": "user", "content": "Cancel it then."},
                {"role": "assistant", "content": "Done: K19 is cancelled."},
            ]
        }
    )
    assert e.context == (Turn("tool", "Order K19: not shipped."),)
    assert e.turn == 1


def test_a_first_turn_has_no_context_and_turn_zero() -> None:
    """A single exchange, with or without a system message, has empty context and turn 0; trailing messages after
    the judged answer are not history."""
    plain = _both_ways(_chat(("user", "Do you ship to Spain?"), ("assistant", "Yes.")))
    briefed = _both_ways(
        _chat(("system", "Be brief."), ("user", "Do you ship to Spain?"), ("assistant", "Yes."), ("user", "thanks"))
    )
    assert (plain.context, plain.system, plain.turn) == ((), "", 0)
    assert (briefed.context, briefed.system, briefed.turn) == ((), "Be brief.", 0)


def test_flat_events_have_no_history() -> None:
    """A flat event keeps the defaults: no context, no system instructions, turn 0."""
    for line in (EXAMPLES / "events-flat.jsonl").read_bytes().splitlines():
        e = decode_event(line, position=POS, record_timestamp_ms=TS_MS, max_future_skew_s=None)
        assert (e.shape, e.context, e.system, e.turn) == ("flat", (), "", 0)


@pytest.mark.parametrize("line", range(4))
def test_the_multi_turn_examples_carry_what_their_answers_depend_on(line: int) -> None:
    """The shipped multi-turn examples: the follow-ups get their earlier turns and the refusal its brief."""
    event = json.loads((EXAMPLES / "events-multiturn.jsonl").read_bytes().splitlines()[line])
    del event["_note"]  # not part of the event format (the fast path would decline it)
    e = _both_ways(event)
    expected: list[tuple[tuple[Turn, ...], str, int]] = [
        (
            (
                Turn("user", "Which kettles ship to Spain?"),
                Turn("assistant", "The blue enamel kettle and the steel kettle both ship to Spain."),
            ),
            event["messages"][0]["content"],
            1,
        ),
        (
            (
                Turn("user", "Can you cancel order K19?"),
                Turn("assistant", "Order K19 has not shipped yet, so I can cancel it. Shall I?"),
            ),
            "",
            1,
        ),
        (
            (
                Turn("user", "Which kettles ship to Spain?"),
                Turn("assistant", "The blue enamel kettle and the steel kettle both ship to Spain."),
            ),
            "",
            1,
        ),
        ((), event["messages"][0]["content"], 0),
    ]
    assert (e.context, e.system, e.turn) == expected[line]
