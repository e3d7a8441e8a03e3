"""The fake Chat Completions server (tests/fake_chat_completions.py) driven by the REAL `openai` SDK: each mode the
provider tests of issue 41 rely on, briefly."""

from __future__ import annotations

import json
import math
import threading
import urllib.error
import urllib.request
from typing import Any, cast

import anthropic
import openai
import pytest
from openai import AsyncAzureOpenAI, AsyncOpenAI
from openai.types.chat import ChatCompletion, ChatCompletionMessageFunctionToolCall

from monitor.judges.rubric import RubricReply
from monitor.judges.statements import StatementsReply
from tests.fake_chat_completions import (
    API_KEY,
    ChatReply,
    Drop,
    FakeChatCompletions,
    azure_rate_limited,
    cut,
    ignored,
    rate_limited,
    server_error,
    slow,
    tokenize,
    unavailable,
)

SYSTEM = 'You grade relevancy 0-4. Reply with a JSON object with keys "reasoning" and "score". '
STATEMENTS_SYSTEM = 'Split the response into statements. Reply with a JSON object: "statements" and "verdicts". '
USER = (
    "<user_question_c0de>\nWhen did order A17 ship?\n</user_question_c0de>\n"
    "<assistant_response_c0de>\nThanks for writing. Order A17 shipped on 3 March.\n</assistant_response_c0de>\n"
    "Reply with the JSON object only."
)
pytest_plugins = ["tests.monitor.judges.conftest_providers"]  # until the suite's conftest loads it

RUBRIC = {"reasoning": "1 of 2 sentences address the question.", "score": 2}  # what the brain answers USER


def messages(system: str = SYSTEM, user: str = USER) -> list[dict[str, str]]:
    """The judge's two messages: the static system prompt, then the delimited user message."""
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def json_schema(model: type[Any] = RubricReply, strict: bool = True) -> dict[str, Any]:
    """A json_schema `response_format` for `model` (closed and fully required, as strict mode wants)."""
    schema = anthropic.transform_schema(model)
    return {"type": "json_schema", "json_schema": {"name": model.__name__.lower(), "schema": schema, "strict": strict}}


def tool(model: type[Any] = RubricReply) -> dict[str, Any]:
    """A strict function tool whose parameters are `model`'s schema."""
    name = model.__name__.lower()
    return {
        "type": "function",
        "function": {"name": name, "parameters": anthropic.transform_schema(model), "strict": True},
    }


async def create(client: AsyncOpenAI | AsyncAzureOpenAI, **params: Any) -> ChatCompletion:
    """One non-streaming chat completion (model "gpt-test" and the judge's messages unless given)."""
    params = {"model": "gpt-test", "messages": messages(), **params}
    return cast(ChatCompletion, await client.chat.completions.create(**params))


def arguments(reply: ChatCompletion) -> str:
    """The arguments of the reply's first (function) tool call."""
    calls = reply.choices[0].message.tool_calls or []
    assert calls and isinstance(calls[0], ChatCompletionMessageFunctionToolCall), reply
    return calls[0].function.arguments


