"""The once-a-minute line for OpenTelemetry spans that carry no text: "no scores" must never look like "no traffic".

GenAI instrumentations capture no message content by default, so a team that points the monitor at its Collector
topics before turning content on sees spans arrive and nothing scored. The line names the switches that turn it on;
the count per topic is the `otlp_spans_skipped{kind="no_content"}` metric."""

from __future__ import annotations

import time

import structlog

log = structlog.get_logger("monitor.runtime.no_content")

EVERY_S = 60.0
HOW_TO = (
    "the instrumentation captures no message content: set OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="
    "SPAN_ONLY (OpenTelemetry GenAI instrumentations; EVENT_ONLY puts it in logs), "
    "ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE=content (the Anthropic SDK's own spans), "
    "TRACELOOP_TRACE_CONTENT=true (OpenLLMetry) or leave OPENINFERENCE_HIDE_INPUTS/OUTPUTS unset (OpenInference)"
)


class NoContentNotice:
    """Counts spans without content per topic and logs them at most once every `every_s` seconds."""

    def __init__(self, every_s: float = EVERY_S) -> None:
        self.every_s = every_s
        self._counts: dict[str, int] = {}
        self._last: float | None = None

    def seen(self, topic: str, spans: int, now: float | None = None) -> bool:
        """Count `spans` without content on `topic`; True when this call logged the line."""
        self._counts[topic] = self._counts.get(topic, 0) + spans
        at = time.monotonic() if now is None else now
        if self._last is not None and at - self._last < self.every_s:
            return False
        log.warning("spans_without_content", spans=dict(self._counts), hint=HOW_TO)
        self._counts.clear()
        self._last = at
        return True
