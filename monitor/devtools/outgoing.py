"""A record to produce: its value, its key, and the topic when it is not the run's own (feedback may go elsewhere)."""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One record to send. `key` is the conversation id for conversations and their feedback, as real producers key
    them (the monitor finds an answer's partition from it); `topic` None means the topic `produce` was given."""

    value: bytes
    key: bytes | None = None
    topic: str | None = None


def keyed_by_conversation(value: bytes) -> Outgoing:
    """`value` keyed by its JSON `conversation_id` when it has a non-empty string one, unkeyed otherwise (malformed
    records included: they are sent as they are)."""
    try:
        event = json.loads(value)
    except ValueError:
        return Outgoing(value)
    conversation = event.get("conversation_id") if isinstance(event, dict) else None
    if isinstance(conversation, str) and conversation:
        return Outgoing(value, conversation.encode())
    return Outgoing(value)
