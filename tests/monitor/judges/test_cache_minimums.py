"""The per-model table of minimum cacheable prefixes, the token estimate, and the judges' check at construction."""

from __future__ import annotations

import math

import pytest
from structlog.testing import capture_logs

from monitor.judges.cache_minimums import (
    CACHE_CHECK_CHARS_PER_TOKEN,
    CHARS_PER_TOKEN,
    MIN_CACHEABLE_TOKENS,
    UNKNOWN_MODEL_MIN_TOKENS,
    assumed_min_tokens,
    base_model,
    check_prefix,
    conservative_tokens,
    estimate_tokens,
    min_cacheable_tokens,
    warn_if_uncacheable,
)
from monitor.judges.rubric import INSTRUCTIONS as RUBRIC_INSTRUCTIONS
from monitor.judges.rubric import RubricJudge
from monitor.judges.settings import JudgeSettings
from monitor.judges.statements import INSTRUCTIONS as STATEMENTS_INSTRUCTIONS
from monitor.judges.statements import StatementsJudge
from tests.fake_messages_api import FakeMessagesAPI
from tests.monitor.judges.conftest import FAST, PADDED, QUESTION, TIGHT, MakeJudge, judge_settings

DEFAULT_MODEL = JudgeSettings().model


@pytest.mark.parametrize(
    ("model", "tokens"),
    [
        ("claude-opus-5", 512),
        ("claude-sonnet-4-5", 1024),
        ("claude-opus-4-7", 2048),
        ("claude-haiku-4-5", 4096),
        ("claude-opus-4-6", 4096),
        ("claude-3-haiku", 2048),
    ],
)
def test_table_gives_the_published_minimum_of_a_known_model(model: str, tokens: int) -> None:
    """A model in the table gets its published minimum."""
    assert min_cacheable_tokens(model) == tokens
    assert assumed_min_tokens(model) == tokens


