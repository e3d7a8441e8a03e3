"""Choosing the provider from the judge settings; each SDK is imported only when its provider is configured."""

from __future__ import annotations

import httpx2

from monitor.judges.providers.base import Provider
from monitor.judges.settings import JudgeSettings


def build_provider(settings: JudgeSettings, http_client: httpx2.AsyncClient | None = None) -> Provider:
    """The provider of `settings.provider`, sending through `http_client` when one is given (a test's transport)."""
    if settings.provider in ("openai", "azure_openai"):
        from monitor.judges.providers.openai_chat import OpenAIChat

        return OpenAIChat(settings, http_client)
    from monitor.judges.providers.anthropic_messages import AnthropicMessages

    return AnthropicMessages(settings, http_client)
