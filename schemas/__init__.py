"""Data contracts of relevancy-monitor: the input event, the scored row and the ClickHouse DDL.

This package imports nothing else of ours; `consumers` and `monitor` import it.
"""

from schemas.ddl import render_ddl
from schemas.events import ChatEvent, ChatMessage, ConversationEvent, FlatEvent
from schemas.scored import SCORED_COLUMNS, ScoredRow

__all__ = [
    "SCORED_COLUMNS",
    "ChatEvent",
    "ChatMessage",
    "ConversationEvent",
    "FlatEvent",
    "ScoredRow",
    "render_ddl",
]
