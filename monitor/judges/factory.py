"""Choosing the judge from its settings."""

from __future__ import annotations

from monitor.judges.base import Judge
from monitor.judges.lexical import LexicalJudge
from monitor.judges.settings import JudgeSettings
from schemas.errors import ConfigError


def build_judge(settings: JudgeSettings) -> Judge:
    """The configured judge; raises `ConfigError` (one line) when it cannot be built."""
    if settings.method == "lexical":
        return LexicalJudge(settings.max_input_chars)
    if settings.api_key is None:  # the only key check: commands that build no judge (sql, alerts) need no key
        raise ConfigError(
            f"the {settings.method} judge calls the Anthropic API: set MONITOR_ANTHROPIC_API_KEY (or ANTHROPIC_API_KEY)"
        )
    if settings.method == "rubric":
        from monitor.judges.rubric import RubricJudge

        return RubricJudge(settings)
    if settings.method == "statements":
        from monitor.judges.statements import StatementsJudge

        return StatementsJudge(settings)
    raise ConfigError(f"invalid setting MONITOR_JUDGE: {settings.method!r} is not available in this build")
