"""Which events of a replay's range are judged, and why the others are not (pure).

In this order: an event erased by `forget` is never scored again; one older than the retention would be deleted by
the table's TTL as soon as it is written, so it is left out; then the usual sampling decides (its hash is the live
one, so the same events are sampled as live, and a new judge's rows pair with the live judge's). Whether the judge
already scored an event needs the store: `monitor.replay.scored_lookup` decides that for a whole batch."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum

from consumers.sampling import SampleDecision, Sampler
from monitor.store.erased_ids import ErasedIds
from schemas.events import ConversationEvent


class Skip(Enum):
    """Why a record of the range is not judged."""

    MALFORMED = "malformed"  # not a judgeable event (the live consumer dead-lettered it already)
    ERASED = "erased"  # its conversation or event was erased with `forget`
    EXPIRED = "expired"  # older than MONITOR_RETENTION_DAYS: the TTL would delete its row at once
    NOT_SAMPLED = "not_sampled"
    ALREADY_SCORED = "already_scored"  # this judge has a live row for it (or, with --resume, a replay's ok row)
    NO_TEXT = "no_text"  # --from-store: the store kept no text for it


def triage(
    event: ConversationEvent, sampler: Sampler, erased: ErasedIds, keep_after: datetime | None
) -> Skip | SampleDecision:
    """The skip reason of one decoded event, or its sampling decision when it is to be judged."""
    if erased.is_erased(event.conversation_id, event.event_id):
        return Skip.ERASED
    if keep_after is not None and event.event_time < keep_after:
        return Skip.EXPIRED
    # The event's own time stands for "now": a rule with a per-window minimum counts history window by window.
    decision = sampler.decide(event, now=event.event_time.timestamp())
    return decision if decision.sampled else Skip.NOT_SAMPLED


@dataclass(slots=True)
class Tally:
    """What a replay did with its range: records read, skipped by reason (malformed ones by decode reason), judged
    (ok and failed rows written), and spent."""

    read: int = 0
    before_start: int = 0  # records older than the start read past its offset (a coarse time index), not in `read`
    skipped: Counter[Skip] = field(default_factory=Counter)
    malformed: Counter[str] = field(default_factory=Counter)
    scored: int = 0
    failed: int = 0
    spent_usd: float = 0.0
    priced: bool = True  # false once a row came back without a cost (an unknown model price)

    @property
    def judged(self) -> int:
        """Rows written: ok and error."""
        return self.scored + self.failed

    def skip(self, reason: Skip, n: int = 1) -> None:
        """Count `n` records left out for `reason`."""
        self.skipped[reason] += n
