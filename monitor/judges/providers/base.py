"""What every provider takes and gives: a `JudgeRequest` in, a `ProviderReply` out, a
`schemas.errors.ProviderCallFailed` when the call itself failed. The retry policy, the counters and the validation
live above this seam (`judge_client`), so every provider gets the same guarantees; a provider only speaks its API's
wire format."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from monitor.judges.settings import ProviderName, StructuredMode

# Why a call failed, as a metric label. The first seven are transient (retried with backoff); `api_error` is a refusal
# retrying cannot fix (auth, a bad request, a structured-output mode the server does not offer).
FailureKind = Literal[
    "rate_limited",
    "overloaded",
    "server_error",
    "timeout",
    "connection",
    "request_timeout",
    "bad_response",
    "api_error",
]


@dataclass(frozen=True, slots=True)
class Correction:
    """A reply that failed validation and why: sent back once so the model can mend it."""

    reply: str
    error: str


@dataclass(frozen=True, slots=True)
class JudgeRequest:
    """One judge request: the static `system` prompt (the cacheable prefix, always first), the per-request `user`
    text, the reply model the answer must validate as, and, on the one corrective retry, the `correction`."""

    system: str
    user: str
    reply_model: type[BaseModel]
    correction: Correction | None = None

    @property
    def schema_name(self) -> str:
        """The name the reply's schema or tool goes by on the wire (`^[a-zA-Z0-9_-]{1,64}$` for every API)."""
        return self.reply_model.__name__.lower()


@dataclass(frozen=True, slots=True)
class Tokens:
    """Tokens of one reply as the provider counted them: `input` excludes the cached ones."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(
            self.input + other.input,
            self.output + other.output,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
        )


@dataclass(frozen=True, slots=True)
class ProviderReply:
    """What came back: the reply's text (a tool call's arguments in `tools` mode), its tokens, whether it was cut at
    max_tokens or refused, and the probabilities of the rubric's levels 0..4 where log-probabilities were asked."""

    text: str
    tokens: Tokens
    cut_off: bool = False
    refused: bool = False
    level_probabilities: tuple[float, ...] | None = None


class Provider(Protocol):
    """One judge API: builds the wire body for a mode and sends it. Raises `ProviderCallFailed`; never validates."""

    @property
    def name(self) -> ProviderName:
        """Which API family and deployment (part of the judge id)."""
        ...

    @property
    def model(self) -> str:
        """The model (or deployment) the requests name."""
        ...

    @property
    def modes(self) -> tuple[StructuredMode, ...]:
        """The structured-output modes this API has, strongest first."""
        ...

    @property
    def known_mode(self) -> StructuredMode | None:
        """The mode this API enforces for every model, which `auto` takes without a probe; None: probe."""
        ...

    @property
    def marks_cache(self) -> bool:
        """Whether requests mark a prefix for caching (Anthropic): the cache-minimum checks apply only then."""
        ...

    def body(self, request: JudgeRequest, mode: StructuredMode) -> dict[str, Any]:
        """The request body judging `request` in `mode`, as `send` posts it (and a batch line carries it)."""
        ...

    async def send(self, request: JudgeRequest, mode: StructuredMode) -> ProviderReply:
        """Post one request; raises `ProviderCallFailed`."""
        ...

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        ...
