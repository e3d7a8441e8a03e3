"""One judge request through any provider, with the judges' one retry policy, counters, validation and cost.

Every provider sits under the same loop (`providers.base.Provider` is the seam), so the guarantees are the same for
all of them:
- transient failures (429 with its `retry-after`, 5xx, timeouts, dropped connections) are retried with the monitor's
  one `Backoff`, up to `judge_max_retries` times; a refusal retrying cannot fix (auth, a bad request) is not;
- every reply is validated against the judge's reply model, whatever the mode; an invalid one (free text, a wrong
  field, a score out of range, JSON cut off at max_tokens, a refusal) is sent back ONCE with the validation error,
  and if the second reply is invalid too the event gets an error row (`JudgeReplyInvalid`), never a guessed score;
- `MONITOR_JUDGE_STRUCTURED_OUTPUT=auto` takes the mode the provider is known to enforce (the Anthropic API's
  json_schema), or else probes before the first request: a benign, known pair is judged in the provider's modes in
  order (json_schema, json_object, tools, prompt), the first that gives a valid reply is kept and the choice logged.
  What the probe cost is added to that first request's usage, so it is counted as spend.

`stats` counts `attempts`, `ok`, `error.<kind>` per failed attempt, `retry.<kind>` per retry, `gave_up.<kind>` per
failed call, `invalid.<mode>` per invalid reply, and the tokens of every reply (`tokens.input`, `tokens.cache_read`,
…). Where the provider marks a prefix for caching (Anthropic), the cache counters of every reply feed a `CacheWatch`,
which logs `judge_prompt_cache_cold` once when replies stop reading it."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Generic, TypedDict, TypeVar, Unpack

import httpx2
import structlog

from monitor.backoff import Backoff
from monitor.judges.cache_minimums import PrefixCheck, check_prefix
from monitor.judges.cache_watch import CacheWatch
from monitor.judges.providers.base import Correction, JudgeRequest, Provider, ProviderReply, Tokens
from monitor.judges.schema_watch import SchemaWatch
from monitor.judges.settings import JudgeSettings, StructuredMode
from monitor.judges.structured_output import first_json_object
from schemas.errors import JudgeApiError, JudgeError, JudgeReplyInvalid, JudgeUnavailable, ProviderCallFailed
from schemas.usage import Usage

log = structlog.get_logger(__name__)

T = TypeVar("T")

# How long a failed mode probe is believed before the next event probes again.
PROBE_RETRY_S = 60.0
# Modes whose replies are read tolerantly: the server is not asked to enforce the object's shape.
TOLERANT_MODES: tuple[StructuredMode, ...] = ("json_object", "prompt")


class ClientOptions(TypedDict, total=False):
    """The keyword options of `JudgeClient` (and of the judges that build one) besides the settings."""

    backoff: Backoff  # the waits between retries; `Backoff()` (0.5 s doubling to 8 s, retry-after up to 60 s)
    http_client: httpx2.AsyncClient | None  # handed to the provider's SDK; None: the SDK builds its own
    provider: Provider  # a ready provider (tests, benchmarks); None: built from the settings


@dataclass(frozen=True, slots=True)
class Sent(Generic[T]):
    """A validated reply: the parsed value, the usage of every attempt (the mode probe's too), the rubric levels'
    probabilities where the provider gave them, and the mode that produced it."""

    value: T
    usage: Usage
    level_probabilities: tuple[float, ...] | None
    mode: StructuredMode


class JudgeClient:
    """The judges' client for one provider and model: retries, validation, the mode ladder, counters and cost."""

    def __init__(self, settings: JudgeSettings, **options: Unpack[ClientOptions]) -> None:
        from monitor.judges.providers.factory import build_provider  # the SDK of the configured provider only

        self.settings = settings
        self.model = settings.model
        self.max_retries = settings.max_retries
        self.price = settings.price
        self.backoff = options.get("backoff") or Backoff()
        self.provider: Provider = options.get("provider") or build_provider(settings, options.get("http_client"))
        self.stats: Counter[str] = Counter()
        fixed = settings.structured_output
        self.mode: StructuredMode | None = self.provider.known_mode if fixed == "auto" else fixed
        self._probe_lock = asyncio.Lock()
        self._probe_failed: tuple[float, JudgeApiError] | None = None  # when the last probe failed, and how
        self._replies = 0  # replies received so far: a request sent before the first cannot have found a cache entry
        self._watch: tuple[str, PrefixCheck, CacheWatch] | None = None  # the cached prefix last sent, and its watch
        self._schema_watch = SchemaWatch()

    async def send(
        self, request: JudgeRequest, *, parse: Callable[[str], T], probe: JudgeRequest | None = None
    ) -> Sent[T]:
        """Send one judge request and return its validated reply; raises `JudgeReplyInvalid`, `JudgeUnavailable` or
        `JudgeApiError`, each with the usage of the attempts made. While no mode is chosen, `probe` (a benign request
        whose reply is known to be judgeable) chooses it first; its cost is added to this request's usage."""
        probe_usage: Usage | None = None
        if self.mode is None:
            async with self._probe_lock:
                if self.mode is None:
                    probe_usage = await self._probe(probe or request, parse)
        assert self.mode is not None
        try:
            sent = await self._send_in(self.mode, request, parse, correct=True)
        except JudgeError as e:
            e.usage = _add(probe_usage, e.usage) if probe_usage is not None else e.usage
            raise
        return sent if probe_usage is None else replace(sent, usage=_add(probe_usage, sent.usage))

    async def _probe(self, request: JudgeRequest, parse: Callable[[str], T]) -> Usage:
        """Send `request` in the provider's modes in order until one gives a valid reply (after its one corrective
        retry) and keep that mode; returns what the probe cost. A failed probe is remembered for `PROBE_RETRY_S`, so
        a server that cannot be used is not probed again by every event."""
        if self._probe_failed is not None and time.monotonic() - self._probe_failed[0] < PROBE_RETRY_S:
            # A new error with nothing spent: the failed probe's cost was the event's that ran it, not every later one.
            raise JudgeApiError(str(self._probe_failed[1]), Usage(cost_usd=None if self.price is None else 0.0))
        spent = Usage(cost_usd=None if self.price is None else 0.0)
        tried: list[tuple[StructuredMode, str]] = []
        for mode in self.provider.modes:
            try:
                sent = await self._send_in(mode, request, parse, correct=True)
            except JudgeApiError as e:
                if not (isinstance(e.__cause__, ProviderCallFailed) and e.__cause__.mode_refused):
                    raise
                tried.append((mode, str(e)))
                spent = _add(spent, e.usage)
                continue
            except JudgeReplyInvalid as e:
                tried.append((mode, str(e)))
                spent = _add(spent, e.usage)
                continue
            self.mode = mode
            log.info(
                "judge_structured_output_chosen",
                provider=self.provider.name,
                model=self.model,
                mode=mode,
                refused_or_invalid=[m for m, _ in tried],
            )
            return _add(spent, sent.usage)
        why = "; ".join(f"{m}: {e}" for m, e in tried)[:600]
        failed = JudgeApiError(
            f"no structured-output mode of the {self.provider.name} provider gave a valid reply ({why}): check "
            "MONITOR_JUDGE_MODEL and MONITOR_JUDGE_BASE_URL, or set MONITOR_JUDGE_STRUCTURED_OUTPUT",
            spent,
        )
        self._probe_failed = (time.monotonic(), failed)
        log.error(
            "judge_structured_output_unavailable", provider=self.provider.name, model=self.model, tried=len(tried)
        )
        raise failed

    async def _send_in(
        self, mode: StructuredMode, request: JudgeRequest, parse: Callable[[str], T], *, correct: bool
    ) -> Sent[T]:
        """A validated reply in `mode`: the reply, then (with `correct`) one corrective retry if it was invalid."""
        spent = Tokens()
        while True:
            reply = await self._reply(mode, request, spent)
            spent = spent + reply.tokens
            try:
                value = parse(_candidate(reply, mode))
            except JudgeReplyInvalid as e:
                request = self._corrected(mode, request, reply, e, spent, correct=correct)
                continue
            self._observe_schema(mode, invalid=False)
            self.stats["ok"] += 1
            return Sent(value, self._usage(spent), reply.level_probabilities, mode)

    async def _reply(self, mode: StructuredMode, request: JudgeRequest, spent: Tokens) -> ProviderReply:
        """One reply, transient failures retried with the backoff up to `judge_max_retries` times; raises
        `JudgeApiError` or `JudgeUnavailable` carrying `spent` (what the earlier replies of this request cost)."""
        watched = self._watch_for(request) if self.provider.marks_cache else None
        retries = 0
        while True:
            self.stats["attempts"] += 1
            could_read = self._replies > 0
            try:
                reply = await self.provider.send(request, mode)
            except ProviderCallFailed as e:
                await self._retry_or_raise(e, retries, spent)
                retries += 1
                continue
            self._replies += 1
            self.count_tokens(reply.tokens)
            if watched is not None:
                self._observe_cache(*watched, reply.tokens, could_read)
            return reply

    async def _retry_or_raise(self, e: ProviderCallFailed, retries: int, spent: Tokens) -> None:
        """Wait before retry number `retries` + 1 of a failed call, or raise when it cannot or may not be retried."""
        self.stats[f"error.{e.kind}"] += 1
        if not e.transient:
            self.stats["gave_up.api_error"] += 1
            raise JudgeApiError(e.detail, self._usage(spent)) from e
        if retries >= self.max_retries:
            self.stats[f"gave_up.{e.kind}"] += 1
            summary = f"{e.detail} (after {retries + 1} attempt{'s' if retries else ''})"
            raise JudgeUnavailable(f"{e.kind}: {summary}", kind=e.kind, usage=self._usage(spent)) from e
        self.stats["retries"] += 1
        self.stats[f"retry.{e.kind}"] += 1
        delay = self.backoff.delay(retries, e.retry_after_s)
        log.debug("judge_retry", kind=e.kind, retry=retries + 1, delay_s=round(delay, 3))
        await asyncio.sleep(delay)

    def _corrected(
        self,
        mode: StructuredMode,
        request: JudgeRequest,
        reply: ProviderReply,
        error: JudgeReplyInvalid,
        spent: Tokens,
        *,
        correct: bool,
    ) -> JudgeRequest:
        """The corrective retry of an invalid reply (the reply and its validation error sent back), or raises
        `JudgeReplyInvalid` when the reply was already the correction (or `correct` is off)."""
        self._observe_schema(mode, invalid=True)
        self.stats["error.invalid_reply"] += 1
        self.stats[f"invalid.{mode}"] += 1
        corrected = request.correction is not None
        log.debug("judge_invalid_reply", mode=mode, error=str(error)[:200], corrected=corrected)
        if not correct or corrected:
            self.stats["gave_up.invalid_reply"] += 1
            note = " after a corrective retry" if corrected else ""
            raise JudgeReplyInvalid(f"{error} ({mode} mode{note})", self._usage(spent)) from None
        self.stats["retries"] += 1
        self.stats["retry.invalid_reply"] += 1
        return replace(request, correction=Correction(reply.text[:4000], str(error)))

    async def call(self, op: Callable[[], Awaitable[T]], *, what: str, stats: Counter[str]) -> T:
        """`await op()` (one API call other than a judge request: a batch's), retried on transient
        `ProviderCallFailed`s like a judge request. Counts `attempts`, `error.<kind>`, `retry.<kind>` and
        `gave_up.<kind>` in `stats`; raises `JudgeUnavailable` after `judge_max_retries` retries, or `JudgeApiError` at
        once for an error retrying cannot fix."""
        failure: ProviderCallFailed | None = None
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            if failure is not None:
                stats[f"retry.{failure.kind}"] += 1
                delay = self.backoff.delay(attempt - 1, failure.retry_after_s)
                log.debug("api_call_retry", call=what, kind=failure.kind, attempt=attempt + 1, delay_s=round(delay, 3))
                await asyncio.sleep(delay)
            stats["attempts"] += 1
            try:
                return await op()
            except ProviderCallFailed as e:
                failure = e
                stats[f"error.{e.kind}"] += 1
                if not e.transient:
                    stats["gave_up.api_error"] += 1
                    raise JudgeApiError(f"{what}: {e.detail}") from e
        assert failure is not None
        stats[f"gave_up.{failure.kind}"] += 1
        summary = f"{failure.detail} (after {attempts} attempt{'s' if attempts > 1 else ''})"
        raise JudgeUnavailable(f"{failure.kind}: {what}: {summary}", kind=failure.kind)

    async def aclose(self) -> None:
        """Close the provider's HTTP connections (an injected `http_client` too: the SDK closes it)."""
        await self.provider.aclose()

    def usage_of(self, tokens: Tokens, *, batch: bool = False) -> Usage:
        """`tokens` of one reply, priced at list price or, with `batch`, at the batch discount."""
        return self._usage(tokens, batch=batch)

    def count_tokens(self, tokens: Tokens) -> None:
        """Add one reply's tokens, as the provider counted them, to `stats` (the judge's token counters)."""
        self.stats["tokens.input"] += tokens.input
        self.stats["tokens.output"] += tokens.output
        self.stats["tokens.cache_read"] += tokens.cache_read
        self.stats["tokens.cache_write"] += tokens.cache_write

    def _usage(self, t: Tokens, *, batch: bool = False) -> Usage:
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

    def _watch_for(self, request: JudgeRequest) -> tuple[PrefixCheck, CacheWatch]:
        """The check and watch of the system prompt (the prefix marked for caching); a new prefix gets a new watch, so
        a run of cold replies is always one prefix's."""
        prefix = request.system
        if self._watch is None or (self._watch[0] is not prefix and self._watch[0] != prefix):
            check = check_prefix(prefix, self.model)
            self._watch = (prefix, check, CacheWatch(armed=check.should_cache))
        return self._watch[1], self._watch[2]

    def _observe_schema(self, mode: StructuredMode, *, invalid: bool) -> None:
        change = self._schema_watch.observe(time.monotonic(), invalid)
        if change == "warn":
            log.warning(
                "judge_schema_not_enforced",
                provider=self.provider.name,
                model=self.model,
                mode=mode,
                invalid_share=round(self._schema_watch.share, 3),
                replies=len(self._schema_watch.replies),
                fix="set MONITOR_JUDGE_STRUCTURED_OUTPUT to another mode (json_object, tools or prompt), or make the "
                "server enforce response_format",
            )
        elif change == "clear":
            log.info("judge_schema_enforced_again", provider=self.provider.name, model=self.model, mode=mode)

    def _observe_cache(self, check: PrefixCheck, watch: CacheWatch, tokens: Tokens, could_read: bool) -> None:
        change = watch.observe(tokens.cache_read, tokens.cache_write, could_read=could_read)
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


def _candidate(reply: ProviderReply, mode: StructuredMode) -> str:
    """The text to validate; raises `JudgeReplyInvalid` for a reply cut off or refused (whatever its text)."""
    if reply.cut_off:
        raise JudgeReplyInvalid("reply cut off at max_tokens")
    if reply.refused:
        raise JudgeReplyInvalid("the model refused to reply")
    if mode in TOLERANT_MODES:
        return first_json_object(reply.text) or reply.text
    return reply.text


def _add(a: Usage, b: Usage | None) -> Usage:
    """Two usages summed (cost unknown if either is)."""
    if b is None:
        return a
    cost = None if a.cost_usd is None or b.cost_usd is None else a.cost_usd + b.cost_usd
    return Usage(
        a.input_tokens + b.input_tokens,
        a.output_tokens + b.output_tokens,
        a.cache_read_tokens + b.cache_read_tokens,
        a.cache_write_tokens + b.cache_write_tokens,
        cost,
    )