def raw_post(api: FakeChatCompletions, path: str, body: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
    """POST `body` to `path` with the right bearer key and no SDK; returns status, headers and the JSON answer."""
    headers = {"content-type": "application/json", "authorization": f"Bearer {API_KEY}"}
    req = urllib.request.Request(api.base_url + path, data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return int(resp.status), dict(resp.headers), json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read())


def chat_body(**params: Any) -> dict[str, Any]:
    """A minimal raw chat request body."""
    return {"model": "gpt-test", "messages": messages(), **params}


async def test_json_schema_reply_has_openais_shape(
    fake_chat_completions: FakeChatCompletions, openai_client: AsyncOpenAI
) -> None:
    """A json_schema request gets the brain's reply as JSON content in OpenAI's exact reply shape, for the rubric and
    the statements schema alike; the model is echoed and the request recorded."""
    reply = await create(openai_client, response_format=json_schema(), max_completion_tokens=300)
    choice = reply.choices[0]
    assert reply.object == "chat.completion" and reply.model == "gpt-test" and reply.id.startswith("chatcmpl-")
    assert choice.index == 0 and choice.finish_reason == "stop" and choice.logprobs is None
    assert choice.message.role == "assistant" and not choice.message.tool_calls
    assert RubricReply.model_validate_json(choice.message.content or "") == RubricReply.model_validate(RUBRIC)
    assert reply.usage is not None and reply.usage.prompt_tokens_details is not None
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    statements = await create(
        openai_client, messages=messages(STATEMENTS_SYSTEM), response_format=json_schema(StatementsReply)
    )
    parsed = StatementsReply.model_validate_json(statements.choices[0].message.content or "")
    assert [v.verdict for v in parsed.verdicts] == ["no", "yes"]
    assert [r.mechanism for r in fake_chat_completions.chat_requests] == ["json_schema", "json_schema"]


async def test_auth_by_bearer_or_api_key_and_a_keyless_local_server() -> None:
    """A wrong key is a 401; Azure's `api-key` header is accepted; `require_auth=False` takes any key."""
    with FakeChatCompletions() as api:
        async with AsyncOpenAI(base_url=api.openai_base_url, api_key="wrong", max_retries=0) as bad:
            with pytest.raises(openai.AuthenticationError):
                await create(bad)
        async with AsyncOpenAI(
            base_url=api.azure_base_url, api_key="unused", default_headers={"api-key": API_KEY}, max_retries=0
        ) as azure_v1:
            await create(azure_v1)
        assert api.statuses() == [401, 200] and api.requests[1].route == "azure_v1"
    with FakeChatCompletions(require_auth=False) as local:
        async with AsyncOpenAI(base_url=local.openai_base_url, api_key="EMPTY", max_retries=0) as client:
            assert (await create(client)).choices[0].message.content


async def test_azure_deployments_route(fake_chat_completions: FakeChatCompletions) -> None:
    """`AsyncAzureOpenAI` posts to `/openai/deployments/{d}/chat/completions?api-version=…` with `api-key`; the
    deployment is the model; without `api-version` the route is a 404, and a base URL without `/v1` finds nothing."""
    async with AsyncAzureOpenAI(
        azure_endpoint=fake_chat_completions.base_url, api_version="2024-10-21", api_key=API_KEY, max_retries=0
    ) as azure:
        reply = await create(azure, model="judge-deployment")
    req = fake_chat_completions.requests[0]
    assert reply.model == "judge-deployment" and req.route == "azure_deployment" and req.headers["api-key"] == API_KEY
    assert req.path == "/openai/deployments/judge-deployment/chat/completions?api-version=2024-10-21"
    assert raw_post(fake_chat_completions, "/openai/deployments/d/chat/completions", chat_body())[0] == 404
    status, _, error = raw_post(fake_chat_completions, "/chat/completions", chat_body())
    assert status == 404 and error["error"]["type"] == "invalid_request_error"


async def test_tools_answer_with_a_tool_call(
    fake_chat_completions: FakeChatCompletions, openai_client: AsyncOpenAI
) -> None:
    """With a function tool the reply is `tool_calls[0].function.arguments` (JSON) and no content; a named
    `tool_choice` finishes "stop" as on OpenAI, "required" finishes "tool_calls"."""
    named = {"type": "function", "function": {"name": "rubricreply"}}
    for choice, finish in ((named, "stop"), ("required", "tool_calls")):
        reply = await create(openai_client, tools=[tool()], tool_choice=choice)
        message = reply.choices[0].message
        assert message.content is None and reply.choices[0].finish_reason == finish and message.tool_calls
        call = message.tool_calls[0]
        assert call.type == "function" and call.function.name == "rubricreply"
        assert json.loads(call.function.arguments) == RUBRIC
    assert fake_chat_completions.chat_requests[0].mechanism == "tools"


async def test_prompt_mode_reads_the_schema_from_the_prompt_and_can_wrap_it(
    fake_chat_completions: FakeChatCompletions, openai_client: AsyncOpenAI
) -> None:
    """Without any structured-output field the reply is the JSON the prompt describes, plain, in a ```json fence or
    inside prose, as `prompt_wrapping` says."""
    plain = await create(openai_client)
    assert json.loads(plain.choices[0].message.content or "") == RUBRIC
    fake_chat_completions.prompt_wrapping("fence")
    fenced = (await create(openai_client)).choices[0].message.content or ""
    assert fenced.startswith("Here is my evaluation:\n```json\n") and json.dumps(RUBRIC) in fenced
    fake_chat_completions.prompt_wrapping("prose")
    statements = (await create(openai_client, messages=messages(STATEMENTS_SYSTEM))).choices[0].message.content
    assert statements and not statements.startswith("{") and '"verdicts"' in statements
    assert {r.mechanism for r in fake_chat_completions.chat_requests} == {"prompt"}


async def test_schema_ignored_answers_free_text_to_the_given_share(
    fake_chat_completions: FakeChatCompletions, openai_client: AsyncOpenAI
) -> None:
    """`schema_ignored(1/3)`: exactly every third structured request gets free text with HTTP 200 (no tool call);
    prompt-mode requests do not count; `ignored()` scripts one such reply."""
    fake_chat_completions.schema_ignored(1 / 3)
    texts = []
    for i in range(9):
        params: dict[str, Any] = {"tools": [tool()]} if i == 4 else {"response_format": json_schema()}
        reply = await create(openai_client, **params)
        message = reply.choices[0].message
        texts.append(message.content if message.content is not None else arguments(reply))
        await create(openai_client)  # prompt mode: never ignored, never counted
    free = [i for i, text in enumerate(texts) if not (text or "").startswith("{")]
    assert free == [2, 5, 8] and texts[2] == "The answer is relevant, I'd say 2 out of 4."
    assert set(fake_chat_completions.statuses()) == {200}
    fake_chat_completions.schema_ignored(0)
    fake_chat_completions.script(ignored())
    assert (await create(openai_client, response_format=json_schema())).choices[0].message.content == texts[2]


async def test_json_object_only_refuses_json_schema_like_deepseek(
    fake_chat_completions: FakeChatCompletions, openai_client: AsyncOpenAI
) -> None:
    """`json_object_only`: json_schema is a 400 with DeepSeek's message; json_object works when a message says "json"
    and is a 400 otherwise, as on OpenAI."""
    fake_chat_completions.json_object_only()
    with pytest.raises(openai.BadRequestError, match="This response_format type is unavailable now"):
        await create(openai_client, response_format=json_schema())
    reply = await create(openai_client, response_format={"type": "json_object"})
    assert json.loads(reply.choices[0].message.content or "") == RUBRIC
    no_word = messages("Grade it.", USER.replace("Reply with the JSON object only.", ""))
    with pytest.raises(openai.BadRequestError, match="must contain the word 'json'"):
        await create(openai_client, messages=no_word, response_format={"type": "json_object"})
    assert fake_chat_completions.statuses() == [400, 200, 400]


async def test_no_tools_and_no_response_format_refuse_without_consuming_the_script(
    fake_chat_completions: FakeChatCompletions, openai_client: AsyncOpenAI
) -> None:
    """`no_tools` refuses `tools`, `no_response_format` refuses any `response_format`, each with a 400 that takes
    no scripted step: the scripted reply goes to the first request that passes (prompt mode)."""
    fake_chat_completions.no_tools()
    fake_chat_completions.no_response_format()
    fake_chat_completions.script(ChatReply("scripted"))
    with pytest.raises(openai.BadRequestError, match="tools are not supported"):
        await create(openai_client, tools=[tool()])
    for fmt in (json_schema(), {"type": "json_object"}, {"type": "text"}):
        with pytest.raises(openai.BadRequestError, match="response_format"):
            await create(openai_client, response_format=fmt)
    assert (await create(openai_client)).choices[0].message.content == "scripted"


async def test_strict_schemas_must_be_closed_and_fully_required(
    fake_chat_completions: FakeChatCompletions, openai_client: AsyncOpenAI
) -> None:
    """A strict json_schema whose object allows extra keys is a 400, as on OpenAI; `strict_schemas(False)` (vLLM)
    accepts it; a json_schema without a name is a 400."""
    loose = json_schema()
    del loose["json_schema"]["schema"]["additionalProperties"]
    with pytest.raises(openai.BadRequestError, match="'additionalProperties' is required"):
        await create(openai_client, response_format=loose)
    fake_chat_completions.strict_schemas(False)
    assert (await create(openai_client, response_format=loose)).choices[0].finish_reason == "stop"
    nameless = {"type": "json_schema", "json_schema": {"schema": {"type": "object"}}}
    with pytest.raises(openai.BadRequestError, match=r"json_schema\.name"):
        await create(openai_client, response_format=nameless)


async def test_cut_off_truncates_at_max_tokens(
    fake_chat_completions: FakeChatCompletions, openai_client: AsyncOpenAI
) -> None:
    """`cut_off` cuts replies as at max_tokens: finish "length", the JSON truncated, completion_tokens = the limit;
    a limit shorter than the reply always cuts there; `cut()` scripts one."""
    fake_chat_completions.cut_off()
    reply = await create(openai_client, response_format=json_schema(), max_completion_tokens=300)
    content = reply.choices[0].message.content or ""
    assert reply.choices[0].finish_reason == "length" and reply.usage and reply.usage.completion_tokens == 300
    assert json.dumps(RUBRIC).startswith(content) and content != json.dumps(RUBRIC)
    fake_chat_completions.cut_off(0)
    short = await create(openai_client, response_format=json_schema(), max_tokens=5)
    assert short.choices[0].finish_reason == "length" and short.choices[0].message.content == json.dumps(RUBRIC)[:20]
    fake_chat_completions.script(cut())
    called = await create(openai_client, tools=[tool()], tool_choice="required")
    assert called.choices[0].finish_reason == "length"
    with pytest.raises(ValueError):
        json.loads(arguments(called))


async def test_rate_limits_carry_retry_headers(fake_chat_completions: FakeChatCompletions) -> None:
    """429s carry `retry-after` and `x-ratelimit-*` (OpenAI) or `retry-after-ms` (Azure), and the SDK retries them;
    `rate_limit(per_second)` refuses past the window with the wait, and reports the budget on each 200."""
    fake_chat_completions.script(rate_limited(retry_after=0), azure_rate_limited(retry_after_ms=10))
    async with AsyncOpenAI(base_url=fake_chat_completions.openai_base_url, api_key=API_KEY, max_retries=2) as client:
        await create(client)
    assert fake_chat_completions.statuses() == [429, 429, 200]
    fake_chat_completions.script(rate_limited(retry_after=2), azure_rate_limited(retry_after_ms=1500))
    status, headers, error = raw_post(fake_chat_completions, "/v1/chat/completions", chat_body())
    assert status == 429 and headers["retry-after"] == "2" and headers["x-ratelimit-remaining-requests"] == "0"
    assert error["error"]["code"] == "rate_limit_exceeded"
    _, headers, _ = raw_post(fake_chat_completions, "/v1/chat/completions", chat_body())
    assert headers["retry-after-ms"] == "1500" and headers["retry-after"] == "2"
    fake_chat_completions.rate_limit(per_second=2)
    answers = [raw_post(fake_chat_completions, "/v1/chat/completions", chat_body()) for _ in range(3)]
    assert [a[0] for a in answers] == [200, 200, 429] and answers[2][1]["retry-after"] == "1"
    assert [a[1]["x-ratelimit-remaining-requests"] for a in answers[:2]] == ["1", "0"]


async def test_server_errors_timeouts_and_drops(
    fake_chat_completions: FakeChatCompletions, openai_client: AsyncOpenAI
) -> None:
    """500 and 503 reach the SDK as InternalServerError, a reply slower than the client's timeout as
    APITimeoutError, a dropped connection as APIConnectionError; `fail_for` answers 503 until it ends."""
    fake_chat_completions.script(server_error(500), unavailable(), slow(5.0), Drop())
    for _ in range(2):
        with pytest.raises(openai.InternalServerError):
            await create(openai_client)
    with pytest.raises(openai.APITimeoutError):
        await create(openai_client, timeout=0.2)
    with pytest.raises(openai.APIConnectionError):
        await create(openai_client)
    assert fake_chat_completions.statuses() == [500, 503, 0, 0]
    fake_chat_completions.fail_for(60)
    with pytest.raises(openai.InternalServerError):
        await create(openai_client)


async def test_logprobs_put_the_score_distribution_on_the_score_digit(
    fake_chat_completions: FakeChatCompletions, openai_client: AsyncOpenAI
) -> None:
    """With logprobs, each token of the reply has an entry (they join back to the text, k alternatives each); the
    score digit's alternatives are the configured distribution over "0".."4", from which the expected score follows,
    and the reply's score is its most likely digit."""
    probs = {"0": 0.05, "1": 0.1, "2": 0.2, "3": 0.6, "4": 0.05}
    fake_chat_completions.score_distribution(probs)
    reply = await create(openai_client, response_format=json_schema(), logprobs=True, top_logprobs=5)
    content = reply.choices[0].message.content or ""
    assert json.loads(content)["score"] == 3
    entries = reply.choices[0].logprobs.content  # type: ignore[union-attr]
    assert entries and "".join(e.token for e in entries) == content and [e.token for e in entries] == tokenize(content)
    assert all(len(e.top_logprobs) == 5 for e in entries)
    digit = next(e for e in entries if e.token == "3")
    expected = sum(int(t.token) * math.exp(t.logprob) for t in digit.top_logprobs)
    assert expected == pytest.approx(sum(int(d) * p for d, p in probs.items()))
    assert digit.logprob == pytest.approx(math.log(0.6)) and digit.bytes == [ord("3")]
    fake_chat_completions.score_distribution(None)
    peaked = await create(openai_client, response_format=json_schema(), logprobs=True, top_logprobs=2)
    score_entry = [e for e in peaked.choices[0].logprobs.content or [] if e.token.isdigit()][-1]  # type: ignore[union-attr]
    assert json.loads(peaked.choices[0].message.content or "")["score"] == 2
    assert [t.token for t in score_entry.top_logprobs] == ["2", "1"]  # 0.7, then a neighbour's 0.12
    assert sum(math.exp(t.logprob) for t in score_entry.top_logprobs) == pytest.approx(0.82)
    with pytest.raises(openai.BadRequestError, match="top_logprobs"):
        await create(openai_client, top_logprobs=3)


async def test_prefix_cache_counts_cached_tokens_in_128_token_steps(
    fake_chat_completions: FakeChatCompletions, openai_client: AsyncOpenAI
) -> None:
    """A prompt sharing a prefix of 1,024+ tokens with an earlier one reports the shared part, rounded down to
    128-token steps, as `cached_tokens`; a shorter shared prefix caches nothing; `prefix_cache(None)` turns it off."""
    long_system = SYSTEM * 80  # ~7,000 chars: ~1,700 tokens at 4 chars per token
    first = await create(openai_client, messages=messages(long_system))
    second = await create(openai_client, messages=messages(long_system, USER.replace("A17", "B29")))
    assert first.usage and first.usage.prompt_tokens_details and first.usage.prompt_tokens_details.cached_tokens == 0
    req = fake_chat_completions.chat_requests[1]
    shared = next(
        i
        for i, (a, b) in enumerate(
            zip(req.prompt_text, fake_chat_completions.chat_requests[0].prompt_text, strict=False)
        )
        if a != b
    )
    assert second.usage and second.usage.prompt_tokens_details
    assert second.usage.prompt_tokens_details.cached_tokens == (shared // 512) * 128 >= 1024
    short = await create(openai_client, messages=messages(SYSTEM * 30, "Hi"))
    again = await create(openai_client, messages=messages(SYSTEM * 30, "Hello"))
    assert short.usage and again.usage and again.usage.prompt_tokens_details
    assert again.usage.prompt_tokens_details.cached_tokens == 0  # ~660 shared tokens: below the minimum
    fake_chat_completions.prefix_cache(None)
    third = await create(openai_client, messages=messages(long_system))
    assert third.usage and third.usage.prompt_tokens_details and third.usage.prompt_tokens_details.cached_tokens == 0


async def test_vllm_keys_are_recorded_and_guided_keys_ignored(
    fake_chat_completions: FakeChatCompletions, openai_client: AsyncOpenAI
) -> None:
    """vLLM's removed `guided_*` keys are recorded (and ignored), as are `prompt_cache_key` and `structured_outputs`,
    whose schema the reply follows."""
    schema = anthropic.transform_schema(StatementsReply)
    await create(openai_client, extra_body={"prompt_cache_key": "rubric-v1"})
    assert fake_chat_completions.saw_guided_keys() == set()
    reply = await create(openai_client, extra_body={"guided_json": schema, "structured_outputs": {"json": schema}})
    assert "verdicts" in json.loads(reply.choices[0].message.content or "")
    first, second = fake_chat_completions.chat_requests
    assert first.prompt_cache_key == "rubric-v1" and second.structured_outputs == {"json": schema}
    assert fake_chat_completions.saw_guided_keys() == {"guided_json"} and second.mechanism == "structured_outputs"


def test_wait_for_requests_and_reset(fake_chat_completions: FakeChatCompletions) -> None:
    """wait_for_requests returns once enough requests arrived (TimeoutError otherwise); reset ends every mode and
    forgets the requests."""
    fake_chat_completions.no_tools()
    threading.Timer(0.05, raw_post, args=(fake_chat_completions, "/v1/chat/completions", chat_body())).start()
    assert len(fake_chat_completions.wait_for_requests(1, timeout=5)) == 1
    with pytest.raises(TimeoutError):
        fake_chat_completions.wait_for_requests(2, timeout=0.05)
    assert raw_post(fake_chat_completions, "/v1/chat/completions", chat_body(tools=[tool()]))[0] == 400
    fake_chat_completions.reset()
    assert fake_chat_completions.requests == []
    assert raw_post(fake_chat_completions, "/v1/chat/completions", chat_body(tools=[tool()]))[0] == 200


async def test_a_corrective_turn_is_answered_from_the_first_user_message(openai_client: AsyncOpenAI) -> None:
    """After the model's invalid reply and a correction note, the brain still reads the judged sections (from the
    first user turn) and answers the schema."""
    turns = [*messages(), {"role": "assistant", "content": "nope"}, {"role": "user", "content": "Not valid: JSON."}]
    reply = await create(openai_client, messages=turns, response_format=json_schema())
    assert json.loads(reply.choices[0].message.content or "") == RUBRIC
