"""Choosing the judge from settings."""

from __future__ import annotations

from monitor.config import ConfigError, Settings
from monitor.judges.lexical import LexicalJudge
from monitor.typing import Judge


def build_judge(settings: Settings) -> Judge:
    """The configured judge; raises `ConfigError` (one line) when it cannot be built."""
    if settings.judge == "lexical":
        return LexicalJudge(settings.judge_max_input_chars)
    if settings.anthropic_api_key is None:  # Settings refuses this already; kept for hand-built settings
        raise ConfigError(f"the {settings.judge} judge calls the Anthropic API: set MONITOR_ANTHROPIC_API_KEY (or ANTHROPIC_API_KEY)")
    if settings.judge == "rubric":
        from monitor.judges.rubric import RubricJudge

        return RubricJudge(settings)
    if settings.judge == "statements":
        from monitor.judges.statements import StatementsJudge

        return StatementsJudge(settings)
    raise ConfigError(f"invalid setting MONITOR_JUDGE: {settings.judge!r} is not available in this build")
