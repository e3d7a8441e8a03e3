"""The fake Messages API's Bedrock and Vertex routes, driven by the REAL `AsyncAnthropicBedrock` and
`AsyncAnthropicVertex` clients with dummy credentials (issue 41)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest
from anthropic import AsyncAnthropicBedrock, AsyncAnthropicVertex

from monitor.judges.rubric import RubricReply
from monitor.judges.structured_output import output_config
from tests.fake_messages_api import FakeMessagesAPI, Reply, bad_request, rate_limited

BEDROCK_MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
VERTEX_MODEL = "claude-sonnet-4-5@20250929"
SYSTEM = "You grade relevancy on a 0-4 rubric. " * 40
USER = (
    "<user_question_c0de>\nWhen did order A17 ship?\n</user_question_c0de>\n"
    "<assistant_response_c0de>\nOrder A17 shipped on 3 March.\n</assistant_response_c0de>"
)


def judge_params() -> dict[str, Any]:
    """A judge-shaped request: a cached system block, the delimited user message and `output_config`."""
    return {
        "max_tokens": 300,
        "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": USER}],
        "output_config": output_config(RubricReply),
    }


@pytest.fixture
async def bedrock(fake_messages_api: FakeMessagesAPI) -> AsyncIterator[AsyncAnthropicBedrock]:
    """The real Bedrock client (SigV4 through boto3) pointed at the fake, with fast retries."""
    pytest.importorskip("boto3", reason="AsyncAnthropicBedrock signs with boto3/botocore (the [bedrock] extra)")
    client = AsyncAnthropicBedrock(
        aws_access_key="x", aws_secret_key="y", aws_region="us-east-1", base_url=fake_messages_api.base_url
    )
    yield client
    await client.close()


@pytest.fixture
async def vertex(fake_messages_api: FakeMessagesAPI) -> AsyncIterator[AsyncAnthropicVertex]:
    """The real Vertex client with an access token (no google-auth needed) pointed at the fake."""
    client = AsyncAnthropicVertex(
        region="us-east5", project_id="p", access_token="t", base_url=fake_messages_api.base_url
    )
    yield client
    await client.close()


async def test_bedrock_invoke_is_answered_like_messages(
    fake_messages_api: FakeMessagesAPI, bedrock: AsyncAnthropicBedrock
) -> None:
    """Bedrock posts a signed `/model/{id}/invoke` without `model`; the fake answers with the brain, the path's model
    and the prompt cache (written, then read), and keeps `output_config` and `cache_control` as sent."""
    first = await bedrock.messages.create(model=BEDROCK_MODEL, **judge_params())
    second = await bedrock.messages.create(model=BEDROCK_MODEL, **judge_params())
    assert json.loads(first.content[0].text)["score"] == 4 and first.model == BEDROCK_MODEL
    assert first.usage.cache_creation_input_tokens > 0 and second.usage.cache_read_input_tokens > 0
    req = fake_messages_api.message_requests[0]
    assert req.path == f"/model/{BEDROCK_MODEL}/invoke" and req.platform == "bedrock" and req.model == BEDROCK_MODEL
    assert "model" not in req.body and req.body["anthropic_version"]
    assert req.body["output_config"] == output_config(RubricReply)
    assert req.system_blocks[0]["cache_control"] == {"type": "ephemeral"}
    assert req.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=x/")
    assert "/us-east-1/bedrock/aws4_request" in req.headers["authorization"]


async def test_vertex_raw_predict_is_answered_like_messages(
    fake_messages_api: FakeMessagesAPI, vertex: AsyncAnthropicVertex
) -> None:
    """Vertex posts `…/publishers/anthropic/models/{m}:rawPredict` with the access token as a bearer; the fake
    answers as `/v1/messages` does and records the model from the path."""
    reply = await vertex.messages.create(model=VERTEX_MODEL, **judge_params())
    assert json.loads(reply.content[0].text)["score"] == 4 and reply.model == VERTEX_MODEL
    req = fake_messages_api.message_requests[0]
    assert req.path == f"/projects/p/locations/us-east5/publishers/anthropic/models/{VERTEX_MODEL}:rawPredict"
    assert req.platform == "vertex" and req.model == VERTEX_MODEL and req.headers["authorization"] == "Bearer t"
    assert "model" not in req.body and req.body["anthropic_version"]
    assert req.body["output_config"] == output_config(RubricReply)
    assert req.system_blocks[0]["cache_control"] == {"type": "ephemeral"}


async def test_scripted_faults_apply_on_the_cloud_routes(
    fake_messages_api: FakeMessagesAPI, bedrock: AsyncAnthropicBedrock, vertex: AsyncAnthropicVertex
) -> None:
    """Scripted faults reach the cloud clients as the SDK's own exceptions: a 429 is retried, a 400 raised."""
    fake_messages_api.script(rate_limited(retry_after=0), Reply("ok"), bad_request("prompt is too long"))
    reply = await bedrock.messages.create(model=BEDROCK_MODEL, **judge_params())
    assert reply.content[0].text == "ok"
    with pytest.raises(anthropic.BadRequestError, match="prompt is too long"):
        await vertex.messages.create(model=VERTEX_MODEL, **judge_params())
    assert fake_messages_api.statuses() == [429, 200, 400]
    assert [r.platform for r in fake_messages_api.message_requests] == ["bedrock", "bedrock", "vertex"]


