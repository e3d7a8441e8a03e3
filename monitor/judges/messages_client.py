"""One structured-output call to the Messages API with our own bounded retry loop, counters and usage/cost.

The SDK's own retries are off (`max_retries=0`): every attempt, retry and give-up is counted here, where a
metrics layer can read it, and `retry-after` is honoured with a cap. The request body (`params`), the reply's
text (`reply_text`), the pricing of a usage (`usage_of`) and the retry of any other API call (`call`) are shared
with the Message Batches path (`monitor.judges.batches`). The waits come from the monitor's one `Backoff`; an
`http_client` (the SDK's `httpx2.AsyncClient`, e.g. over a mock transport) is the seam for the transport."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypedDict, TypeVar, Unpack

import anthropic
import httpx2
import structlog
from anthropic.types import OutputConfigParam
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

from monitor.backoff import Backoff, retry_after_seconds
from monitor.judges.cache_minimums import PrefixCheck, check_prefix
from monitor.judges.cache_watch import CacheWatch
from monitor.judges.settings import JudgeSettings
from schemas.errors import JudgeApiError, JudgeReplyInvalid, JudgeUnavailable
from schemas.usage import Usage

log = structlog.get_logger(__name__)

T = TypeVar("T")


# Transient failure kinds, retried with backoff. Anything else from the API is a `JudgeApiError`.
RETRYABLE_STATUS = {408: "request_timeout", 409: "conflict", 429: "rate_limited", 529: "overloaded"}


class ClientOptions(TypedDict, total=False):
    """The keyword options of `MessagesClient` (and of the judges that build one) besides the settings."""

    backoff: Backoff  # the waits between retries; `Backoff()` (0.5 s doubling to 8 s, retry-after up to 60 s)
    http_client: httpx2.AsyncClient | None  # handed to `AsyncAnthropic`; None: the SDK builds its own


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
    `gave_up.<kind>` per failed call, and the tokens of every reply (`tokens.input`, `tokens.cache_read`, ...; a
    Message Batch's results too, through `count_tokens`). The cache counters of every reply of `send` feed a
    `CacheWatch` for the prefix sent, which logs `judge_prompt_cache_cold` once when replies stop reading it."""

    def __init__(self, settings: JudgeSettings, **options: Unpack[ClientOptions]) -> None:
        if settings.api_key is None:
            raise JudgeApiError("no Anthropic API key configured (MONITOR_ANTHROPIC_API_KEY)")
        self.model = settings.model
        self.max_tokens = settings.max_tokens
        self.max_retries = settings.max_retries
        self.price = settings.price
        self.settings = settings
        self.backoff = options.get("backoff") or Backoff()
        self.stats: Counter[str] = Counter()
        self._replies = 0  # replies received so far: a request sent before the first cannot have found a cache entry
        self._watch: tuple[str, PrefixCheck, CacheWatch] | None = None  # the cached prefix last sent, and its watch
        self._client = anthropic.AsyncAnthropic(
            api_key=settings.api_key.get_secret_value() if settings.api_key else None,
            base_url=settings.base_url,
            timeout=settings.request_timeout_s,
            max_retries=0,
            http_client=options.get("http_client"),
        )

    async def structured(
        self, *, system: str, user: str, output_config: OutputConfigParam, parse: Callable[[str], T]
    ) -> tuple[T, Usage]:
        """Send one judge request and return the parsed reply and the usage summed over all attempts.

        `system` goes out as a cached text block. Transient API errors and invalid replies are retried up to
        `judge_max_retries` times in total; raises `JudgeReplyInvalid`, `JudgeUnavailable` or `JudgeApiError`."""
        return await self.send(self.params(system=system, user=user, output_config=output_config), parse=parse)

    async def send(self, params: MessageCreateParamsNonStreaming, *, parse: Callable[[str], T]) -> tuple[T, Usage]:
        """`structured` for a request body built by `params`: the parsed reply and the usage of all attempts."""
        tokens = _Tokens()
        failure: _Failure | None = None
        attempts = self.max_retries + 1
        watched = self._watch_for(params)
        for attempt in range(attempts):
            if failure is not None:
                self.stats["retries"] += 1
                self.stats[f"retry.{failure.kind}"] += 1
                if failure.kind == "invalid_reply":
                    delay = 0.0  # a bad reply is not a load problem: it is retried at once, without a wait
                else:
                    delay = self.backoff.delay(attempt - 1, failure.retry_after_s)
                log.debug("judge_retry", kind=failure.kind, attempt=attempt + 1, delay_s=round(delay, 3))
                if delay > 0:
                    await asyncio.sleep(delay)
            self.stats["attempts"] += 1
            could_read = self._replies > 0
            try:
                message = await self._client.messages.create(**params)
            except anthropic.APIError as e:
                failure = self._classify(e)
                self.stats[f"error.{failure.kind}"] += 1
                if failure.kind == "api_error":
                    self.stats["gave_up.api_error"] += 1
                    raise JudgeApiError(failure.detail, self._usage(tokens)) from e
                continue
            self._replies += 1
            tokens.add(message.usage)
            self.count_tokens(message.usage)
            if watched is not None:
                self._observe_cache(*watched, message.usage, could_read)
            try:
                value = parse(reply_text(message))
            except JudgeReplyInvalid as e:
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

    def params(self, *, system: str, user: str, output_config: OutputConfigParam) -> MessageCreateParamsNonStreaming:
        """The body of one judge request: model, max_tokens, `system` as a cached text block, `user`, `output_config`.

        The same dict is sent by `structured` and as a Message Batch request's `params`."""
        return {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": user}],
            "output_config": output_config,
        }

    @property
    def batches(self) -> anthropic.resources.messages.AsyncBatches:
        """The SDK's Message Batches resource on this client (same key, base URL, timeout; SDK retries off)."""
        return self._client.messages.batches

    def usage_of(self, usage: anthropic.types.Usage, *, batch: bool = False) -> Usage:
        """`usage` of one reply, priced at list price or, with `batch`, at the Message Batches discount."""
        tokens = _Tokens()
        tokens.add(usage)
        return self._usage(tokens, batch=batch)

    async def call(self, op: Callable[[], Awaitable[T]], *, what: str, stats: Counter[str]) -> T:
        """`await op()` (one API call other than a judge request), retried on transient errors like `structured`.

        Counts `attempts`, `error.<kind>`, `retry.<kind>` and `gave_up.<kind>` in `stats`; raises `JudgeUnavailable`
        after `judge_max_retries` retries, or `JudgeApiError` at once for an error retrying cannot fix."""
        failure: _Failure | None = None
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            if failure is not None:
                stats[f"retry.{failure.kind}"] += 1
                delay = self.backoff.delay(attempt - 1, failure.retry_after_s)
                log.debug("api_call_retry", call=what, kind=failure.kind, attempt=attempt + 1, delay_s=round(delay, 3))
                if delay > 0:
                    await asyncio.sleep(delay)
            stats["attempts"] += 1
            try:
                return await op()
            except anthropic.APIError as e:
                failure = self._classify(e)
                stats[f"error.{failure.kind}"] += 1
                if failure.kind == "api_error":
                    stats["gave_up.api_error"] += 1
                    raise JudgeApiError(f"{what}: {failure.detail}") from e
        assert failure is not None
        stats[f"gave_up.{failure.kind}"] += 1
        summary = f"{failure.detail} (after {attempts} attempt{'s' if attempts > 1 else ''})"
        raise JudgeUnavailable(f"{failure.kind}: {what}: {summary}", kind=failure.kind)

    async def aclose(self) -> None:
        """Close the HTTP connections (an injected `http_client` too: the SDK closes the client it was given)."""
        await self._client.close()

    def _usage(self, t: _Tokens, *, batch: bool = False) -> Usage:
        if self.price is None:
            cost = None
        elif batch:
            cost = self.price.batch_cost(t.input, t.output, t.cache_read, t.cache_write)
        else:
            cost = self.price.cost(t.input, t.output, t.cache_read, t.cache_write)
        return Usage(
            input_tokens=t.input,
            output_tokens=t.output,
            cache_read_tokens=t.cache_read,
            cache_write_tokens=t.cache_write,
            cost_usd=cost,
        )

    def count_tokens(self, usage: anthropic.types.Usage) -> None:
        """Add one reply's tokens, as the API counted them, to `stats` (exported as the judge's token counters)."""
        self.stats["tokens.input"] += usage.input_tokens or 0
        self.stats["tokens.output"] += usage.output_tokens or 0
        self.stats["tokens.cache_read"] += usage.cache_read_input_tokens or 0
        self.stats["tokens.cache_write"] += usage.cache_creation_input_tokens or 0

    def _watch_for(self, params: MessageCreateParamsNonStreaming) -> tuple[PrefixCheck, CacheWatch] | None:
        """The check and watch of the prefix `params` marks for caching (None: nothing marked); a new prefix gets a new
        watch, so a run of cold replies is always one prefix's."""
        prefix = cached_prefix(params)
        if not prefix:
            return None
        if self._watch is None or (self._watch[0] is not prefix and self._watch[0] != prefix):
            check = check_prefix(prefix, self.model)
            self._watch = (prefix, check, CacheWatch(armed=check.should_cache))
        return self._watch[1], self._watch[2]

    def _observe_cache(
        self, check: PrefixCheck, watch: CacheWatch, usage: anthropic.types.Usage, could_read: bool
    ) -> None:
        change = watch.observe(
            usage.cache_read_input_tokens or 0, usage.cache_creation_input_tokens or 0, could_read=could_read
        )
        if change.warn:
            # Lengths only: the prefix is the static system prompt, but no prompt or conversation text is ever logged.
            log.warning(
                "judge_prompt_cache_cold",
                model=self.model,
                replies=change.misses,
                cache_write_tokens=change.written,
                prefix_chars=check.prefix_chars,
                prefix_tokens_estimate=check.estimated_tokens,
                prefix_tokens_conservative=check.prefix_tokens,
                min_tokens=check.min_tokens,
                known_model=check.known_model,
            )
        elif change.rearm:
            log.info("judge_prompt_cache_read_again", model=self.model, prefix_chars=check.prefix_chars)

    def _classify(self, err: anthropic.APIError) -> _Failure:
        if isinstance(err, anthropic.APITimeoutError):
            return _Failure("timeout", "request timed out")
        if isinstance(err, anthropic.APIConnectionError):
            return _Failure("connection", f"connection error: {err.message}")
        if isinstance(err, anthropic.APIStatusError):
            status = err.status_code
            detail = (
                f"HTTP {status}"
                + (f" {err.type}" if err.type else "")
                + (f": {err.api_message}" if err.api_message else "")
            )
            kind = RETRYABLE_STATUS.get(status) or ("server_error" if status >= 500 else "api_error")
            return _Failure(kind, detail[:300], retry_after_s=retry_after_seconds(err.response.headers))
        # e.g. a 200 whose body is not a Message: the server misbehaved, which is transient from our side.
        return _Failure("bad_response", f"{type(err).__name__}: {err.message}"[:300])


def cached_prefix(params: MessageCreateParamsNonStreaming) -> str:
    """The system text `params` marks for prompt caching: every system block up to the last one with `cache_control`
    ("" when none has it). No tools precede the system prompt in a judge request, so this is the whole prefix."""
    system = params.get("system")
    if not system or isinstance(system, str):
        return ""  # a plain string cannot carry a cache marker
    blocks = list(system)
    marked = [i for i, block in enumerate(blocks) if block.get("cache_control")]
    if not marked:
        return ""
    return "".join(block["text"] for block in blocks[: marked[-1] + 1])


def reply_text(message: anthropic.types.Message) -> str:
    """The text of a judge's reply; raises `JudgeReplyInvalid` if it was cut off, refused or has no text."""
    if message.stop_reason == "max_tokens":
        raise JudgeReplyInvalid("reply cut off at max_tokens")
    if message.stop_reason == "refusal":
        raise JudgeReplyInvalid("the model refused to reply")
    texts = [block.text for block in message.content if block.type == "text"]
    if not texts:
        raise JudgeReplyInvalid("reply has no text block")
    return "".join(texts)
