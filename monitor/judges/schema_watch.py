"""Whether the judge's server enforces the structured-output schema, read from the replies themselves.

A server can accept a schema and ignore it with HTTP 200 (vLLM given keys it no longer knows, Ollama's hosted service,
a gateway in front of a model without structured output). Validation keeps every such reply from becoming a score,
but a server that does it often wastes calls and leaves events unscored: over `WINDOW_S`, once at least `MIN_REPLIES`
replies came back, a share of invalid ones above `WARN_SHARE` is worth one warning, and a share back under
`CLEAR_SHARE` re-arms it. `SchemaWatch.observe` is the decision (pure: the time is given); `JudgeClient` feeds it and
logs. The default alert rule `judge_schema_not_enforced` says the same from the stored error rows."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

WINDOW_S = 900.0
MIN_REPLIES = 20
WARN_SHARE = 0.05
CLEAR_SHARE = 0.02

Change = Literal["warn", "clear"] | None


@dataclass(slots=True)
class SchemaWatch:
    """The replies of the last `WINDOW_S` seconds (time, invalid) and whether a warning stands."""

    replies: deque[tuple[float, bool]] = field(default_factory=deque)
    invalid: int = 0
    warned: bool = False

    def observe(self, now: float, invalid: bool) -> Change:
        """Count one reply; "warn" when the invalid share first exceeds `WARN_SHARE`, "clear" when a standing warning
        falls under `CLEAR_SHARE`, else None."""
        self.replies.append((now, invalid))
        self.invalid += invalid
        while self.replies and self.replies[0][0] < now - WINDOW_S:
            _, was_invalid = self.replies.popleft()
            self.invalid -= was_invalid
        share = self.share
        if not self.warned and len(self.replies) >= MIN_REPLIES and share > WARN_SHARE:
            self.warned = True
            return "warn"
        if self.warned and share < CLEAR_SHARE:
            self.warned = False
            return "clear"
        return None

    @property
    def share(self) -> float:
        """The invalid share over the window (0 with no replies)."""
        return self.invalid / len(self.replies) if self.replies else 0.0
