"""The LLM judges through Chat Completions (OpenAI, Azure OpenAI, vLLM, Ollama, DeepSeek), with the REAL `openai` SDK
against the suite's wire-level fake: the structured-output ladder, validation that never turns an ignored schema into
a score, 429s and retry-after, log-probability scores, cached tokens and cost."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from structlog.testing import capture_logs

from monitor.config import load_settings
from monitor.judges.factory import build_judge
from monitor.judges.llm import LLMJudge
from monitor.judges.rubric import RubricJudge
from monitor.judges.statements import StatementsJudge
from schemas.errors import ConfigError, JudgeApiError, JudgeReplyInvalid
from tests.fake_chat_completions import (
    FakeChatCompletions,
    azure_rate_limited,
    cut,
    ignored,
    rate_limited,
)
from tests.monitor.judges.conftest import FAST, PADDED, QUESTION, TIGHT

PRICE = {"fake-chat-model": {"input": 1.0, "output": 2.0, "cache_read": 0.5, "cache_write": 0.0}}


@pytest.fixture
def chat_api() -> Iterator[FakeChatCompletions]:
    """A fresh fake Chat Completions server."""
    with FakeChatCompletions() as api:
        yield api


@pytest.fixture
async def make_chat_judge(chat_api: FakeChatCompletions) -> AsyncIterator[Any]:
    """Build rubric or statements judges on the fake (provider openai unless told), closed afterwards."""
    made: list[LLMJudge[Any]] = []

    def make(method: str = "rubric", provider: str = "openai", **overrides: Any) -> LLMJudge[Any]:
        base = {"judge": method, "judge_max_retries": 2, "judge_request_timeout_s": 2.0}
        settings = load_settings(**base, **chat_api.settings_overrides(provider), **overrides)
        cls = RubricJudge if method == "rubric" else StatementsJudge
        judge = cls(settings.judge, backoff=FAST)
        made.append(judge)
        return judge

    yield make
    for judge in made:
        await judge.aclose()


def _chosen(logs: list[dict[str, Any]]) -> str | None:
    events = [e for e in logs if e["event"] == "judge_structured_output_chosen"]
    return events[0]["mode"] if events else None


@pytest.mark.parametrize(
    ("server", "mode"),
    [
        ("openai", "json_schema"),
        ("deepseek: json_object only", "json_object"),
        ("no response_format", "tools"),
        ("no response_format, no tools", "prompt"),
        ("vllm ignoring every schema", "prompt"),
    ],
)
async def test_auto_keeps_the_first_mode_that_gives_a_valid_reply(
    chat_api: FakeChatCompletions, make_chat_judge: Any, server: str, mode: str
) -> None:
    """The probe walks json_schema, json_object, tools, prompt and keeps the first mode whose reply validates; the
    choice is logged once, every later request uses it, and the judgement is the brain's."""
    if "json_object only" in server:
        chat_api.json_object_only()
    if "no response_format" in server:
        chat_api.no_response_format()
    if "no tools" in server:
        chat_api.no_tools()
    if "ignoring" in server:
        chat_api.schema_ignored(1.0)
    judge = make_chat_judge("rubric", judge_prices=json.dumps(PRICE))
    with capture_logs() as logs:
        first = await judge.judge(QUESTION, TIGHT)
        second = await judge.judge(QUESTION, TIGHT)
    assert _chosen(logs) == mode and judge.client.mode == mode
    assert first.raw_score == second.raw_score == 4
    assert chat_api.chat_requests[-1].mechanism == ("prompt" if mode == "prompt" else mode)
    # The probe is spend: the first judgement carries the probe's tokens too, so it costs more than the second.
    assert first.usage.cost_usd is not None and second.usage.cost_usd is not None
    assert first.usage.input_tokens > second.usage.input_tokens and first.usage.cost_usd > second.usage.cost_usd
    assert chat_api.saw_guided_keys() == set()


async def test_a_probe_that_finds_no_mode_is_one_error_and_is_not_repeated_by_every_event(
    chat_api: FakeChatCompletions, make_chat_judge: Any
) -> None:
    """A server whose every reply is free text fails the probe: one JudgeApiError naming the setting to change, and
    the next event is refused without sending again (until the retry interval)."""
    chat_api.always(ignored())
    judge = make_chat_judge("rubric")
    with pytest.raises(JudgeApiError, match="MONITOR_JUDGE_STRUCTURED_OUTPUT") as exc:
        await judge.judge(QUESTION, TIGHT)
    assert "\n" not in str(exc.value)
    sent = len(chat_api.chat_requests)
    with pytest.raises(JudgeApiError) as again:
        await judge.judge(QUESTION, PADDED)
    assert len(chat_api.chat_requests) == sent
    assert again.value is not exc.value and again.value.usage is not None and again.value.usage.tokens == 0


