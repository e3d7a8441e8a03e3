"""A conversation event for the privacy tests."""

from __future__ import annotations

from datetime import UTC, datetime

from schemas.events import ConversationEvent, KafkaPosition


def event(
    question: str = "q", response: str = "r", metadata: dict[str, str] | None = None, event_id: str = "e1"
) -> ConversationEvent:
    """A decoded event with the given text."""
    return ConversationEvent(
        event_id=event_id,
        conversation_id="c1",
        event_time=datetime(2026, 3, 3, tzinfo=UTC),
        app="support-bot",
        model="m",
        prompt_version="v1",
        metadata=metadata or {},
        question=question,
        response=response,
        shape="flat",
        source=KafkaPosition(topic="t", partition=0, offset=1),
    )
