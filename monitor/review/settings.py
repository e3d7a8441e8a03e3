"""The review slice of the settings: MONITOR_REVIEW_* (the review queue's routing rules file)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings

from schemas.settings import MONITOR_SLICE, ReadableFile


class ReviewSettings(BaseSettings):
    """Which routing rules feed the review queue of `relevancy-monitor ui`. Env: MONITOR_<setting>."""

    model_config = MONITOR_SLICE

    routes: ReadableFile = Field(
        None,
        validation_alias="review_routes",
        description="review queue routing rules YAML file (routes' shares, borderline band, reservation, window)",
        json_schema_extra={"shown_default": "the shipped default routes"},
    )
