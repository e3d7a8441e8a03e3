"""Fixtures for judges from any provider (issue 41), as a plugin: wire it with
`pytest_plugins = ["tests.monitor.judges.conftest_providers"]` in the root conftest, or import the fixtures.

`fake_chat_completions` is a fresh fake OpenAI-compatible server per test (tests/fake_chat_completions.py);
`openai_client` is the REAL `AsyncOpenAI` pointed at it, without SDK retries so each test sees every answer."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from openai import AsyncOpenAI

from tests.fake_chat_completions import API_KEY, FakeChatCompletions


@pytest.fixture
def fake_chat_completions() -> Iterator[FakeChatCompletions]:
    """A fresh fake Chat Completions server for one test (brain replies, every mode off, until told otherwise)."""
    with FakeChatCompletions() as api:
        yield api


@pytest.fixture
async def openai_client(fake_chat_completions: FakeChatCompletions) -> AsyncIterator[AsyncOpenAI]:
    """The real `openai` client on the fake's `/v1` (no SDK retries, 5 s timeout); closed afterwards."""
    client = AsyncOpenAI(base_url=fake_chat_completions.openai_base_url, api_key=API_KEY, max_retries=0, timeout=5.0)
    yield client
    await client.close()
