"""Verdict cache: identical (judge, question, response) triples reuse a verdict within a TTL instead of paying
again (FAQ-heavy traffic, upstream retries)."""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable

from monitor.judges.base import Judgement


def cache_key(judge_id: str, question: str, response: str) -> bytes:
    """A digest of the judge identity and the exact texts (length-prefixed, so boundaries cannot collide)."""
    h = hashlib.blake2b(digest_size=16)
    for part in (judge_id, question, response):
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
        self.hits = 0
        self.misses = 0

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
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry[1]

    def put(self, key: bytes, judgement: Judgement) -> None:
        """Store a verdict, evicting the least recently used beyond `max_entries`."""
        if self.max_entries <= 0:
            return
        self._entries[key] = (self._clock(), judgement)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
