"""The per-model table of minimum cacheable prefixes, the token estimate, and the judges' check at construction."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from monitor.judges.cache_minimums import (
    CHARS_PER_TOKEN,
    MIN_CACHEABLE_TOKENS,
    UNKNOWN_MODEL_MIN_TOKENS,
    assumed_min_tokens,
    base_model,
    check_prefix,
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


def test_prefix_check_is_cacheable_from_exactly_the_minimum() -> None:
    """A prefix of exactly the minimum is cacheable; one token fewer is not."""
    at, below = "x" * 3584, "x" * 3580  # 1,024 and 1,023 estimated tokens
    assert (estimate_tokens(at), estimate_tokens(below)) == (1024, 1023)
    assert check_prefix(at, "claude-sonnet-4-5").cacheable
    assert not check_prefix(below, "claude-sonnet-4-5").cacheable


@pytest.mark.parametrize(
    "prompt", [RubricJudge.system_prompt, StatementsJudge.system_prompt], ids=["rubric", "statements"]
)
def test_both_system_prompts_clear_the_default_models_minimum_with_a_margin(prompt: str) -> None:
    """Each judge's static prefix is at least 10 % above the default model's minimum (the estimate is approximate)."""
    check = check_prefix(prompt, DEFAULT_MODEL)
    assert check.min_tokens == 4096
    assert check.prefix_tokens >= 1.1 * check.min_tokens, check


@pytest.mark.parametrize("prompt", [RUBRIC_INSTRUCTIONS, STATEMENTS_INSTRUCTIONS], ids=["rubric", "statements"])
def test_the_instructions_alone_were_below_every_minimum_above_512(prompt: str) -> None:
    """Without the worked examples the prefix (~800 tokens) is too short for any model whose minimum is 1,024 or
    more."""
    assert 512 < estimate_tokens(prompt) < 1024


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
    assert w["prefix_tokens"] == estimate_tokens(RUBRIC_INSTRUCTIONS) == judge.prefix_check.prefix_tokens
    assert not judge.prefix_check.cacheable


def test_warn_if_uncacheable_returns_the_check_and_is_quiet_when_cacheable() -> None:
    """The helper returns the check in both cases and logs only for a prefix below the minimum."""
    with capture_logs() as logs:
        long_enough = warn_if_uncacheable("rubric", "x" * 2000, "claude-opus-5")
        too_short = warn_if_uncacheable("rubric", "x" * 1000, "claude-opus-5")
    assert long_enough.cacheable and not too_short.cacheable
    assert [e["prefix_tokens"] for e in logs] == [too_short.prefix_tokens]


@pytest.mark.parametrize("method", ["rubric", "statements"])
async def test_with_the_default_models_minimum_the_new_prompt_is_cached_and_the_old_one_is_not(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge, method: str
) -> None:
    """Against a fake that caches only from the default model's minimum (3.5 characters per token), the judge writes
    its prefix once and reads it after, while the same judge with the instructions alone is never cached."""
    fake_messages_api.cache_minimum(assumed_min_tokens(DEFAULT_MODEL), chars_per_token=CHARS_PER_TOKEN)
    judge = make_judge(method)
    assert isinstance(judge, RubricJudge | StatementsJudge)
    first, second = await judge.judge(QUESTION, TIGHT), await judge.judge(QUESTION, PADDED)
    prefix = judge.prefix_check.prefix_tokens
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
