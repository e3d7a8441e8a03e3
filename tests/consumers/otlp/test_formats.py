"""MONITOR_INPUT_FORMAT and MONITOR_OTLP_LOGS_TOPICS: which decoder each topic's records get."""

from __future__ import annotations

import pytest

from consumers.settings import KafkaSettings, TopicFormat
from monitor.config import load_settings
from schemas.errors import ConfigError


def test_one_format_for_every_topic_or_one_per_topic() -> None:
    """A bare format applies to every topic; topic=format pairs override it; the logs topics hold log records."""
    k = KafkaSettings(kafka_topics="a,otlp_logs,c", input_format="otlp_json,a=events")
    assert k.format_of("a") == TopicFormat("events", None)
    assert k.format_of("otlp_logs") == TopicFormat("logs", "otlp_json")
    assert k.format_of("c") == TopicFormat("spans", "otlp_json")
    assert KafkaSettings(kafka_topics="spans,other", input_format="spans=otlp_proto").format_of("other") == TopicFormat(
        "events", None
    )
    assert KafkaSettings().format_of("conversations") == TopicFormat("events", None)


@pytest.mark.parametrize(
    "value", ["otlp", "conversations=proto", "conversations=otlp_proto,json", "conversatons=otlp_json"]
)
def test_an_unknown_format_is_a_one_line_error_naming_the_variable(value: str) -> None:
    """An unknown format is refused at start, in one line that names MONITOR_INPUT_FORMAT and the formats."""
    with pytest.raises(ConfigError) as e:
        load_settings(input_format=value)
    message = str(e.value)
    assert "\n" not in message and "MONITOR_INPUT_FORMAT" in message
    assert ("otlp_proto" in message) != ("conversatons" in message)  # the formats, or the topic not consumed
