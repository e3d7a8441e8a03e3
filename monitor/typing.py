"""The Protocols between stages, in one place."""

from __future__ import annotations

from typing import Protocol

from monitor.judges.base import Judgement, JudgeInfo


class Judge(Protocol):
    """A relevancy judge: one async call per event. Raises `JudgeError` when it cannot score."""

    @property
    def info(self) -> JudgeInfo: ...

    async def judge(self, question: str, response: str) -> Judgement: ...

    async def aclose(self) -> None: ...
