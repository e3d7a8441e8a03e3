"""The fake Messages API's own controls that the judge tests do not already pin down (later fault tests rely on them)."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest

from tests.fake_messages_api import FakeMessagesAPI, Reply, overloaded


def post(api: FakeMessagesAPI, path: str = "/v1/messages") -> tuple[int, dict[str, str], dict[str, object]]:
    """POST a minimal Messages request to `path`; returns (status, headers, JSON body), errors included."""
    body = json.dumps({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}).encode()
    req = urllib.request.Request(api.base_url + path, data=body, headers={"content-type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, dict(resp.headers), json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read())


def test_message_shape_and_unknown_route(fake_messages_api: FakeMessagesAPI) -> None:
    """A scripted reply comes back in the Messages wire format, and an unknown route gets a 404 error."""
    fake_messages_api.script(Reply("hello"))
    status, _, msg = post(fake_messages_api)
    assert status == 200
    assert msg["type"] == "message" and msg["role"] == "assistant" and msg["content"] == [{"type": "text", "text": "hello"}]
    assert {"input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"} <= set(msg["usage"])  # type: ignore[arg-type]
    status, _, err = post(fake_messages_api, "/v1/other")
    assert status == 404 and err["type"] == "error"
    assert fake_messages_api.statuses() == [200, 404]
    assert len(fake_messages_api.message_requests) == 1


def test_rate_limit_answers_429_with_the_wait_until_the_window_has_room(fake_messages_api: FakeMessagesAPI) -> None:
    """Past the per-second limit the fake answers 429 with retry-after 1; lifting the limit restores 200."""
    fake_messages_api.rate_limit(per_second=2)
    results = [post(fake_messages_api) for _ in range(3)]
    assert [r[0] for r in results] == [200, 200, 429]
    assert results[2][1]["retry-after"] == "1"
    assert results[2][2]["error"]["type"] == "rate_limit_error"  # type: ignore[index]
    fake_messages_api.rate_limit(None)
    assert post(fake_messages_api)[0] == 200


def test_outage_then_recovery_and_reset(fake_messages_api: FakeMessagesAPI) -> None:
    """An outage answers 529 until it ends; `always` sets every reply, and `reset` clears it and the requests."""
    fake_messages_api.fail_for(0.3, overloaded())
    assert post(fake_messages_api)[0] == 529
    threading.Event().wait(0.35)
    assert post(fake_messages_api)[0] == 200
    fake_messages_api.always(overloaded())
    assert post(fake_messages_api)[0] == 529
    fake_messages_api.reset()
    assert fake_messages_api.requests == [] and post(fake_messages_api)[0] == 200


def test_wait_for_requests(fake_messages_api: FakeMessagesAPI) -> None:
    """wait_for_requests returns once enough requests arrived, and raises TimeoutError if they do not."""
    threading.Timer(0.1, post, args=(fake_messages_api,)).start()
    assert len(fake_messages_api.wait_for_requests(1, timeout=5)) == 1
    with pytest.raises(TimeoutError):
        fake_messages_api.wait_for_requests(2, timeout=0.1)
