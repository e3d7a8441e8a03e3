"""Live traffic judged end to end through each provider, configured only by the provider settings: tansu in,
chDB out, the REAL SDKs (`openai`, `AsyncAnthropicBedrock`, `AsyncAnthropicVertex`) against the suite's wire-level
fakes. No event is lost, no invalid reply is stored as a score, and tokens and cost come from the provider's usage."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from monitor.config import Settings
from monitor.devtools.localbroker import LocalBroker
from monitor.store.async_store import AsyncStore
from tests.conftest import EXAMPLES
from tests.fake_chat_completions import FakeChatCompletions
from tests.fake_messages_api import FakeMessagesAPI
from tests.harness import produce_values
from tests.monitor.runtime.test_pipeline_llm import run_until_committed

FLAT = (EXAMPLES / "events-flat.jsonl").read_bytes().splitlines()
CHAT_PRICE = json.dumps({"fake-chat-model": {"input": 1.0, "output": 2.0, "cache_read": 0.5, "cache_write": 0.0}})
ROWS = (
    "SELECT event_id, status, score, raw_score, error, judge_model, input_tokens, output_tokens, cache_read_tokens, "
    "cost_usd FROM {table} FINAL ORDER BY event_id"
)


@pytest.fixture
def chat_api() -> Iterator[FakeChatCompletions]:
    """A fake OpenAI-compatible server for one test."""
    with FakeChatCompletions() as api:
        yield api


async def _rows(store: AsyncStore) -> list[tuple[Any, ...]]:
    return list((await store.query(ROWS.format(table=store.store.qualified_table))).rows)


@pytest.mark.parametrize("provider", ["openai", "azure_openai"])
async def test_an_openai_compatible_server_ignoring_a_third_of_schemas_stores_no_invalid_score(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    chat_api: FakeChatCompletions,
    provider: str,
) -> None:
    """Every event gets one row; with a third of structured replies ignored, each ok row holds the brain's score
    (from a valid reply or its correction) and each other row is an invalid_reply error; tokens, cached tokens and
    cost come from the server's usage."""
    chat_api.schema_ignored(1 / 3)
    settings = make_settings(
        judge="rubric",
        judge_prices=CHAT_PRICE,
        judge_concurrency=2,
        **chat_api.settings_overrides(provider),  # type: ignore[arg-type]
    )
    await produce_values(broker.bootstrap, settings.kafka.topics[0], FLAT)
    await run_until_committed(settings, async_store, broker.bootstrap, len(FLAT))
    rows = await _rows(async_store)
    assert len(rows) == len(FLAT)
    for _, status, score, raw, error, model, inp, out, cached, cost in rows:
        assert model == chat_api.model and inp > 0 and out > 0 and cost is not None and cost > 0
        if status == "ok":
            assert raw in (0, 1, 2, 3, 4) and score == raw / 4
        else:
            assert score is None and error.startswith("invalid_reply")
    assert sum(r[8] for r in rows) > 0  # the static prompt came first: the server's prefix cache engaged
    assert chat_api.saw_guided_keys() == set()


@pytest.mark.parametrize("platform", ["bedrock", "vertex"])
async def test_claude_on_bedrock_and_vertex_judges_live_traffic(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    fake_messages_api: FakeMessagesAPI,
    monkeypatch: pytest.MonkeyPatch,
    platform: str,
) -> None:
    """Bedrock (SigV4 from the AWS variables) and Vertex (an access token) reach the Messages fake on their own
    paths; the mode probe keeps json_schema; rows carry the platform's model id, priced as its Claude model."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    model = "us.anthropic.claude-haiku-4-5-20251001-v1:0" if platform == "bedrock" else "claude-haiku-4-5@20251001"
    extra = {"judge_project": "proj-1", "judge_api_key": "ya29.token"} if platform == "vertex" else {}
    settings = make_settings(
        judge="statements",
        judge_provider=platform,
        judge_model=model,
        judge_base_url=fake_messages_api.base_url,
        judge_region="us-east-1" if platform == "bedrock" else "us-east5",
        **extra,
    )
    await produce_values(broker.bootstrap, settings.kafka.topics[0], FLAT)
    await run_until_committed(settings, async_store, broker.bootstrap, len(FLAT))
    rows = await _rows(async_store)
    assert [r[1] for r in rows] == ["ok"] * len(FLAT)
    assert all(r[5] == model and r[9] is not None and r[9] > 0 for r in rows)
    sent = fake_messages_api.message_requests
    assert {r.platform for r in sent} == {platform} and {r.model for r in sent} == {model}
    assert all(r.body.get("output_config") for r in sent)
    if platform == "bedrock":
        assert all(r.headers["authorization"].startswith("AWS4-HMAC-SHA256") for r in sent)
    else:
        assert all(r.headers["authorization"] == "Bearer ya29.token" for r in sent)


async def test_expected_scores_are_stored_beside_the_level_with_their_confidence(
    broker: LocalBroker,
    make_settings: Callable[..., Settings],
    async_store: AsyncStore,
    chat_api: FakeChatCompletions,
) -> None:
    """With MONITOR_JUDGE_SCORE=expected, each row's score is the probability-weighted level, raw_score the integer
    level the model wrote, and score_confidence the certainty (one minus the normalised entropy)."""
    chat_api.score_distribution({"0": 0.05, "1": 0.05, "2": 0.1, "3": 0.6, "4": 0.2})
    settings = make_settings(
        judge="rubric", judge_score="expected", judge_structured_output="json_schema", **chat_api.settings_overrides()
    )
    await produce_values(broker.bootstrap, settings.kafka.topics[0], FLAT)
    await run_until_committed(settings, async_store, broker.bootstrap, len(FLAT))
    table = async_store.store.qualified_table
    rows = (await async_store.query(f"SELECT score, raw_score, score_confidence FROM {table} FINAL")).rows
    assert len(rows) == len(FLAT)
    expected = (0.05 * 1 + 0.1 * 2 + 0.6 * 3 + 0.2 * 4) / 4
    for score, raw, confidence in rows:
        assert raw == 3 and score == pytest.approx(expected, abs=1e-5)
        assert confidence is not None and 0.2 < confidence < 0.6
