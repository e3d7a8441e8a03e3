"""Choosing the judge from its settings."""

from __future__ import annotations

from pydantic import SecretStr

from monitor.judges.base import Judge
from monitor.judges.lexical import LexicalJudge
from monitor.judges.settings import JudgeSettings
from schemas.errors import ConfigError

ESTIMATE_ONLY_KEY = "no-key:estimate-only"  # an invalid key: were a dry run ever to send a request, it is refused


def build_judge(settings: JudgeSettings, *, estimate_only: bool = False) -> Judge:
    """The configured judge; raises `ConfigError` (one line naming the setting) when it cannot be built, before any
    client starts. With `estimate_only` (a dry run that prices calls and makes none) an LLM judge needs no key: a
    placeholder stands in, which no request carries."""
    if settings.method == "lexical":
        return LexicalJudge(settings.max_input_chars)
    # The only provider check: commands that build no judge (sql, alerts) need no key.
    settings.check_provider(estimate_only=estimate_only)
    if estimate_only and settings.effective_api_key is None:
        settings = settings.model_copy(update={"judge_api_key": SecretStr(ESTIMATE_ONLY_KEY)})
    if settings.method == "rubric":
        from monitor.judges.rubric import RubricJudge

        return RubricJudge(settings)
    if settings.method == "statements":
        from monitor.judges.statements import StatementsJudge

        return StatementsJudge(settings)
    raise ConfigError(f"invalid setting MONITOR_JUDGE: {settings.method!r} is not available in this build")