async def test_a_server_ignoring_a_third_of_schemas_never_gets_a_score_from_an_invalid_reply(
    chat_api: FakeChatCompletions, make_chat_judge: Any
) -> None:
    """With a vLLM that answers a third of structured requests with free text, every score is the brain's own and
    every free-text reply is counted as invalid in its mode; a reply invalid twice is an error, never a score."""
    chat_api.schema_ignored(1 / 3)
    judge = make_chat_judge("statements", judge_structured_output="json_schema")
    scores = []
    for i in range(24):
        try:
            scores.append((await judge.judge(QUESTION, PADDED if i % 2 else TIGHT)).score)
        except JudgeReplyInvalid:
            scores.append(None)
    assert all(s is None or s == 1.0 or s == pytest.approx(1 / 3) for s in scores), scores
    assert judge.stats["invalid.json_schema"] >= 8 and judge.stats["ok"] + judge.stats["gave_up.invalid_reply"] == 24
    corrections = [r for r in chat_api.chat_requests if len(r.messages) == 4]
    assert len(corrections) == judge.stats["retry.invalid_reply"] > 0
    assert "not valid" in corrections[0].messages[-1]["content"]


async def test_a_reply_cut_at_max_tokens_is_corrected_or_an_error(
    chat_api: FakeChatCompletions, make_chat_judge: Any
) -> None:
    """finish_reason "length" makes a reply invalid whatever its text: corrected once, then an error."""
    judge = make_chat_judge("rubric", judge_structured_output="json_schema")
    chat_api.script(cut())
    assert (await judge.judge(QUESTION, TIGHT)).raw_score == 4
    chat_api.script(cut(), cut())
    with pytest.raises(JudgeReplyInvalid, match="cut off at max_tokens"):
        await judge.judge(QUESTION, TIGHT)


async def test_rate_limits_wait_retry_after_and_azure_retry_after_ms(
    chat_api: FakeChatCompletions, make_chat_judge: Any
) -> None:
    """A 429 with retry-after (OpenAI) and one with retry-after-ms (Azure) are retried and counted as rate limits."""
    judge = make_chat_judge("rubric", judge_structured_output="json_schema")
    chat_api.script(rate_limited(retry_after=0.05), azure_rate_limited(retry_after_ms=50))
    assert (await judge.judge(QUESTION, TIGHT)).raw_score == 4
    assert chat_api.statuses()[:3] == [429, 429, 200]
    assert judge.rate_limited == 2 and judge.stats["retry.rate_limited"] == 2


async def test_azure_sends_its_api_key_header_on_the_v1_route(
    chat_api: FakeChatCompletions, make_chat_judge: Any
) -> None:
    """azure_openai posts to /openai/v1/chat/completions with an `api-key` header and max_completion_tokens."""
    judge = make_chat_judge("rubric", provider="azure_openai", judge_structured_output="json_schema")
    assert (await judge.judge(QUESTION, TIGHT)).raw_score == 4
    request = chat_api.chat_requests[-1]
    assert request.path.startswith("/openai/v1/chat/completions")
    assert request.headers["api-key"] == chat_api.api_key
    assert "max_completion_tokens" in request.body and "max_tokens" not in request.body


async def test_a_local_server_gets_max_tokens_and_no_prompt_cache_key(
    chat_api: FakeChatCompletions, make_chat_judge: Any
) -> None:
    """An OpenAI-compatible server at its own URL gets `max_tokens` (vLLM, Ollama) and none of OpenAI's own keys."""
    judge = make_chat_judge("rubric", judge_structured_output="json_schema")
    await judge.judge(QUESTION, TIGHT)
    body = chat_api.chat_requests[-1].body
    assert body["max_tokens"] == judge.settings.max_tokens and "prompt_cache_key" not in body
    assert body["messages"][0]["role"] == "system" and body["messages"][0]["content"] == judge.system_prompt


