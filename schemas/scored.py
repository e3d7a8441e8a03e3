"""The scored row: one per judged event, written to ClickHouse."""

from __future__ import annotations

import operator
from datetime import datetime
from typing import Any, Literal

import msgspec
from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.events import replace_lone_surrogates
from schemas.feedback import FEEDBACK_SAMPLE_RULE

U16 = 2**16 - 1
U32 = 2**32 - 1
I32 = 2**31 - 1

# Per-statement detail kept in a row. A judge can split a long answer into thousands of statements (the lexical
# judge makes one per sentence); beyond this the arrays only bloat the row and its insert, so they keep the
# first ones while `n_statements` (and the score) still count them all.
MAX_STORED_STATEMENTS = 1000
_STATEMENT_ARRAYS = ("statements", "verdicts", "verdict_reasons")

# Rows with status ok outrank error rows for the same (judge_id, event_id) in ReplacingMergeTree,
# so a redelivered event that scores after an earlier failure replaces the error row, never the reverse.
_OK_VERSION_BIT = 1 << 62
# A row judged because a user disliked an answer sampling skipped (sample_rule 'feedback') outranks error rows but
# never a live sampled ok row: when the live pipeline judges the same event after all, its unbiased row stays.
_FEEDBACK_OK_VERSION_BIT = 1 << 61


class ScoredRow(BaseModel):
    """One row of `relevancy_scores`. Field order is the column order of the DDL (checked by a test)."""

    model_config = ConfigDict(frozen=True)

    event_id: str
    conversation_id: str
    event_time: datetime
    app: str
    model: str
    prompt_version: str
    metadata: dict[str, str] = Field(default_factory=dict)
    judge: str
    judge_model: str
    judge_id: str
    status: Literal["ok", "error"]
    error: str = ""
    score: float | None = Field(default=None, ge=0.0, le=1.0)
    raw_score: float | None = None
    reasoning: str = ""
    statements: list[str] = Field(default_factory=list)
    verdicts: list[str] = Field(default_factory=list)
    verdict_reasons: list[str] = Field(default_factory=list)
    n_statements: int = Field(default=0, ge=0, le=U32)
    question: str = ""
    response: str = ""
    sample_rate: float = Field(default=1.0, gt=0.0, le=1.0)
    sample_rule: str = ""
    cached: bool = False
    latency_ms: int = Field(default=0, ge=0, le=U32)
    input_tokens: int = Field(default=0, ge=0, le=U32)
    output_tokens: int = Field(default=0, ge=0, le=U32)
    cache_read_tokens: int = Field(default=0, ge=0, le=U32)
    cache_write_tokens: int = Field(default=0, ge=0, le=U32)
    cost_usd: float | None = None  # NULL when the model's price is unknown, never a guess
    kafka_topic: str = ""
    kafka_partition: int = Field(default=-1, ge=-1, le=I32)
    kafka_offset: int = Field(default=-1, ge=-1)
    scored_at: datetime
    version: int = 0
    # Personal data replaced before the judge and the store saw the text: items per kind, and which recognizers
    # ran ("" when redaction was off). Added by migration 020, hence after `version`.
    redactions: dict[str, int] = Field(default_factory=dict)
    redactor: str = ""
    # The replay run that wrote the row ("" for the live consumer). Added by migration 036.
    replay_run: str = ""
    # A probability-weighted score's certainty (MONITOR_JUDGE_SCORE=expected). Added by migration 042.
    score_confidence: float | None = None
    # The conversation around the judged pair (issue 43), added by migration 043. `turn`: the judged question's index
    # among the conversation's user messages (0: the first); `context_turns`: the earlier messages the judge read
    # (after MONITOR_JUDGE_CONTEXT_TURNS / _MAX_CHARS cut them). `context` (a JSON array of {"role", "text"}) and
    # `system_instructions` follow MONITOR_STORE_TEXT as the question does ('' under none); `context_digest` is the
    # SHA-256 of what the judge read (`context_digest` in monitor.runtime.rows), '' when it read no context.
    turn: int = Field(default=0, ge=0, le=U32)
    context_turns: int = Field(default=0, ge=0, le=U16)
    context: str = ""
    system_instructions: str = ""
    context_digest: str = ""

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        """Cap the statement arrays and make every string encodable as UTF-8 (the driver refuses a lone surrogate,
        which would fail the whole batch); the decoder already cleans event text, this covers judge output too."""
        if not isinstance(data, dict):
            return data
        if _storable_as_is(data):  # the common case: nothing to cap or replace, so no copy of every value
            return data
        capped = {
            k: (v[:MAX_STORED_STATEMENTS] if k in _STATEMENT_ARRAYS and isinstance(v, list | tuple) else v)
            for k, v in data.items()
        }
        return {k: _utf8_safe(v) for k, v in capped.items()}

    def model_post_init(self, context: Any) -> None:
        """Check status against score, and derive `version` (ok rows outrank error rows) when not given."""
        if self.status == "ok" and self.score is None:
            raise ValueError("an ok row needs a score")
        if self.status == "error" and self.score is not None:
            raise ValueError("an error row must not carry a score")
        if not self.version:
            ms = int(self.scored_at.timestamp() * 1000)
            ok_bit = _FEEDBACK_OK_VERSION_BIT if self.sample_rule == FEEDBACK_SAMPLE_RULE else _OK_VERSION_BIT
            object.__setattr__(self, "version", ms | (ok_bit if self.status == "ok" else 0))

    def as_error(self, reason: str) -> ScoredRow:
        """This row as an error row without score, judge detail or text (for a row the store refused)."""
        return self.model_copy(
            update=dict(
                status="error",
                error=replace_lone_surrogates(reason[:1000]),
                score=None,
                raw_score=None,
                score_confidence=None,
                reasoning="",
                statements=[],
                verdicts=[],
                verdict_reasons=[],
                n_statements=0,
                question="",
                response="",
                context="",
                system_instructions="",
                version=self.version & ~(_OK_VERSION_BIT | _FEEDBACK_OK_VERSION_BIT),
            )
        )

    def as_tuple(self) -> tuple[Any, ...]:
        """Values in column order, for a columnar insert."""
        return _column_values(self)


_ENCODER = msgspec.json.Encoder()


def _storable_as_is(data: dict[str, Any]) -> bool:
    """Whether `_storable` may pass `data` on unchanged: no statement array over the cap, and no lone surrogate in
    any string (keys and nested values included)."""
    # One C call finds a lone surrogate anywhere: encoding as JSON (UTF-8) refuses it. What msgspec cannot encode
    # (a str subclass, say) is left to the copying path too.
    for key in _STATEMENT_ARRAYS:
        value = data.get(key)
        if isinstance(value, list | tuple) and len(value) > MAX_STORED_STATEMENTS:
            return False
    try:
        _ENCODER.encode(data)
    except Exception:  # UnicodeEncodeError for a lone surrogate; TypeError, OverflowError for what it cannot encode
        return False
    return True


def _utf8_safe(value: Any) -> Any:
    """`value` with lone surrogates replaced in its strings, including those inside lists and dicts."""
    if isinstance(value, str):
        return replace_lone_surrogates(value)
    if isinstance(value, list | tuple):
        return [_utf8_safe(v) for v in value]
    if isinstance(value, dict):
        return {_utf8_safe(k): _utf8_safe(v) for k, v in value.items()}
    return value


SCORED_COLUMNS: tuple[str, ...] = tuple(ScoredRow.model_fields)
_column_values = operator.attrgetter(*SCORED_COLUMNS)  # one C call for the whole row
