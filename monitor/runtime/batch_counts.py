"""What one fetched batch counts once rather than per event: the consumed and not-sampled metrics and the traffic
counts per minute and segment (consumed, sampled, not sampled, dead-lettered)."""

from __future__ import annotations

from consumers.decode import DecodedEvent
from monitor.judging.traffic_counts import MinuteSegment, TrafficCounter, minute_number
from monitor.runtime.metrics import Metrics

SAMPLED, NOT_SAMPLED, DEAD_LETTERED = 1, 2, 3


class BatchCounts:
    """The counts of one batch of one topic, added to the metrics and the traffic counter as they must be."""

    def __init__(self, metrics: Metrics, topic: str, records: int) -> None:
        self.metrics = metrics
        metrics.child(metrics.consumed, topic).inc(records)
        self._traffic: dict[MinuteSegment, list[int]] = {}  # segments in the order first seen
        self._unsampled: dict[str, int] = {}  # per app; flushed before any other use of the app label

    def dead_lettered(self, at: float) -> None:
        """A record that could not be decoded, at epoch second `at`."""
        self._count((minute_number(at), "", "", ""), DEAD_LETTERED)

    def decided(self, event: DecodedEvent, sampled: bool) -> None:
        """A decoded event and whether it was sampled."""
        # `_count` and `minute_number` written out: this runs once per event, and the two calls were half its cost.
        app = event.app
        segment = (int(event.epoch_s // 60), app, event.model, event.prompt_version)
        found = self._traffic.get(segment)
        if found is None:
            found = self._traffic[segment] = [0, 0, 0, 0, 0]  # in traffic_counts._FIELDS order
        found[0] += 1
        if sampled:
            found[SAMPLED] += 1
            self.flush_unsampled()
        else:
            found[NOT_SAMPLED] += 1
            unsampled = self._unsampled
            unsampled[app] = unsampled.get(app, 0) + 1

    def flush_unsampled(self) -> None:
        """Add the pending not-sampled counts, per app in the order first seen (so the app label's cap admits the
        same apps as counting each event at once would)."""
        metrics = self.metrics
        for app, n in self._unsampled.items():
            metrics.child(metrics.not_sampled, metrics.app_label(app, n)).inc(n)
        self._unsampled.clear()

    def close(self, traffic: TrafficCounter) -> None:
        """The batch is handled: add what is pending to the metrics and the traffic counter."""
        self.flush_unsampled()
        traffic.add_batch(self._traffic)

    def _count(self, segment: MinuteSegment, field: int) -> None:
        found = self._traffic.get(segment)
        if found is None:
            found = self._traffic[segment] = [0, 0, 0, 0, 0]  # in traffic_counts._FIELDS order
        found[0] += 1
        found[field] += 1
