"""The API's own prompt-cache counters, read on every reply: into Prometheus counters labelled by judge and model, and
into the rows' usage, on the one-call path and the Message Batches path of both LLM judges (real SDK, fake API)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from consumers.sampling import DecisionKind, SampleDecision
from monitor.config import load_settings
from monitor.judges.base import JudgeFailure, JudgeInfo, Judgement
from monitor.judges.batches import BatchItem, BatchJudge
from monitor.judges.lexical import LexicalJudge
from monitor.judges.llm import LLMJudge
from monitor.judges.rubric import RubricJudge
from monitor.judges.statements import StatementsJudge
from monitor.judging.metrics import JudgingMetrics
from monitor.privacy.events import redact_event
from monitor.privacy.redactor import build_redactor
from monitor.privacy.settings import RedactionSettings
from monitor.runtime.rows import build_row
from schemas.errors import JudgeError
from tests.fake_messages_api import FakeMessagesAPI, Reply, malformed
from tests.monitor.judges.conftest import FAST, PADDED, QUESTION, TIGHT
from tests.monitor.privacy.events import event

MODEL = "claude-sonnet-5-5"
JUDGED = redact_event(event(question=QUESTION, response=TIGHT), build_redactor(RedactionSettings()))
WRITE = {"input_tokens": 300, "output_tokens": 20, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 5000}
READ = {"input_tokens": 310, "output_tokens": 25, "cache_read_input_tokens": 5000, "cache_creation_input_tokens": 0}
REPLIES = {
    "rubric": {"reasoning": "On topic.", "score": 4},
    "statements": {"statements": ["Shipped."], "verdicts": [{"verdict": "yes", "reason": ""}]},
}
Make = Callable[..., LLMJudge[Any]]


@pytest.fixture
async def make(fake_messages_api: FakeMessagesAPI) -> AsyncIterator[Make]:
    """LLM judges for `MODEL` against the test's fake server; closed afterwards."""
    made: list[LLMJudge[Any]] = []

    def build(method: str) -> LLMJudge[Any]:
        settings = load_settings(judge=method, judge_model=MODEL, **fake_messages_api.settings_overrides())
        cls = RubricJudge if method == "rubric" else StatementsJudge
        judge = cls(settings.judge, backoff=FAST)
        made.append(judge)
        return judge

    yield build
    for judge in made:
        await judge.aclose()


def sample(metrics: JudgingMetrics, name: str, judge: str, prefix: str = "relevancy_monitor_") -> float | None:
    """The value of the counter `name` for `judge` and `MODEL`, as scraped."""
    return metrics.registry.get_sample_value(f"{prefix}{name}_total", {"judge": judge, "model": MODEL})


def cache_figures(metrics: JudgingMetrics, judge: str, prefix: str = "relevancy_monitor_") -> tuple[Any, ...]:
    """(cache read, cache write, prompt) tokens exported for `judge`."""
    names = ("judge_cache_read_tokens", "judge_cache_write_tokens", "judge_prompt_tokens")
    return tuple(sample(metrics, n, judge, prefix) for n in names)


@pytest.mark.parametrize("method", ["rubric", "statements"])
async def test_every_reply_adds_the_apis_cache_counters_to_counters_labelled_by_model(
    fake_messages_api: FakeMessagesAPI, make: Make, method: str
) -> None:
    """The cache read and write tokens and all prompt tokens of every reply (an invalid one too) reach the counters."""
    fake_messages_api.script(
        Reply(REPLIES[method], usage=WRITE), Reply("{not json", usage=READ), Reply(REPLIES[method], usage=READ)
    )
    judge = make(method)
    metrics = JudgingMetrics()
    metrics.watch_judge(judge)
    assert cache_figures(metrics, method) == (0, 0, 0)
    await judge.judge(QUESTION, TIGHT)
    await judge.judge(QUESTION, PADDED)  # an invalid reply, then a valid one: two replies, both paid
    assert cache_figures(metrics, method) == (10_000, 5000, (300 + 5000) + 2 * (310 + 5000))


async def test_a_shadow_judges_cache_counters_have_the_shadow_prefix(
    fake_messages_api: FakeMessagesAPI, make: Make
) -> None:
    """A shadow judge's counters are `relevancy_monitor_shadow_judge_cache_*`, apart from the primary's."""
    fake_messages_api.script(Reply(REPLIES["rubric"], usage=READ))
    judge = make("rubric")
    metrics = JudgingMetrics()
    metrics.watch_judge(judge, shadow=True)
    await judge.judge(QUESTION, TIGHT)
    assert cache_figures(metrics, "rubric", "relevancy_monitor_shadow_") == (5000, 0, 5310)
    assert cache_figures(metrics, "rubric") == (None, None, None)


