"""Verdict reuse: identical (judge, question, response, context) tuples pay for one judge call. A bounded cache keeps
recent verdicts for a TTL (FAQ-heavy traffic, upstream retries), and single flight makes identical pairs that
arrive together wait for the one call in progress instead of each paying for it."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from monitor.judges.base import Judgement
from schemas.events import Turn


def cache_key(judge_id: str, question: str, response: str, *, context: Sequence[Turn], system: str) -> bytes:
    """A digest of the judge identity and the exact texts: the pair, the system instructions and every earlier turn
    (its role and text), each length-prefixed and the turns counted, so no boundary can collide. The same answer to
    the same follow-up in another conversation is another question, so it is another key."""
    h = hashlib.blake2b(digest_size=16)
    h.update(len(context).to_bytes(8, "big"))
    for part in (judge_id, question, response, system, *(text for turn in context for text in turn)):
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.digest()


class VerdictCache:
    """A bounded LRU of successful judgements with a time-to-live. Only ok verdicts are stored."""

    def __init__(self, max_entries: int, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries = max_entries
        self.ttl_s = ttl_s
        self._clock = clock
        self._entries: OrderedDict[bytes, tuple[float, Judgement]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: bytes) -> Judgement | None:
        """The cached verdict, if present and fresh."""
        if self.max_entries <= 0:
            return None
        entry = self._entries.get(key)
        if entry is None or self._clock() - entry[0] > self.ttl_s:
            if entry is not None:
                del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry[1]

    def put(self, key: bytes, judgement: Judgement) -> None:
        """Store a verdict, evicting the least recently used beyond `max_entries`."""
        if self.max_entries <= 0:
            return
        self._entries[key] = (self._clock(), judgement)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)


Verdict = asyncio.Future[Judgement | None]


class VerdictReuse:
    """The cache plus single flight. A disabled cache (`max_entries` 0) disables reuse altogether."""

    def __init__(self, cache: VerdictCache) -> None:
        self.cache = cache
        self._judging: dict[bytes, Verdict] = {}

    def cached(self, key: bytes) -> Judgement | None:
        """A fresh cached verdict for `key`, if any."""
        return self.cache.get(key)

    def leader(self, key: bytes) -> Verdict | None:
        """The verdict of an identical pair being judged right now, if any."""
        return self._judging.get(key)

    def lead(self, key: bytes, task: asyncio.Task[Any]) -> None:
        """`task` judges `key`: identical pairs wait for its verdict. Registered synchronously, so identical
        pairs in the same fetch find it; published from a done-callback, not a `finally`, so that a task
        cancelled before it ever ran (revocation) still releases its followers."""
        if self.cache.max_entries <= 0:
            return
        verdict: Verdict = asyncio.get_running_loop().create_future()
        self._judging[key] = verdict
        task.add_done_callback(lambda t: self._publish(key, verdict, t))

    def _publish(self, key: bytes, verdict: Verdict, task: asyncio.Task[Any]) -> None:
        if self._judging.get(key) is verdict:
            del self._judging[key]
        outcome = None if task.cancelled() or task.exception() is not None else task.result()
        judgement = outcome if isinstance(outcome, Judgement) else None
        if judgement is not None:
            self.cache.put(key, judgement)
        # None (failed, or abandoned on revocation or shutdown): each follower judges for itself
        verdict.set_result(judgement)

    async def follow(self, key: bytes, leader: Verdict) -> Judgement | None:
        """Wait for the leader's verdict, following its successor if it fails; None when no leader is left
        (the caller then judges the pair itself, and so becomes the next leader)."""
        current: Verdict | None = leader
        while current is not None:
            judgement = await asyncio.shield(current)
            if judgement is not None:
                return judgement
            current = self._judging.get(key)
        return None
