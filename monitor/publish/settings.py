"""The publishing slice: whether and where scores go out as OpenTelemetry evaluation events. Env: MONITOR_<setting>."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, HttpUrl
from pydantic_settings import BaseSettings

from schemas.settings import MONITOR_SLICE


class PublishSettings(BaseSettings):
    """Publishing `gen_ai.evaluation.result` log records for the scores of OpenTelemetry spans."""

    model_config = MONITOR_SLICE

    publish_evaluations: Literal["off", "kafka", "otlp_http"] = Field(
        "off",
        description="publish each score of an OpenTelemetry span as a `gen_ai.evaluation.result` log record: to "
        "MONITOR_PUBLISH_TOPIC (`kafka`; a Collector's Kafka receiver forwards it anywhere) or to a Collector's "
        "MONITOR_PUBLISH_ENDPOINT (`otlp_http`); off by default",
    )
    publish_endpoint: HttpUrl = Field(
        HttpUrl("http://localhost:4318/v1/logs"),
        description="with `otlp_http`: the Collector's OTLP/HTTP logs endpoint",
    )
    publish_topic: str = Field(
        "relevancy-monitor.evaluations", min_length=1, description="the Kafka topic the evaluation records go to"
    )
    publish_encoding: Literal["otlp_proto", "otlp_json"] = Field(
        "otlp_proto",
        description="the encoding of the published records (the Collector's Kafka and OTLP/HTTP receivers read both)",
    )
    publish_relevant_at: float = Field(
        0.5, ge=0.0, le=1.0, description="scores at or above this are labelled `relevant`, below `not_relevant`"
    )
    publish_queue_max: int = Field(
        10_000,
        ge=1,
        description="scores waiting to be published; beyond it the oldest are dropped and counted, never the scoring",
    )