def raw_post(api: FakeMessagesAPI, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    """POST `body` to `path` without an SDK; returns the status and the JSON answer."""
    req = urllib.request.Request(
        api.base_url + path, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return int(resp.status), json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_cloud_routes_refuse_bodies_shaped_for_the_first_party_api(fake_messages_api: FakeMessagesAPI) -> None:
    """As the platforms do: no `anthropic_version` is a 400, a `model` in a Bedrock body is a 400, and the
    streaming paths are not served; none of these consume a scripted step."""
    fake_messages_api.script(Reply("scripted"))
    body = {"max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    vertex_path = f"/projects/p/locations/r/publishers/anthropic/models/{VERTEX_MODEL}:rawPredict"
    status, error = raw_post(fake_messages_api, f"/model/{BEDROCK_MODEL}/invoke", body)
    assert status == 400 and "anthropic_version" in error["error"]["message"]
    assert raw_post(fake_messages_api, vertex_path, body)[0] == 400
    versioned = {**body, "anthropic_version": "bedrock-2023-05-31"}
    status, error = raw_post(fake_messages_api, f"/model/{BEDROCK_MODEL}/invoke", {**versioned, "model": "m"})
    assert status == 400 and "model" in error["error"]["message"]
    assert raw_post(fake_messages_api, f"/model/{BEDROCK_MODEL}/invoke-with-response-stream", versioned)[0] == 404
    status, message = raw_post(fake_messages_api, f"/model/{BEDROCK_MODEL}/invoke", versioned)
    assert status == 200 and message["content"][0]["text"] == "scripted" and message["model"] == BEDROCK_MODEL
    assert fake_messages_api.message_requests[-1].body == versioned


async def test_bedrock_api_key_is_sent_as_a_bearer_without_sigv4(fake_messages_api: FakeMessagesAPI) -> None:
    """With a Bedrock API key (`api_key=` or AWS_BEARER_TOKEN_BEDROCK) the client sends `Authorization: Bearer` and
    signs nothing, so boto3 is needed only for SigV4."""
    async with AsyncAnthropicBedrock(
        api_key="bedrock-key", aws_region="us-east-1", base_url=fake_messages_api.base_url
    ) as client:
        await client.messages.create(model=BEDROCK_MODEL, **judge_params())
    req = fake_messages_api.message_requests[0]
    assert req.headers["authorization"] == "Bearer bedrock-key" and "x-amz-date" not in req.headers
    assert req.platform == "bedrock" and req.model == BEDROCK_MODEL
