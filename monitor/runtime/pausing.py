"""Applying backpressure's decision (`monitor.runtime.backpressure`): pause or resume fetching, flush at the cap."""

from __future__ import annotations

import structlog

from consumers.offsets import Ticket
from consumers.source import KafkaSource
from monitor.runtime.backpressure import Backpressure
from monitor.runtime.metrics import Metrics
from monitor.runtime.sink import ClickHouseSink

log = structlog.get_logger("monitor.runtime.pausing")


class Pausing:
    """Pauses `source` while too much is in flight or the judge's circuit is open, and exports the state."""

    def __init__(self, backpressure: Backpressure, source: KafkaSource, sink: ClickHouseSink[Ticket], metrics: Metrics):
        self.backpressure, self.source, self.sink, self.metrics = backpressure, source, sink, metrics

    def update(self, in_flight: int, circuit_open: bool) -> None:
        """Apply the decision for the current in-flight count and circuit state."""
        self.metrics.in_flight.set(in_flight)
        self.metrics.breaker_open.set(1 if circuit_open else 0)
        change = self.backpressure.update(in_flight, circuit_open)
        if change.flush_now:
            self.sink.request_flush()
        if change.pause is True:
            self.source.pause()
            self.metrics.paused.set(1)
            cap = self.backpressure.gate.high
            log.warning("consumption_paused", reasons=sorted(change.reasons), in_flight=in_flight, cap=cap)
        elif change.pause is False:
            self.source.resume()
            self.metrics.paused.set(0)
            log.info("consumption_resumed", in_flight=in_flight)
