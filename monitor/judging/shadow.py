"""The shadow judge's settings, and what a record owes before its offset may be committed.

A record the shadow judge samples owes two rows, the primary's and the shadow's; its offset is done only when both
are durable (an error row counts). A crash, a revocation or a shutdown before both are written leaves the record
uncommitted: it is redelivered and judged again by both judges, and the rows already written collapse with the new
ones under the table's replacing key (app, judge_id, event_id)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from aiokafka import TopicPartition
from pydantic import Field, ValidationInfo, field_validator
from pydantic_settings import BaseSettings

from consumers.offsets import Ticket
from schemas.settings import MONITOR_SLICE


class ShadowSettings(BaseSettings):
    """The shadow slice of the settings: the method (None: off), its model (None: the primary's) and the share of
    the primary's judged events it judges too. Env: MONITOR_<setting>."""

    model_config = MONITOR_SLICE

    model: str | None = Field(
        None,
        min_length=1,
        validation_alias="shadow_judge_model",
        description="model of an LLM shadow judge",
        json_schema_extra={"shown_default": "the primary's, `MONITOR_JUDGE_MODEL`"},
    )
    method: Literal["lexical", "rubric", "statements"] | None = Field(
        None,
        validation_alias="shadow_judge",
        description="a second judge for a sub-sample of the judged events, to compare with `relevancy-monitor compare` "
        "(unset: none); its rows "
        "sit beside the primary's under its own judge_id with sample_rule `shadow:…`, within the same budget, rate "
        "limits, concurrency and circuit",
    )
    sample_rate: float = Field(
        0.05,
        ge=0.0,
        le=1.0,
        validation_alias="shadow_sample_rate",
        description="share of the events the primary judges that the shadow judge judges too (a salted hash of "
        "MONITOR_SAMPLE_KEY: the same "
        "events on every replica and replay)",
    )

    @field_validator("method")
    @classmethod
    def _model_of_a_shadow(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None and info.data.get("model") is not None:
            raise ValueError("unset, but MONITOR_SHADOW_JUDGE_MODEL is set: name the shadow judge it is the model of")
        return value


class RowsOwed:
    """How many rows each record still owes beyond the one every judged record owes (only shadowed records are
    kept here, so the map stays as small as the shadow's work in flight)."""

    def __init__(self) -> None:
        self._extra: dict[Ticket, int] = {}

    def __len__(self) -> int:
        return len(self._extra)

    def expect(self, ticket: Ticket, rows: int) -> None:
        """The record of `ticket` owes `rows` rows (1, or 2 with a shadow)."""
        if rows > 1:
            self._extra[ticket] = rows - 1

    def settle(self, ticket: Ticket) -> bool:
        """One row of the record is durable; True when it was the last one it owed (its offset is done)."""
        left = self._extra.pop(ticket, 0)
        if left > 1:
            self._extra[ticket] = left - 1
        return left == 0

    def forget(self, tps: Iterable[TopicPartition]) -> None:
        """Drop the records of partitions no longer ours (a late row then settles nothing: its ticket is stale)."""
        gone = set(tps)
        for ticket in [t for t in self._extra if t.tp in gone]:
            del self._extra[ticket]
