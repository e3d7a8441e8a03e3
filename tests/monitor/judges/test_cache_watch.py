"""The cold-cache watch: the pure decision on the API's own cache counters, and the one warning the client logs
through the real SDK when replies stop reading the prompt cache (the fake Messages API's `cache_reads(False)`)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from monitor.judges import judge_client as messages_client
from monitor.judges.cache_minimums import UNKNOWN_MODEL_MIN_TOKENS, check_prefix
from monitor.judges.cache_watch import COLD_REPLIES, CacheChange, CacheWatch
from monitor.judges.rubric import SYSTEM_PROMPT as RUBRIC_PROMPT
from monitor.judges.statements import SYSTEM_PROMPT as STATEMENTS_PROMPT
from tests.fake_messages_api import FakeMessagesAPI, Reply
from tests.monitor.judges.conftest import PADDED, QUESTION, TIGHT, MakeJudge

COLD = "judge_prompt_cache_cold"
WARM = "judge_prompt_cache_read_again"


@pytest.fixture(autouse=True)
def fresh_client_logger(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new lazy logger for the client module: one an earlier in-process command cached (the service configures
    structlog with `cache_logger_on_first_use`) would bypass `capture_logs`."""
    monkeypatch.setattr(messages_client, "log", structlog.get_logger(messages_client.__name__))


def misses(watch: CacheWatch, n: int, written: int = 0, *, could_read: bool = True) -> list[CacheChange]:
    """`n` replies that read nothing (each wrote `written` tokens) observed by `watch`."""
    return [watch.observe(0, written, could_read=could_read) for _ in range(n)]


def test_twenty_cold_replies_warn_once_and_a_read_rearms() -> None:
    """The 20th reply in a row that reads nothing warns; the 21st and later do not; a read re-arms the warning."""
    watch = CacheWatch(armed=True)
    assert COLD_REPLIES == 20
    first = misses(watch, 19, written=100)
    assert not any(c.warn for c in first) and [c.misses for c in first] == list(range(1, 20))
    assert watch.observe(0, 100) == CacheChange(warn=True, misses=20, written=2000)
    assert not any(c.warn or c.rearm for c in misses(watch, 30))
    assert watch.observe(50, 0) == CacheChange(rearm=True)
    assert [c.warn for c in misses(watch, 20)] == [False] * 19 + [True]


def test_a_read_before_the_twentieth_reply_starts_the_count_again() -> None:
    """A reply that reads from the cache ends a run of cold replies without a warning or a re-arm."""
    watch = CacheWatch(armed=True)
    misses(watch, 19)
    assert watch.observe(10, 0) == CacheChange()
    assert not any(c.warn for c in misses(watch, 19))


def test_a_watch_not_armed_never_warns() -> None:
    """Where the prefix is below the model's minimum even by the usual estimate, cold replies are expected."""
    watch = CacheWatch(armed=False)
    assert not any(c.warn for c in misses(watch, 100))


def test_replies_to_requests_sent_before_any_reply_arrived_do_not_count() -> None:
    """The first requests of a burst cannot find an entry no reply has written yet: they neither count nor reset."""
    watch = CacheWatch(armed=True)
    assert [c.misses for c in misses(watch, 50, written=10, could_read=False)] == [0] * 50
    misses(watch, 19)
    assert watch.observe(0, 0).warn


