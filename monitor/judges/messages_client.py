"""One structured-output call to the Messages API with our own bounded retry loop, counters and usage/cost.

The SDK's own retries are off (`max_retries=0`): every attempt, retry and give-up is counted here, where a
metrics layer can read it, and `retry-after` is honoured with a cap."""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypedDict, TypeVar

import anthropic
import structlog
from anthropic.types import MessageParam, OutputConfigParam, TextBlockParam

from monitor.judges.settings import JudgeSettings
from schemas.errors import JudgeApiError, JudgeReplyInvalid, JudgeUnavailable
from schemas.usage import Usage

log = structlog.get_logger(__name__)

T = TypeVar("T")


# Transient failure kinds, retried with backoff. Anything else from the API is a `JudgeApiError`.
RETRYABLE_STATUS = {408: "request_timeout", 409: "conflict", 429: "rate_limited", 529: "overloaded"}


class RetryOptions(TypedDict, total=False):
    """The keyword options of `MessagesClient` (and of the judges that build one) besides the settings."""

    backoff_base_s: float
    backoff_max_s: float
    retry_after_cap_s: float
    rng: random.Random | None


@dataclass(slots=True)
class _Tokens:
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    def add(self, usage: anthropic.types.Usage) -> None:
        self.input += usage.input_tokens or 0
        self.output += usage.output_tokens or 0
        self.cache_read += usage.cache_read_input_tokens or 0
        self.cache_write += usage.cache_creation_input_tokens or 0


@dataclass(frozen=True, slots=True)
class _Failure:
    kind: str
    detail: str
    retry_after_s: float | None = None


