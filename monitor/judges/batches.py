"""An LLM judge over the Message Batches API: the same judge (prompt, params, parsing, `info`) on another transport,
at `BATCH_DISCOUNT` of the list price, answered within 24 hours instead of at once.

    batch = BatchJudge(judge)
    batch_id = await batch.submit([BatchItem(custom_id_for(batch.info.judge_id, event_id), question, response), ...])
    ... await batch.status(batch_id) until `ended` ...
    outcomes = await batch.results(batch_id)   # custom_id -> Judgement | JudgeFailure

Blank responses never go out: `without_call` gives their verdict, as `LLMJudge.judge` does. Every HTTP call is
retried on transient errors like a judge request (`JudgeClient.call`); a batched request is never retried here:
a failed one comes back as a `JudgeFailure` whose `transient` says whether a later batch may succeed."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import anthropic
import httpx2
import structlog
from anthropic.types.messages import MessageBatchIndividualResponse
from anthropic.types.messages.batch_create_params import Request

from monitor.judges.base import FailureReason, JudgeFailure, JudgeInfo, Judgement
from monitor.judges.llm import LLMJudge
from monitor.judges.providers.anthropic_messages import AnthropicMessages, classify, reply_of
from monitor.judges.providers.base import ProviderReply
from schemas.errors import JudgeReplyInvalid, JudgeUnavailable
from schemas.events import Turn
from schemas.usage import Usage

log = structlog.get_logger(__name__)

T = TypeVar("T")

CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # the API's pattern for a request's custom_id
MAX_BATCH_REQUESTS = 100_000  # the API's limits on one batch
MAX_BATCH_BYTES = 256_000_000

# Errored entries of these API error types failed for the provider's reasons, not the request's: a later batch
# (or the one-call path) may well succeed, so they are `unavailable`. Anything else (invalid_request_error, ...) would
# fail again: an `api_error`. The API's type leads the detail.
TRANSIENT_ERROR_TYPES = frozenset({"api_error", "overloaded_error", "rate_limit_error", "timeout_error"})


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One pair to judge in a batch, with the earlier turns and system instructions it is read with; `custom_id`
    (see `custom_id_for`) matches its outcome to it."""

    custom_id: str
    question: str
    response: str
    context: tuple[Turn, ...] = ()
    system: str = ""


def custom_id_for(judge_id: str, event_id: str) -> str:
    """A valid custom_id for judging `event_id` with `judge_id`: the same inputs always give the same id."""
    # Hashed, since event ids need not match the API's pattern or length; 160 bits make a collision negligible.
    return "e" + hashlib.sha256(f"{judge_id}\x00{event_id}".encode()).hexdigest()[:40]


@dataclass(frozen=True, slots=True)
class BatchStatus:
    """Where a batch is: `ended` once every request has an outcome; the counts are the API's request_counts
    (outcome counts stay 0 until the whole batch ended)."""

    batch_id: str
    ended: bool
    processing: int
    succeeded: int
    errored: int
    canceled: int
    expired: int


