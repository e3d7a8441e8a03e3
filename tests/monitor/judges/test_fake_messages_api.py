"""The fake Messages API's own controls that the judge tests do not already pin down (later fault tests rely on
them)."""

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
    req = urllib.request.Request(
        api.base_url + path, data=body, headers={"content-type": "application/json"}, method="POST"
    )
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
    assert (
        msg["type"] == "message"
        and msg["role"] == "assistant"
        and msg["content"] == [{"type": "text", "text": "hello"}]
    )
    assert {"input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"} <= set(
        msg["usage"]
    )  # type: ignore[arg-type]
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


def post_system(api: FakeMessagesAPI, system_text: str, user: str = "hi", marked: bool = True) -> dict[str, int]:
    """POST a request whose system block is `system_text` (marked for caching unless not `marked`); returns its
    usage."""
    block: dict[str, object] = {"type": "text", "text": system_text}
    if marked:
        block["cache_control"] = {"type": "ephemeral"}
    body = {"model": "m", "max_tokens": 10, "system": [block], "messages": [{"role": "user", "content": user}]}
    data = json.dumps(body).encode()
    req = urllib.request.Request(
        api.base_url + "/v1/messages", data=data, headers={"content-type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=5) as resp:
        usage: dict[str, int] = json.loads(resp.read())["usage"]
    return usage


def cache_counts(usage: dict[str, int]) -> tuple[int, int]:
    """(cache writes, cache reads) of one usage."""
    return usage["cache_creation_input_tokens"], usage["cache_read_input_tokens"]


def test_by_default_a_prefix_of_any_length_is_cached(fake_messages_api: FakeMessagesAPI) -> None:
    """Without a minimum (the default) even a one-token prefix is written once and then read: the old behaviour."""
    assert cache_counts(post_system(fake_messages_api, "tiny")) == (1, 0)
    assert cache_counts(post_system(fake_messages_api, "tiny")) == (0, 1)


def test_a_prefix_below_the_minimum_is_never_cached_and_is_billed_as_input() -> None:
    """Below the minimum both cache counters stay 0 on every request and the prefix counts as plain input."""
    with FakeMessagesAPI(cache_min_tokens=100) as api:
        usages = [post_system(api, "x" * 396, user="hi!!") for _ in range(3)]  # 99 tokens at 4 characters each
    assert [cache_counts(u) for u in usages] == [(0, 0)] * 3
    assert [u["input_tokens"] for u in usages] == [99 + 1] * 3


def test_a_prefix_at_the_minimum_is_written_once_then_read() -> None:
    """At exactly the minimum the first request writes the prefix and later identical prefixes read it."""
    with FakeMessagesAPI(cache_min_tokens=100) as api:
        usages = [post_system(api, "x" * 400, user="hi!!") for _ in range(3)]
    assert [cache_counts(u) for u in usages] == [(100, 0), (0, 100), (0, 100)]
    assert [u["input_tokens"] for u in usages] == [1] * 3


def test_cache_minimum_control_sets_chars_per_token_and_reset_restores_the_built_settings() -> None:
    """`cache_minimum` changes the minimum and characters per token (emptying the cache); `reset` restores both."""
    with FakeMessagesAPI(cache_min_tokens=100) as api:
        api.cache_minimum(100, chars_per_token=3.5)
        assert cache_counts(post_system(api, "x" * 350)) == (100, 0)  # 100 tokens at 3.5: cached
        assert cache_counts(post_system(api, "x" * 346)) == (0, 0)  # 99 tokens: not cached
        api.cache_minimum(None)
        assert cache_counts(post_system(api, "x" * 7)) == (2, 0)  # no minimum; still 3.5 characters per token
        api.reset()
        assert cache_counts(post_system(api, "x" * 396)) == (0, 0)  # back to 100 tokens at 4 characters each
        assert cache_counts(post_system(api, "x" * 400)) == (100, 0)


def test_with_cache_reads_off_every_request_writes_the_prefix_and_none_reads_it() -> None:
    """`cache_reads(False)` writes a cacheable prefix on every request and reads it on none (still nothing below the
    minimum); `cache_reads(True)` and `reset` restore writing once and reading after."""
    with FakeMessagesAPI(cache_min_tokens=100) as api:
        api.cache_reads(False)
        assert [cache_counts(post_system(api, "x" * 400)) for _ in range(3)] == [(100, 0)] * 3
        assert cache_counts(post_system(api, "x" * 396)) == (0, 0)  # below the minimum: neither written nor read
        api.cache_reads(True)
        assert [cache_counts(post_system(api, "x" * 400)) for _ in range(2)] == [(100, 0), (0, 100)]
        api.cache_reads(False)
        api.reset()
        assert [cache_counts(post_system(api, "x" * 400)) for _ in range(2)] == [(100, 0), (0, 100)]


def test_an_unmarked_system_prompt_is_never_cached_whatever_the_minimum() -> None:
    """A system block without cache_control is plain input with or without a minimum."""
    with FakeMessagesAPI(cache_min_tokens=1) as api:
        usage = post_system(api, "x" * 400, user="hi!!", marked=False)
    assert cache_counts(usage) == (0, 0) and usage["input_tokens"] == 101
