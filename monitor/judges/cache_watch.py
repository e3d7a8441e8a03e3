"""Whether the prompt cache engages, read from the API's own counters on every reply rather than assumed from the
token estimate at start-up.

The API says nothing when it does not serve a prefix from the cache: below the model's real minimum both counters
stay 0, and an entry that expires (or a prefix that changes) is written again and never read. A run of
`COLD_REPLIES` replies in a row that read nothing, where the prefix should be cached (`PrefixCheck.should_cache`), is
worth one warning; a reply that reads the cache again re-arms it. `CacheWatch.observe` is the decision (pure: a
frozen `CacheChange` per reply); `JudgeClient` feeds it and logs."""

from __future__ import annotations

from dataclasses import dataclass

# Long enough that the replies of a cold start (the first requests of a burst each write the entry) and an odd miss
# never reach it, short enough to be told within minutes at any real traffic.
COLD_REPLIES = 20


@dataclass(frozen=True, slots=True)
class CacheChange:
    """What one reply changed: `warn` when it completed a cold run (say so now), `rearm` when it read the cache after
    a run that was warned about; `misses` the cold replies in a row so far and `written` the cache-write tokens over
    them (0: nothing was cached at all, the prefix is under the API's real minimum)."""

    warn: bool = False
    rearm: bool = False
    misses: int = 0
    written: int = 0


class CacheWatch:
    """Counts the replies in a row that read nothing from the cache, for one prefix and model. `armed` False (the
    prefix is under the minimum even by the usual estimate, and the start-up check said so) never warns."""

    def __init__(self, armed: bool, replies: int = COLD_REPLIES) -> None:
        self.armed = armed
        self.replies = replies
        self.misses = 0
        self.written = 0
        self.warned = False

    def observe(self, read_tokens: int, write_tokens: int, *, could_read: bool = True) -> CacheChange:
        """The change for one reply's `cache_read_input_tokens` and `cache_creation_input_tokens`. `could_read` False
        for a request sent before any reply had arrived: no entry can have existed for it, so it is no evidence."""
        if read_tokens > 0:
            rearm = self.warned
            self.misses, self.written, self.warned = 0, 0, False
            return CacheChange(rearm=rearm)
        if not could_read:
            return CacheChange(misses=self.misses, written=self.written)
        self.misses += 1
        self.written += write_tokens
        warn = self.armed and not self.warned and self.misses >= self.replies
        self.warned = self.warned or warn
        return CacheChange(warn=warn, misses=self.misses, written=self.written)
