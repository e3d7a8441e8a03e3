"""Pure: what of a conversation the judge reads besides the judged question and answer.

The earlier turns explain what a follow-up refers to ("and the second one?"), and the system instructions say what
the assistant was asked to do (whether a refusal was the right answer). Both are bounded, so that a long
conversation costs a known number of tokens: the newest `turns` messages are kept, the oldest of them are dropped
until the text fits in `max_chars`, and when even the newest alone does not fit its beginning is cut with a marker
(the end of a message is what the question follows). The system instructions are cut at the end to the same cap."""

from __future__ import annotations

from dataclasses import dataclass

from schemas.events import ConversationEvent, Turn

CUT_MARK = "[…earlier text cut] "
SYSTEM_CUT_MARK = " […rest of the instructions cut]"


@dataclass(frozen=True, slots=True)
class ContextWindow:
    """How much context the judge reads: earlier messages kept (0: none), their text at most, and whether the
    system instructions are given (cut to `max_chars` as well)."""

    turns: int = 6
    max_chars: int = 8_000
    system: bool = True


def windowed(event: ConversationEvent, window: ContextWindow) -> ConversationEvent:
    """`event` with its context and system instructions cut to `window` (the same event when nothing is cut)."""
    turns = fit(event.context[-window.turns :] if window.turns else (), window.max_chars)
    system = cut_system(event.system, window.max_chars) if window.system else ""
    if turns == event.context and system == event.system:
        return event
    return event.model_copy(update={"context": turns, "system": system})


def fit(turns: tuple[Turn, ...], max_chars: int) -> tuple[Turn, ...]:
    """The newest of `turns` whose text fits in `max_chars`, oldest dropped first; when the newest alone is longer,
    its end, after a marker."""
    kept: list[Turn] = []
    room = max_chars
    for turn in reversed(turns):
        if len(turn.text) <= room:
            kept.append(turn)
            room -= len(turn.text)
            continue
        if not kept:
            tail = turn.text[len(turn.text) - max(room - len(CUT_MARK), 0) :] if room > len(CUT_MARK) else ""
            kept.append(Turn(turn.role, CUT_MARK + tail))
        break
    return tuple(reversed(kept))


def cut_system(system: str, max_chars: int) -> str:
    """The system instructions, their beginning kept within `max_chars` with a marker when cut."""
    if len(system) <= max_chars:
        return system
    return system[: max(max_chars - len(SYSTEM_CUT_MARK), 0)] + SYSTEM_CUT_MARK