async def test_expected_score_weights_the_levels_by_their_probabilities(
    chat_api: FakeChatCompletions, make_chat_judge: Any
) -> None:
    """With MONITOR_JUDGE_SCORE=expected, the score is the probability-weighted level over 0..4 at the score token,
    the integer level stays the raw score, and the confidence falls as the distribution spreads."""
    chat_api.score_distribution({"0": 0.0, "1": 0.0, "2": 0.2, "3": 0.5, "4": 0.3})
    judge = make_chat_judge("rubric", judge_score="expected", judge_structured_output="json_schema")
    sharp = await judge.judge(QUESTION, TIGHT)
    assert sharp.raw_score == 3
    assert sharp.score == pytest.approx((2 * 0.2 + 3 * 0.5 + 4 * 0.3) / 4, abs=1e-6)
    chat_api.score_distribution({"0": 0.2, "1": 0.2, "2": 0.2, "3": 0.2, "4": 0.2})
    flat = await judge.judge(QUESTION, TIGHT)
    assert sharp.confidence is not None and flat.confidence is not None
    assert flat.confidence == pytest.approx(0.0, abs=1e-6) and sharp.confidence > 0.2
    assert chat_api.chat_requests[-1].body["logprobs"] is True


async def test_cached_tokens_are_read_from_the_providers_usage(
    chat_api: FakeChatCompletions, make_chat_judge: Any
) -> None:
    """The automatic prefix cache's `cached_tokens` become cache-read tokens (out of the input count), priced as
    reads, from the second request on: the static system prompt comes first."""
    judge = make_chat_judge("rubric", judge_structured_output="json_schema", judge_prices=json.dumps(PRICE))
    first = await judge.judge(QUESTION, TIGHT)
    second = await judge.judge(QUESTION, PADDED)
    assert first.usage.cache_read_tokens == 0 and second.usage.cache_read_tokens >= 1024
    assert second.usage.input_tokens < first.usage.input_tokens
    assert judge.stats["tokens.cache_read"] == second.usage.cache_read_tokens


async def test_a_self_hosted_server_is_priced_per_call(chat_api: FakeChatCompletions, make_chat_judge: Any) -> None:
    """MONITOR_JUDGE_SERVER_USD_PER_HOUR spread over its calls an hour prices each call flat, whatever its tokens."""
    judge = make_chat_judge(
        "rubric",
        judge_structured_output="json_schema",
        judge_server_usd_per_hour=3.6,
        judge_server_calls_per_hour=1800,
    )
    verdict = await judge.judge(QUESTION, TIGHT)
    assert verdict.usage.cost_usd == pytest.approx(0.002)


async def test_the_provider_is_part_of_the_judge_id(chat_api: FakeChatCompletions, make_chat_judge: Any) -> None:
    """One model name served by two providers gives two judge ids; the anthropic provider keeps its former id."""
    openai_judge = make_chat_judge("rubric")
    azure_judge = make_chat_judge("rubric", provider="azure_openai")
    assert openai_judge.info.judge_id != azure_judge.info.judge_id
    anthropic = load_settings(judge="rubric", judge_model=chat_api.model, anthropic_api_key="k").judge
    assert "provider" not in RubricJudge(anthropic).params()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"judge_provider": "openai"}, "MONITOR_JUDGE_MODEL"),
        ({"judge_provider": "openai", "judge_model": "llama"}, "MONITOR_JUDGE_BASE_URL for a local server"),
        ({"judge_provider": "azure_openai", "judge_model": "gpt"}, "MONITOR_JUDGE_BASE_URL, e.g."),
        ({"judge_provider": "bedrock", "judge_model": "m", "judge_score": "expected"}, "MONITOR_JUDGE_SCORE"),
    ],
)
def test_a_wrong_combination_is_one_line_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, overrides: dict[str, str], message: str
) -> None:
    """Each impossible provider configuration is refused before any client starts, in one line naming the setting."""
    for var in ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MONITOR_JUDGE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    settings = load_settings(judge="rubric", **overrides)
    with pytest.raises(ConfigError, match=message) as exc:
        build_judge(settings.judge)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(
    ("provider", "extra", "token_ok"), [("bedrock", "[bedrock]", False), ("vertex", "[vertex]", True)]
)
def test_a_missing_cloud_extra_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, provider: str, extra: str, token_ok: bool
) -> None:
    """Without botocore (Bedrock) or google-auth (Vertex's default credentials) the judge is refused at start in one
    line naming the extra to install; Vertex with an access token needs no google-auth."""
    from monitor.judges import settings as judge_settings_module

    monkeypatch.setattr(judge_settings_module, "_installed", lambda module: False)
    base = {
        "judge": "rubric",
        "judge_provider": provider,
        "judge_model": "m",
        "judge_region": "r",
        "judge_project": "p",
    }
    with pytest.raises(ConfigError, match=re.escape(f"relevancy-monitor{extra}")) as exc:
        build_judge(load_settings(**base).judge, estimate_only=True)
    assert "\n" not in str(exc.value)
    with_token = load_settings(**base, judge_api_key="ya29.token").judge
    if token_ok:
        with_token.check_provider(estimate_only=True)
    else:
        with pytest.raises(ConfigError):
            with_token.check_provider(estimate_only=True)