def cold_events(logs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The cold-cache warnings among captured log events."""
    return [e for e in logs if e["event"] == COLD]


@pytest.mark.parametrize(
    ("method", "prompt"), [("rubric", RUBRIC_PROMPT), ("statements", STATEMENTS_PROMPT)], ids=["rubric", "statements"]
)
async def test_a_judge_whose_replies_never_read_the_cache_logs_one_structured_warning(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge, method: str, prompt: str
) -> None:
    """Through the real SDK, 25 replies that write the prefix and never read it log one warning naming the prefix's
    characters and estimated tokens, the model's minimum and what was written, and no conversation text."""
    fake_messages_api.cache_reads(False)
    judge = make_judge(method)
    with capture_logs() as logs:
        for _ in range(25):
            await judge.judge(QUESTION, TIGHT)
    [warning] = cold_events(logs)
    check = check_prefix(prompt, judge.settings.model)
    assert warning["log_level"] == "warning"
    assert warning["model"] == judge.settings.model and warning["replies"] == COLD_REPLIES
    assert warning["prefix_chars"] == len(prompt) and warning["min_tokens"] == UNKNOWN_MODEL_MIN_TOKENS
    assert warning["prefix_tokens_estimate"] == check.estimated_tokens
    assert warning["prefix_tokens_conservative"] == check.prefix_tokens
    assert warning["cache_write_tokens"] > 0  # written every time, read never: entries that expire between calls
    texts = [str(v) for v in warning.values()]
    assert not any(QUESTION in t or TIGHT in t or prompt[:200] in t for t in texts)


async def test_after_a_read_the_warning_is_rearmed_and_comes_again(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge
) -> None:
    """A reply that reads the cache again logs that it recovered; 20 more cold replies warn a second time."""
    judge = make_judge("rubric")
    with capture_logs() as logs:
        fake_messages_api.cache_reads(False)
        for _ in range(COLD_REPLIES + 1):  # the first reply of a client is no evidence: nothing could be cached yet
            await judge.judge(QUESTION, TIGHT)
        assert [e["event"] for e in cold_events(logs)] == [COLD]
        fake_messages_api.cache_reads(True)
        for _ in range(2):  # the cache was emptied: one write, then a read
            await judge.judge(QUESTION, PADDED)
        fake_messages_api.cache_reads(False)
        for _ in range(COLD_REPLIES):
            await judge.judge(QUESTION, TIGHT)
    events = [e["event"] for e in logs if e["event"] in (COLD, WARM)]
    assert events == [COLD, WARM, COLD]
    [warm] = [e for e in logs if e["event"] == WARM]
    assert warm["log_level"] == "info" and warm["model"] == judge.settings.model


async def test_a_prefix_under_the_apis_real_minimum_warns_with_nothing_written(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge
) -> None:
    """When the API caches nothing at all (its real count under the minimum: both counters 0), the warning says that
    nothing was written."""
    fake_messages_api.cache_minimum(10**6)
    judge = make_judge("statements")
    with capture_logs() as logs:
        for _ in range(COLD_REPLIES):
            await judge.judge(QUESTION, TIGHT)
        assert cold_events(logs) == []  # the first reply did not count
        await judge.judge(QUESTION, TIGHT)
    [warning] = cold_events(logs)
    assert warning["cache_write_tokens"] == 0 and warning["replies"] == COLD_REPLIES


async def test_a_working_cache_and_a_cold_start_burst_never_warn(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge
) -> None:
    """Replies that read the cache never warn, and neither do 25 first requests sent together before any reply (each
    writes: no entry exists yet); only 20 cold replies after the burst do."""
    judge = make_judge("rubric")
    with capture_logs() as logs:
        for _ in range(30):
            await judge.judge(QUESTION, TIGHT)
    assert cold_events(logs) == []

    fake_messages_api.cache_reads(False)
    # A fixed mode: under `auto` the first request goes alone (it chooses the mode) and the burst follows its reply.
    cold = make_judge("rubric", judge_structured_output="json_schema")
    fake_messages_api.always(Reply(delay_s=0.3))  # no reply arrives before the whole burst is sent
    with capture_logs() as logs:
        await asyncio.gather(*(cold.judge(QUESTION, TIGHT) for _ in range(25)))
        fake_messages_api.always(Reply())
        for _ in range(COLD_REPLIES - 1):
            await cold.judge(QUESTION, TIGHT)
        assert cold_events(logs) == []
        await cold.judge(QUESTION, TIGHT)
    assert len(cold_events(logs)) == 1