class MessagesClient:
    """An `AsyncAnthropic` client for one model with the retry policy of the judges.

    `stats` counts `attempts`, `ok`, `error.<kind>` per failed attempt, `retry.<kind>` per retry,
    `gave_up.<kind>` per failed call, and the tokens of every attempt (`tokens.input`, ...)."""

    def __init__(
        self,
        settings: JudgeSettings,
        *,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 8.0,
        retry_after_cap_s: float = 60.0,
        rng: random.Random | None = None,
    ) -> None:
        if settings.api_key is None:
            raise JudgeApiError("no Anthropic API key configured (MONITOR_ANTHROPIC_API_KEY)")
        self.model = settings.model
        self.max_tokens = settings.max_tokens
        self.max_retries = settings.max_retries
        self.price = settings.price
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.retry_after_cap_s = retry_after_cap_s
        self.stats: Counter[str] = Counter()
        self._rng = rng or random.Random()
        self._client = anthropic.AsyncAnthropic(
            api_key=settings.api_key,
            base_url=settings.base_url,
            timeout=settings.request_timeout_s,
            max_retries=0,
        )

    async def structured(self, *, system: str, user: str, output_config: OutputConfigParam, parse: Callable[[str], T]) -> tuple[T, Usage]:
        """Send one judge request and return the parsed reply and the usage summed over all attempts.

        `system` goes out as a cached text block. Transient API errors and invalid replies are retried up to
        `judge_max_retries` times in total; raises `JudgeReplyInvalid`, `JudgeUnavailable` or `JudgeApiError`."""
        system_blocks: list[TextBlockParam] = [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]
        messages: list[MessageParam] = [{"role": "user", "content": user}]
        tokens = _Tokens()
        failure: _Failure | None = None
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            if failure is not None:
                self.stats["retries"] += 1
                self.stats[f"retry.{failure.kind}"] += 1
                delay = self._delay(attempt - 1, failure)
                log.debug("judge_retry", kind=failure.kind, attempt=attempt + 1, delay_s=round(delay, 3))
                if delay > 0:
                    await asyncio.sleep(delay)
            self.stats["attempts"] += 1
            try:
                message = await self._client.messages.create(
                    model=self.model,
                    max_tokens=self.max_tokens,
                    system=system_blocks,
                    messages=messages,
                    output_config=output_config,
                )
            except anthropic.APIError as e:
                failure = self._classify(e)
                self.stats[f"error.{failure.kind}"] += 1
                if failure.kind == "api_error":
                    self.stats["gave_up.api_error"] += 1
                    raise JudgeApiError(failure.detail, self._usage(tokens)) from e
                continue
            tokens.add(message.usage)
            self._count_tokens(message.usage)
            try:
                value = parse(_reply_text(message))
            except JudgeReplyInvalid as e:
                # A bad reply is not a load problem: retry at once, no backoff.
                failure = _Failure("invalid_reply", str(e))
                self.stats["error.invalid_reply"] += 1
                log.debug("judge_invalid_reply", error=str(e)[:200], attempt=attempt + 1)
                continue
            self.stats["ok"] += 1
            return value, self._usage(tokens)
        assert failure is not None
        self.stats[f"gave_up.{failure.kind}"] += 1
        summary = f"{failure.detail} (after {attempts} attempt{'s' if attempts > 1 else ''})"
        if failure.kind == "invalid_reply":
            raise JudgeReplyInvalid(summary, self._usage(tokens))
        raise JudgeUnavailable(f"{failure.kind}: {summary}", kind=failure.kind, usage=self._usage(tokens))

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._client.close()

    def _usage(self, t: _Tokens) -> Usage:
        cost = self.price.cost(t.input, t.output, t.cache_read, t.cache_write) if self.price else None
        return Usage(input_tokens=t.input, output_tokens=t.output, cache_read_tokens=t.cache_read, cache_write_tokens=t.cache_write, cost_usd=cost)

    def _count_tokens(self, usage: anthropic.types.Usage) -> None:
        self.stats["tokens.input"] += usage.input_tokens or 0
        self.stats["tokens.output"] += usage.output_tokens or 0
        self.stats["tokens.cache_read"] += usage.cache_read_input_tokens or 0
        self.stats["tokens.cache_write"] += usage.cache_creation_input_tokens or 0

    def _delay(self, retry_index: int, failure: _Failure) -> float:
        if failure.kind == "invalid_reply":
            return 0.0
        # Equal jitter: at least half the exponential step, so clients that failed together spread out.
        step = min(self.backoff_max_s, self.backoff_base_s * 2.0**retry_index)
        backoff = step / 2 + self._rng.uniform(0, step / 2)
        if failure.retry_after_s is not None:
            return max(backoff, min(failure.retry_after_s, self.retry_after_cap_s))
        return backoff

    def _classify(self, err: anthropic.APIError) -> _Failure:
        if isinstance(err, anthropic.APITimeoutError):
            return _Failure("timeout", "request timed out")
        if isinstance(err, anthropic.APIConnectionError):
            return _Failure("connection", f"connection error: {err.message}")
        if isinstance(err, anthropic.APIStatusError):
            status = err.status_code
            detail = f"HTTP {status}" + (f" {err.type}" if err.type else "") + (f": {err.api_message}" if err.api_message else "")
            kind = RETRYABLE_STATUS.get(status) or ("server_error" if status >= 500 else "api_error")
            return _Failure(kind, detail[:300], retry_after_s=retry_after_seconds(err.response.headers))
        # e.g. a 200 whose body is not a Message: the server misbehaved, which is transient from our side.
        return _Failure("bad_response", f"{type(err).__name__}: {err.message}"[:300])


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from `retry-after-ms`, `retry-after` (seconds or an HTTP date), or None."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    return max(0.0, email.utils.mktime_tz(parsed) - time.time())


def _reply_text(message: anthropic.types.Message) -> str:
    if message.stop_reason == "max_tokens":
        raise JudgeReplyInvalid("reply cut off at max_tokens")
    if message.stop_reason == "refusal":
        raise JudgeReplyInvalid("the model refused to reply")
    texts = [block.text for block in message.content if block.type == "text"]
    if not texts:
        raise JudgeReplyInvalid("reply has no text block")
    return "".join(texts)
