"""The Protocols between the parts of the monitor, in one place."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from monitor.judges.base import JudgeInfo, Judgement


class Judge(Protocol):
    """A relevancy judge: one async call per event. Raises `JudgeError` when it cannot score."""

    @property
    def info(self) -> JudgeInfo:
        """The identity stored on every row."""
        ...

    @property
    def stats(self) -> Mapping[str, int]:
        """API counters (`attempts`, `error.<kind>`, `retry.<kind>`, `tokens.<type>`, ...); empty for a judge
        that calls no API."""
        ...

    @property
    def rate_limited(self) -> int:
        """How many 429 responses this judge has met so far, retried ones included (adaptive concurrency and
        the freshness factor read the change); always 0 for a judge that calls no API."""
        ...

    async def judge(self, question: str, response: str) -> Judgement:
        """Score one pair."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...
