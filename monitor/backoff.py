"""The one retry policy of the monitor: capped exponential backoff with equal jitter.

Every loop that retries (the judge's calls, the sink's inserts, dead-letter publishes, alert notifications) takes
its waits from a `Backoff`. Equal jitter keeps at least half of each step, so clients that failed together spread
out without any of them retrying at once; a server's `retry-after` (read by `retry_after_seconds`) is honoured up to
a cap.

It imports nothing of the monitor, so every room may use it."""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Backoff:
    """Waits of `base_s`, doubling per retry up to `max_s`, each drawn from the upper half of its step."""

    base_s: float = 0.5
    max_s: float = 8.0
    retry_after_cap_s: float = 60.0
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not 0 < self.base_s <= self.max_s:
            raise ValueError(f"backoff needs 0 < base_s <= max_s, got base_s={self.base_s}, max_s={self.max_s}")

    def delay(self, retry: int, retry_after_s: float | None = None) -> float:
        """Seconds to wait before retry number `retry` (0 for the first), at least `retry_after_s` up to the cap."""
        step = min(self.max_s, self.base_s * 2.0 ** min(retry, 62))
        wait = step / 2 + self.rng.uniform(0, step / 2)
        if retry_after_s is not None:
            return max(wait, min(retry_after_s, self.retry_after_cap_s))
        return wait


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from `retry-after-ms`, `retry-after` (seconds or an HTTP date), or None."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    return max(0.0, email.utils.mktime_tz(parsed) - time.time())
