"""Minimum cacheable prompt lengths per judge model, and the token estimates the judges compare them with.

The API caches nothing below a model-dependent minimum prefix and says nothing about it (both cache counters stay
0), so a prompt that shrinks below it silently costs full price on every call. The real token count is the API's
own and is not known here: the check at start-up counts conservatively (`CACHE_CHECK_CHARS_PER_TOKEN`), and what the
API did is read from every reply (`monitor.judges.cache_watch`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import structlog

from monitor.judges.pricing import canonical_model as base_model

log = structlog.get_logger(__name__)

# Anthropic's rule of thumb for English text (about 3.5 characters per token): the estimate for costs and for
# whether the API should cache a prefix, where counting too many tokens is the safe side.
CHARS_PER_TOKEN = 3.5
# The estimate for the minimum check, where counting too many tokens is the unsafe side: a prefix estimated at 4,963
# tokens (17,368 characters at 3.5) is 4,087 at 4.25 characters per token, under a 4,096 minimum, and would never be
# cached. The tokenizer is not published and 3.5 is only a rule of thumb: English prose often runs nearer 4 to 4.25
# characters per token. 4.5 leaves room beyond that, so a prefix that passes here should pass at the API's count.
CACHE_CHECK_CHARS_PER_TOKEN = 4.5

# Tokens, per model id without its date suffix. Source: Anthropic's prompt-caching docs ("minimum cacheable prompt
# length", as quoted in anthropic-sdk-python issue 1194) and the project's engineering notes for the 4.7+ and 5
# models. Not published for the 5.5 models at the time of writing: those fall back to the largest value.
MIN_CACHEABLE_TOKENS: dict[str, int] = {
    "claude-opus-5": 512,
    "claude-fable-5": 512,
    "claude-mythos-5": 512,
    "claude-opus-4-8": 1024,
    "claude-sonnet-5": 1024,
    "claude-sonnet-4-6": 1024,
    "claude-sonnet-4-5": 1024,
    "claude-opus-4-1": 1024,
    "claude-opus-4-0": 1024,
    "claude-opus-4": 1024,
    "claude-sonnet-4-0": 1024,
    "claude-sonnet-4": 1024,
    "claude-3-7-sonnet": 1024,
    "claude-opus-4-7": 2048,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
    "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096,
    "claude-haiku-4-5": 4096,
}

# An unknown model gets the largest minimum: assuming too small a one would hide an uncached prompt.
UNKNOWN_MODEL_MIN_TOKENS = max(MIN_CACHEABLE_TOKENS.values())


def estimate_tokens(text: str) -> int:
    """Tokens in `text` by the characters-per-token approximation (rounded up)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def conservative_tokens(text: str) -> int:
    """Tokens in `text` at `CACHE_CHECK_CHARS_PER_TOKEN` (rounded down): fewer than the API will count."""
    return math.floor(len(text) / CACHE_CHECK_CHARS_PER_TOKEN)


def min_cacheable_tokens(model: str) -> int | None:
    """The published minimum cacheable prefix of `model`, or None when it is not in the table."""
    return MIN_CACHEABLE_TOKENS.get(base_model(model))


def assumed_min_tokens(model: str) -> int:
    """The minimum to plan for: the published one, or the largest known one for a model not in the table."""
    known = min_cacheable_tokens(model)
    return known if known is not None else UNKNOWN_MODEL_MIN_TOKENS


@dataclass(frozen=True, slots=True)
class PrefixCheck:
    """Whether a static prompt prefix is long enough for the model's prompt cache: for certain (`cacheable`, by the
    conservative count `prefix_tokens`), or by the usual estimate (`should_cache`, `estimated_tokens`)."""

    model: str
    prefix_chars: int
    prefix_tokens: int  # at CACHE_CHECK_CHARS_PER_TOKEN, rounded down
    estimated_tokens: int  # at CHARS_PER_TOKEN, rounded up
    min_tokens: int
    known_model: bool

    @property
    def cacheable(self) -> bool:
        """True when even the conservative count reaches the minimum: calls after the first read the prefix from the
        cache whatever the tokenizer makes of it."""
        return self.prefix_tokens >= self.min_tokens

    @property
    def should_cache(self) -> bool:
        """True when the usual estimate reaches the minimum: the API may well cache the prefix, so replies that never
        read it are worth a warning (see `cache_watch`)."""
        return self.estimated_tokens >= self.min_tokens


def check_prefix(prefix: str, model: str) -> PrefixCheck:
    """The check of `prefix` against `model`'s minimum (the largest known minimum for an unknown model)."""
    return PrefixCheck(
        model=model,
        prefix_chars=len(prefix),
        prefix_tokens=conservative_tokens(prefix),
        estimated_tokens=estimate_tokens(prefix),
        min_tokens=assumed_min_tokens(model),
        known_model=min_cacheable_tokens(model) is not None,
    )


def warn_if_uncacheable(method: str, prefix: str, model: str) -> PrefixCheck:
    """Check `prefix` for `model` and log a warning when it may be too short to be cached (that only costs money)."""
    check = check_prefix(prefix, model)
    if not check.cacheable:
        log.warning(
            "judge_prompt_below_cache_minimum",
            method=method,
            model=model,
            prefix_chars=check.prefix_chars,
            prefix_tokens=check.prefix_tokens,
            prefix_tokens_estimate=check.estimated_tokens,
            min_tokens=check.min_tokens,
            known_model=check.known_model,
        )
    return check