class BatchJudge:
    """`judge` over the Message Batches API. Takes over the judge: `aclose` closes its client.

    `stats` counts the HTTP calls (`attempts`, `error.<kind>`, `retry.<kind>`, `gave_up.<kind>`) and the outcomes
    read (`result.ok`, `result.<reason>`); the tokens of succeeded entries go to the judge's own `stats`."""

    def __init__(self, judge: LLMJudge[Any]) -> None:
        provider = judge.client.provider
        if not isinstance(provider, AnthropicMessages) or provider.name != "anthropic":
            # One line for `replay --batch-api`: the other providers' batch services are not wired in.
            raise ValueError(
                f"the {provider.name} provider has no batch API here: replay without --batch-api (Message Batches "
                "are the anthropic provider's)"
            )
        self.judge = judge
        self._client = judge.client
        self._batches = provider.batches
        self.stats: Counter[str] = Counter()

    @property
    def info(self) -> JudgeInfo:
        """The wrapped judge's identity: the same judge, so its rows are comparable with the one-call path's."""
        return self.judge.info

    def without_call(self, question: str, response: str) -> Judgement | None:
        """The verdict needing no request (a blank response scores 0), else None; such pairs cannot be submitted."""
        return self.judge.without_call(question, response)

    async def submit(self, items: Sequence[BatchItem]) -> str:
        """Create one batch judging `items` and return its id; raises `JudgeUnavailable` or `JudgeApiError`.

        Raises ValueError for what the caller must not send: no items, an invalid or repeated custom_id, a pair
        `without_call` answers, or more than the API's limits (`MAX_BATCH_REQUESTS`, `MAX_BATCH_BYTES`)."""
        if not items:
            raise ValueError("a batch needs at least one item")
        if len(items) > MAX_BATCH_REQUESTS:
            raise ValueError(f"{len(items)} items: a batch holds at most {MAX_BATCH_REQUESTS}")
        seen: set[str] = set()
        for item in items:
            if not CUSTOM_ID.fullmatch(item.custom_id):
                raise ValueError(f"invalid custom_id {item.custom_id!r}: must match ^{CUSTOM_ID.pattern}$")
            if item.custom_id in seen:
                raise ValueError(f"custom_id {item.custom_id!r} appears twice in one batch")
            seen.add(item.custom_id)
            if self.without_call(item.question, item.response) is not None:
                raise ValueError(f"custom_id {item.custom_id!r} needs no request (use without_call)")
        # The Messages body the one-call path sends in json_schema mode (the Anthropic API has it).
        requests = [
            cast(
                Request,
                {
                    "custom_id": i.custom_id,
                    "params": self.judge.request_body(
                        i.question, i.response, "json_schema", context=i.context, system=i.system
                    ),
                },
            )
            for i in items
        ]
        size = sum(len(json.dumps(r).encode()) + 1 for r in requests)  # + 1 for the separating comma
        if size > MAX_BATCH_BYTES:
            raise ValueError(
                f"batch body of about {size} bytes: the API accepts at most {MAX_BATCH_BYTES}; submit fewer items"
            )
        batch = await self._client.call(
            _sdk(lambda: self._batches.create(requests=requests)), what="batch create", stats=self.stats
        )
        log.info(
            "batch_submitted", batch_id=batch.id, judge_id=self.info.judge_id, requests=len(requests), body_bytes=size
        )
        return batch.id

    async def status(self, batch_id: str) -> BatchStatus:
        """The batch's processing status and request counts; raises `JudgeUnavailable` or `JudgeApiError`."""
        batch = await self._client.call(
            _sdk(lambda: self._batches.retrieve(batch_id)), what="batch retrieve", stats=self.stats
        )
        counts = batch.request_counts
        status = BatchStatus(
            batch_id=batch.id,
            ended=batch.processing_status == "ended",
            processing=counts.processing,
            succeeded=counts.succeeded,
            errored=counts.errored,
            canceled=counts.canceled,
            expired=counts.expired,
        )
        log.debug(
            "batch_status", batch_id=batch_id, processing_status=batch.processing_status, processing=counts.processing
        )
        return status

    async def results(self, batch_id: str) -> dict[str, Judgement | JudgeFailure]:
        """The outcome of every request of an ended batch, by custom_id.

        Raises `JudgeUnavailable` (kind `in_progress`) before the batch ended, else as the other calls do."""
        lines = await self._client.call(_sdk(lambda: self._download(batch_id)), what="batch results", stats=self.stats)
        outcomes = {line.custom_id: self._outcome(line) for line in lines}
        tally = Counter("ok" if isinstance(o, Judgement) else o.reason for o in outcomes.values())
        self.stats.update({f"result.{k}": v for k, v in tally.items()})
        log.info("batch_results", batch_id=batch_id, judge_id=self.info.judge_id, results=len(outcomes), **dict(tally))
        return outcomes

    async def cancel(self, batch_id: str) -> None:
        """Ask the API to cancel the batch: requests not yet processed come back `canceled` once it ended."""
        batch = await self._client.call(
            _sdk(lambda: self._batches.cancel(batch_id)), what="batch cancel", stats=self.stats
        )
        log.info("batch_cancel_requested", batch_id=batch_id, processing_status=batch.processing_status)

    async def aclose(self) -> None:
        """Close the wrapped judge's API client."""
        await self.judge.aclose()

    async def _download(self, batch_id: str) -> list[MessageBatchIndividualResponse]:
        # One attempt: the SDK reads the batch for its results_url, then streams the JSONL. Errors while streaming
        # are turned into the SDK's own, so `JudgeClient.call` retries them like any other transient error.
        try:
            decoder = await self._batches.results(batch_id)
        except anthropic.APIError:
            raise
        except anthropic.AnthropicError as e:  # no results_url yet: the batch has not ended
            raise JudgeUnavailable(f"in_progress: batch {batch_id} has not ended", kind="in_progress") from e
        try:
            return [line async for line in decoder]
        except httpx2.TimeoutException as e:
            raise anthropic.APITimeoutError(request=decoder.http_response.request) from e
        except httpx2.TransportError as e:
            raise anthropic.APIConnectionError(
                message=f"results download broke off: {e}", request=decoder.http_response.request
            ) from e
        except ValueError as e:  # a line that is not JSON
            raise anthropic.APIResponseValidationError(
                decoder.http_response, None, message=f"results line is not JSON: {e}"
            ) from e
        finally:
            await decoder.close()

    def _outcome(self, line: MessageBatchIndividualResponse) -> Judgement | JudgeFailure:
        result = line.result
        if result.type == "succeeded":
            message = result.message
            # Into the judge's token counters like a one-call reply. Not into the cold-cache watch: the Batches API
            # caches best-effort and processes requests concurrently, so uncached entries there are no evidence
            # that the prefix is under the minimum.
            reply = reply_of(message)
            self._client.count_tokens(reply.tokens)
            usage = self._client.usage_of(reply.tokens, batch=True)
            try:
                return self.judge.to_judgement(self.judge.parse(_text(reply)), usage)
            except JudgeReplyInvalid as e:
                # Paid for, like an invalid reply on the one-call path; not retried here (the caller may resubmit).
                return JudgeFailure(FailureReason.INVALID_REPLY, str(e), usage=usage)
        unspent = Usage(cost_usd=None if self._client.price is None else 0.0)  # only succeeded requests are billed
        if result.type == "errored":
            error = result.error.error
            transient = error.type in TRANSIENT_ERROR_TYPES
            return JudgeFailure(
                FailureReason.UNAVAILABLE if transient else FailureReason.API_ERROR,
                f"{error.type}: {error.message or error.type}",
                transient=transient,
                rate_limited=error.type == "rate_limit_error",
                usage=unspent,
            )
        if result.type == "expired":
            return JudgeFailure(
                FailureReason.EXPIRED,
                "the batch expired before this request was processed",
                transient=True,
                usage=unspent,
            )
        return JudgeFailure(
            FailureReason.CANCELED,
            "the batch was canceled before this request was processed",
            transient=True,
            usage=unspent,
        )


def _text(reply: ProviderReply) -> str:
    if reply.cut_off:
        raise JudgeReplyInvalid("reply cut off at max_tokens")
    if reply.refused:
        raise JudgeReplyInvalid("the model refused to reply")
    return reply.text


def _sdk(op: Callable[[], Awaitable[T]]) -> Callable[[], Awaitable[T]]:
    """`op` with the SDK's errors turned into `ProviderCallFailed`, which `JudgeClient.call` retries or refuses."""

    async def call() -> T:
        try:
            return await op()
        except anthropic.APIError as e:
            raise classify(e) from e

    return call