@pytest.mark.parametrize(
    ("model", "base"),
    [
        ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
        ("claude-haiku-4-5@20251001", "claude-haiku-4-5"),
        ("anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("  Claude-Opus-4-8 ", "claude-opus-4-8"),
        ("claude-haiku-5-5", "claude-haiku-5-5"),
    ],
)
def test_dated_and_platform_model_ids_find_their_base_model(model: str, base: str) -> None:
    """Date suffixes, -latest, Vertex's @date and Bedrock's prefix/version are stripped before the lookup."""
    assert base_model(model) == base
    assert min_cacheable_tokens(model) == MIN_CACHEABLE_TOKENS.get(base)


@pytest.mark.parametrize("model", ["claude-haiku-5-5", "claude-sonnet-5-5", "my-proxy-model", "claude-future-9"])
def test_unknown_model_assumes_the_largest_known_minimum(model: str) -> None:
    """A model not in the table is assumed to need the largest minimum in the table, never a smaller one."""
    assert min_cacheable_tokens(model) is None
    assert assumed_min_tokens(model) == UNKNOWN_MODEL_MIN_TOKENS == max(MIN_CACHEABLE_TOKENS.values()) == 4096
    check = check_prefix("x" * 10, model)
    assert (check.min_tokens, check.known_model) == (4096, False)


def test_token_estimate_is_characters_over_three_and_a_half_rounded_up() -> None:
    """The estimate is ceil(characters / 3.5), so 7 characters are 2 tokens and 8 are 3."""
    assert CHARS_PER_TOKEN == 3.5
    assert [estimate_tokens("x" * n) for n in (0, 1, 7, 8, 3500)] == [0, 1, 2, 3, 1000]


def test_prefix_check_is_cacheable_from_exactly_the_minimum_at_four_and_a_half_characters_per_token() -> None:
    """The check counts 4.5 characters a token, rounded down: 4,608 characters reach 1,024 tokens, 4,607 do not,
    though the usual estimate (3.5) puts both far above the minimum (`should_cache`)."""
    assert CACHE_CHECK_CHARS_PER_TOKEN == 4.5
    at, below = "x" * 4608, "x" * 4607
    assert (conservative_tokens(at), conservative_tokens(below)) == (1024, 1023)
    yes, no = check_prefix(at, "claude-sonnet-4-5"), check_prefix(below, "claude-sonnet-4-5")
    assert yes.cacheable and not no.cacheable
    assert (no.prefix_chars, no.prefix_tokens, no.estimated_tokens, no.min_tokens) == (4607, 1023, 1317, 1024)
    assert no.should_cache and not check_prefix("x" * 3580, "claude-sonnet-4-5").should_cache


@pytest.mark.parametrize(
    "prompt", [RubricJudge.system_prompt, StatementsJudge.system_prompt], ids=["rubric", "statements"]
)
def test_both_system_prompts_clear_the_default_models_minimum_with_a_margin(prompt: str) -> None:
    """Each judge's static prefix is at least 10 % above the default model's minimum (the estimate is approximate)."""
    check = check_prefix(prompt, DEFAULT_MODEL)
    assert check.min_tokens == 4096
    assert check.prefix_tokens >= 1.1 * check.min_tokens, check


@pytest.mark.parametrize("prompt", [RUBRIC_INSTRUCTIONS, STATEMENTS_INSTRUCTIONS], ids=["rubric", "statements"])
def test_the_instructions_alone_are_below_every_minimum_above_1024(prompt: str) -> None:
    """Without the worked examples the prefix (~800 tokens, ~1,200 since the rules for the conversation's context)
    is too short for any model whose minimum is 2,048 or more."""
    assert 512 < estimate_tokens(prompt) < 2048


@pytest.mark.parametrize(
    "prompt", [RubricJudge.system_prompt, StatementsJudge.system_prompt], ids=["rubric", "statements"]
)
def test_both_system_prompts_are_cacheable_for_every_model_in_the_table(prompt: str) -> None:
    """Each judge's static prefix reaches the minimum of every model in the table."""
    assert [m for m in MIN_CACHEABLE_TOKENS if not check_prefix(prompt, m).cacheable] == []


@pytest.mark.parametrize("cls", [RubricJudge, StatementsJudge])
def test_a_judge_built_for_the_default_model_is_cacheable_and_does_not_warn(
    fake_messages_api: FakeMessagesAPI, cls: type[RubricJudge]
) -> None:
    """Built for the default model, a judge records a cacheable prefix check and logs no warning."""
    with capture_logs() as logs:
        judge = cls(judge_settings(fake_messages_api, cls.method).judge)
    assert judge.prefix_check.cacheable and judge.prefix_check.model == DEFAULT_MODEL
    assert [e for e in logs if e["event"] == "judge_prompt_below_cache_minimum"] == []


def test_a_judge_whose_prompt_is_too_short_warns_once_at_construction(fake_messages_api: FakeMessagesAPI) -> None:
    """A judge built with a prefix below its model's minimum logs one warning naming tokens, minimum and model."""

    class Short(RubricJudge):
        system_prompt = RUBRIC_INSTRUCTIONS

    with capture_logs() as logs:
        judge = Short(judge_settings(fake_messages_api, "rubric", judge_model="claude-sonnet-4-5").judge)
    warnings = [e for e in logs if e["event"] == "judge_prompt_below_cache_minimum"]
    assert len(warnings) == 1
    w = warnings[0]
    assert w["log_level"] == "warning"
    assert (w["method"], w["model"], w["min_tokens"], w["known_model"]) == ("rubric", "claude-sonnet-4-5", 1024, True)
    assert w["prefix_tokens"] == conservative_tokens(RUBRIC_INSTRUCTIONS) == judge.prefix_check.prefix_tokens
    assert (w["prefix_chars"], w["prefix_tokens_estimate"]) == (
        len(RUBRIC_INSTRUCTIONS),
        estimate_tokens(RUBRIC_INSTRUCTIONS),
    )
    assert not judge.prefix_check.cacheable


def test_warn_if_uncacheable_returns_the_check_and_is_quiet_when_cacheable() -> None:
    """The helper returns the check in both cases and logs only for a prefix below the minimum."""
    with capture_logs() as logs:
        long_enough = warn_if_uncacheable("rubric", "x" * 2400, "claude-opus-5")  # 533 tokens at 4.5
        too_short = warn_if_uncacheable("rubric", "x" * 1000, "claude-opus-5")
    assert long_enough.cacheable and not too_short.cacheable
    assert [e["prefix_tokens"] for e in logs] == [too_short.prefix_tokens]


@pytest.mark.parametrize("chars_per_token", [CHARS_PER_TOKEN, CACHE_CHECK_CHARS_PER_TOKEN])
@pytest.mark.parametrize("method", ["rubric", "statements"])
async def test_with_the_default_models_minimum_the_new_prompt_is_cached_and_the_old_one_is_not(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge, method: str, chars_per_token: float
) -> None:
    """Against a fake that caches only from the default model's minimum, counting 3.5 or 4.5 characters per token, the
    judge writes its prefix once and reads it after, while the same judge with the instructions alone is never
    cached."""
    fake_messages_api.cache_minimum(assumed_min_tokens(DEFAULT_MODEL), chars_per_token=chars_per_token)
    judge = make_judge(method)
    assert isinstance(judge, RubricJudge | StatementsJudge)
    first, second = await judge.judge(QUESTION, TIGHT), await judge.judge(QUESTION, PADDED)
    prefix = math.ceil(len(judge.system_prompt) / chars_per_token)  # as the fake counts it
    assert (first.usage.cache_write_tokens, first.usage.cache_read_tokens) == (prefix, 0)
    assert (second.usage.cache_write_tokens, second.usage.cache_read_tokens) == (0, prefix)

    class InstructionsOnly(type(judge)):  # type: ignore[misc]
        system_prompt = RUBRIC_INSTRUCTIONS if method == "rubric" else STATEMENTS_INSTRUCTIONS

    old = InstructionsOnly(judge.settings, backoff=FAST)
    try:
        usages = [(await old.judge(QUESTION, TIGHT)).usage for _ in range(2)]
    finally:
        await old.aclose()
    assert [(u.cache_write_tokens, u.cache_read_tokens) for u in usages] == [(0, 0), (0, 0)]
    assert all(u.input_tokens > old.prefix_check.prefix_tokens for u in usages)


# The API's own count is unknown here: at 4.5 characters a token (fewer tokens than English prose gets), a prefix
# that clears a minimum should clear it at the API's count too. Written out, not imported: it is what the test asks.
CONSERVATIVE = 4.5
MINIMUMS = sorted({**MIN_CACHEABLE_TOKENS, "an unknown model": UNKNOWN_MODEL_MIN_TOKENS}.items())


def sent_prefix(judge: RubricJudge | StatementsJudge) -> str:
    """The system text a request of `judge` marks for caching: every system block up to the last cache_control."""
    system = judge.request_body(QUESTION, TIGHT)["system"]
    assert not isinstance(system, str), "a plain string system prompt cannot be marked for caching"
    blocks = list(system)
    marked = [i for i, b in enumerate(blocks) if "cache_control" in b]
    assert marked, "the system prompt is not marked for caching"
    return "".join(b["text"] for b in blocks[: marked[-1] + 1])


@pytest.mark.parametrize(("model", "minimum"), MINIMUMS, ids=[m for m, _ in MINIMUMS])
@pytest.mark.parametrize("cls", [RubricJudge, StatementsJudge], ids=["rubric", "statements"])
def test_the_sent_cached_prefix_clears_every_minimum_at_four_and_a_half_characters_per_token(
    fake_messages_api: FakeMessagesAPI, cls: type[RubricJudge], model: str, minimum: int
) -> None:
    """The prefix a judge's request marks for caching holds at least minimum x 4.5 characters for every model."""
    judge = cls(judge_settings(fake_messages_api, cls.method).judge)
    chars = len(sent_prefix(judge))
    assert chars / CONSERVATIVE >= minimum, f"{chars} chars = {chars / CONSERVATIVE:.0f} tokens at 4.5 < {minimum}"
