"""Choosing the judge from settings."""

from __future__ import annotations

import pytest

from monitor.config import load_settings
from monitor.judges.factory import build_judge
from monitor.judges.lexical import LexicalJudge
from monitor.judges.rubric import RubricJudge
from monitor.judges.statements import StatementsJudge
from schemas.errors import ConfigError
from tests.fake_messages_api import FakeMessagesAPI
from tests.monitor.judges.conftest import QUESTION, TIGHT, judge_settings


@pytest.mark.parametrize(("method", "cls"), [("rubric", RubricJudge), ("statements", StatementsJudge)])
async def test_build_judge_returns_a_working_llm_judge(
    fake_messages_api: FakeMessagesAPI, method: str, cls: type
) -> None:
    """build_judge returns the rubric or statements judge, not heuristic, scoring with one API request."""
    judge = build_judge(judge_settings(fake_messages_api, method).judge)
    try:
        assert isinstance(judge, cls)
        assert judge.info.method == method and judge.info.heuristic is False
        assert (await judge.judge(QUESTION, TIGHT)).score == 1.0
        assert len(fake_messages_api.message_requests) == 1
    finally:
        await judge.aclose()


def test_build_judge_lexical_needs_no_key() -> None:
    """build_judge returns the lexical judge without any API key."""
    assert isinstance(build_judge(load_settings(judge="lexical").judge), LexicalJudge)


@pytest.mark.parametrize("method", ["rubric", "statements"])
def test_llm_judge_without_api_key_is_a_one_line_config_error(monkeypatch: pytest.MonkeyPatch, method: str) -> None:
    """An LLM judge without an API key is a one-line ConfigError naming MONITOR_ANTHROPIC_API_KEY."""
    for var in ("MONITOR_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ConfigError) as exc:
        build_judge(load_settings(judge=method).judge)
    assert "MONITOR_ANTHROPIC_API_KEY" in str(exc.value) and "\n" not in str(exc.value)
