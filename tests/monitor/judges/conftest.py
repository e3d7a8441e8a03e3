"""Helpers for the LLM judge tests: settings pointing at the fake Messages API and fast backoff."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from monitor.backoff import Backoff
from monitor.config import Settings, load_settings
from monitor.judges.llm import LLMJudge
from monitor.judges.rubric import RubricJudge
from monitor.judges.statements import StatementsJudge
from tests.fake_messages_api import FakeMessagesAPI

# Backoff small enough that retry tests take milliseconds, not seconds.
FAST = Backoff(base_s=0.01, max_s=0.05)

QUESTION = "When did order A17 ship?"
PADDED = "Thanks for getting in touch. We also sell gift cards. Order A17 shipped on 3 March."
TIGHT = "Order A17 shipped on 3 March."


def judge_settings(api: FakeMessagesAPI, method: str = "rubric", **overrides: Any) -> Settings:
    """Settings for an LLM judge talking to `api` (2 s request timeout, 3 retries unless overridden)."""
    base: dict[str, Any] = {
        "judge": method,
        "judge_request_timeout_s": 2.0,
        "judge_max_retries": 3,
        **api.settings_overrides(),
    }
    base.update(overrides)
    return load_settings(**base)


MakeJudge = Callable[..., LLMJudge[Any]]


@pytest.fixture
async def make_judge(fake_messages_api: FakeMessagesAPI) -> AsyncIterator[MakeJudge]:
    """Build judges against the test's fake server (fast backoff unless overridden); closed afterwards."""
    made: list[LLMJudge[Any]] = []

    def make(method: str = "rubric", *, judge_kwargs: dict[str, Any] | None = None, **overrides: Any) -> LLMJudge[Any]:
        settings = judge_settings(fake_messages_api, method, **overrides)
        cls = RubricJudge if method == "rubric" else StatementsJudge
        judge = cls(settings.judge, **{"backoff": FAST, **(judge_kwargs or {})})
        made.append(judge)
        return judge

    yield make
    for judge in made:
        await judge.aclose()
