"""Choosing the judge from settings."""

from __future__ import annotations

from monitor.config import ConfigError, Settings
from monitor.judges.lexical import LexicalJudge
from monitor.typing import Judge


def build_judge(settings: Settings) -> Judge:
    """The configured judge; raises `ConfigError` (one line) when it cannot be built."""
    if settings.judge == "lexical":
        return LexicalJudge()
    raise ConfigError(f"invalid setting MONITOR_JUDGE: {settings.judge!r} is not available in this build")