def test_a_judge_that_calls_no_api_exports_no_cache_series() -> None:
    """The lexical judge sends no prompt: it has no cache counters at all (not a series stuck at 0)."""
    metrics = JudgingMetrics()
    metrics.watch_judge(LexicalJudge(20_000))
    names = {s.name for family in metrics.registry.collect() for s in family.samples}
    assert not any("cache" in n or "prompt_tokens" in n for n in names)


@pytest.mark.parametrize("method", ["rubric", "statements"])
async def test_batch_results_add_their_cache_counters_too(
    fake_messages_api: FakeMessagesAPI, make: Make, method: str
) -> None:
    """Every succeeded batch entry's cache tokens reach the judge's counters, as a one-call reply's do."""
    fake_messages_api.batch_processing(None)
    fake_messages_api.script_batch(Reply(REPLIES[method], usage=WRITE), Reply(REPLIES[method], usage=READ))
    batch = BatchJudge(make(method))
    metrics = JudgingMetrics()
    metrics.watch_judge(batch.judge)
    batch_id = await batch.submit([BatchItem("a", QUESTION, TIGHT), BatchItem("b", QUESTION, PADDED)])
    fake_messages_api.end_batch(batch_id)
    await batch.results(batch_id)
    assert cache_figures(metrics, method) == (5000, 5000, 5300 + 5310)
    assert (batch.judge.stats["tokens.cache_read"], batch.judge.stats["tokens.cache_write"]) == (5000, 5000)


def stored(outcome: Judgement | JudgeFailure) -> tuple[int, int, int, int]:
    """(input, output, cache read, cache write) tokens of the row stored for `outcome`."""
    row = build_row(
        JUDGED,
        JudgeInfo("rubric", MODEL, "rubric-1"),
        SampleDecision(True, 1.0, DecisionKind.BASE),
        outcome,
        latency_ms=1,
        scored_at=datetime(2026, 12, 1, tzinfo=UTC),
        text_policy="none",
    )
    return row.input_tokens, row.output_tokens, row.cache_read_tokens, row.cache_write_tokens


def api_tokens(*usages: dict[str, int]) -> tuple[int, int, int, int]:
    """The same four figures summed over the API's reply usages."""
    keys = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    total = tuple(sum(u[k] for u in usages) for k in keys)
    return total[0], total[1], total[2], total[3]


@pytest.mark.parametrize("method", ["rubric", "statements"])
async def test_rows_carry_the_apis_cache_counters_on_every_judge_path(
    fake_messages_api: FakeMessagesAPI, make: Make, method: str
) -> None:
    """One call, one call after an invalid reply, a failed call, and a batch entry: each row's tokens are exactly
    the API's reply usage (summed over the attempts)."""
    judge = make(method)
    fake_messages_api.script(Reply(REPLIES[method], usage=WRITE))
    assert stored(await judge.judge(QUESTION, TIGHT)) == api_tokens(WRITE)
    fake_messages_api.script(Reply("{not json", usage=WRITE), Reply(REPLIES[method], usage=READ))
    assert stored(await judge.judge(QUESTION, TIGHT)) == api_tokens(WRITE, READ)
    attempts = 2  # an invalid reply and its one corrective retry, both invalid, both paid
    fake_messages_api.script(*[Reply("{not json", usage=READ)] * attempts)
    with pytest.raises(JudgeError) as failed:
        await judge.judge(QUESTION, TIGHT)
    assert stored(JudgeFailure.from_error(failed.value)) == api_tokens(*[READ] * attempts)

    fake_messages_api.batch_processing(None)
    fake_messages_api.script_batch(Reply(REPLIES[method], usage=READ), malformed())
    batch = BatchJudge(judge)
    batch_id = await batch.submit([BatchItem("a", QUESTION, TIGHT), BatchItem("b", QUESTION, PADDED)])
    fake_messages_api.end_batch(batch_id)
    outcomes = await batch.results(batch_id)
    assert stored(outcomes["a"]) == api_tokens(READ)
    assert isinstance(outcomes["b"], JudgeFailure) and stored(outcomes["b"])[2] + stored(outcomes["b"])[3] > 0
