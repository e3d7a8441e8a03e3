"""The feedback slice of the settings: MONITOR_FEEDBACK_* (which topics carry users' feedback, how it is read, and
the budget for judging the answers users disliked that sampling skipped)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings

from consumers.feedback import FeedbackOptions
from schemas.settings import MONITOR_SLICE, CommaSeparated


class FeedbackSettings(BaseSettings):
    """Users' feedback. Env: MONITOR_<setting>."""

    model_config = MONITOR_SLICE

    topics: CommaSeparated = Field(
        (),
        validation_alias="feedback_topics",
        description="topics that carry users' feedback (thumbs, ratings), comma-separated; they may be the "
        "conversation topics themselves; empty: no feedback is read",
    )
    thumbs_evaluations: CommaSeparated = Field(
        ("user_feedback", "thumbs", "user_thumbs"),
        validation_alias="feedback_thumbs_evaluations",
        description="`gen_ai.evaluation.name`s of OpenTelemetry `gen_ai.evaluation.result` records that are thumbs "
        "(score 1 up, 0 down)",
    )
    rating_evaluations: CommaSeparated = Field(
        ("user_rating", "rating", "user_satisfaction"),
        validation_alias="feedback_rating_evaluations",
        description="`gen_ai.evaluation.name`s of OpenTelemetry `gen_ai.evaluation.result` records that are ratings "
        "(on a 1..MONITOR_FEEDBACK_RATING_SCALE scale)",
    )
    rating_scale: int = Field(
        5, ge=2, le=100, validation_alias="feedback_rating_scale", description="top of an OpenTelemetry rating's scale"
    )
    negative_rating_at_most: float = Field(
        0.25,
        ge=0.0,
        lt=1.0,
        validation_alias="feedback_negative_rating_at_most",
        description="a rating counts as negative at or below this point of its scale, mapped to 0..1 (0.25: 1 or 2 "
        "of 5)",
    )
    judge_budget: int = Field(
        60,
        ge=0,
        validation_alias="feedback_judge_budget",
        description="judge calls per hour, for the whole deployment (each replica takes its share of the "
        "partitions'), for answers users disliked that sampling skipped (read back from Kafka); 0: never",
    )
    lookback_s: float = Field(
        86_400.0,
        gt=0,
        validation_alias="feedback_lookback_s",
        description="how far before a feedback event its answer is looked for (in the store and in Kafka)",
    )
    read_max_records: int = Field(
        20_000,
        ge=100,
        validation_alias="feedback_read_max_records",
        description="most records read back from Kafka to find one answer",
    )
    resolve_wait_s: float = Field(
        300.0,
        ge=0,
        validation_alias="feedback_resolve_wait_s",
        description="how long after feedback was given its answer is looked for again when it is not found yet (not "
        "yet in Kafka) before the feedback is stored as unresolved",
    )

    def options(self) -> FeedbackOptions:
        """How the decoders read feedback under these settings."""
        return FeedbackOptions(
            frozenset(self.thumbs_evaluations),
            frozenset(self.rating_evaluations),
            self.rating_scale,
            self.negative_rating_at_most,
        )
