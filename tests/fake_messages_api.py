"""A fake Anthropic Messages API on 127.0.0.1, for driving the REAL `anthropic` client in tests.

`POST /v1/messages` answers in the Messages wire format. Replies come from a pluggable *brain* (by default a
deterministic rule that reads the delimited sections of the judge prompt the way a model would see them);
faults are scripted per request (`script`, `fail_next`), over time (`fail_for`) or by load (`rate_limit`).
Every request is recorded (headers and JSON body) so tests can assert what was sent.

Order of decisions for each request: an active outage (`fail_for`), then the rate limit, then the next
scripted step, then `default` (a brain reply unless changed). These controls govern `POST /v1/messages` only.

    with FakeMessagesAPI() as api:
        api.script(overloaded(), overloaded(), Reply())      # 529, 529, then a brain reply
        settings = load_settings(judge="rubric", **api.settings_overrides())

Point a subprocess (a whole monitor) at it with `api.env()` (MONITOR_ANTHROPIC_BASE_URL and _API_KEY).

Bedrock and Vertex: the same Messages endpoint is served on the paths the `anthropic` SDK's cloud clients post to,
so `AsyncAnthropicBedrock(aws_access_key=..., aws_secret_key=..., aws_region=..., base_url=api.base_url)` and
`AsyncAnthropicVertex(region=..., project_id=..., access_token=..., base_url=api.base_url)` work against it:
`POST /model/{model_id}/invoke` (Bedrock; the SDK signs it with SigV4 through boto3, or sends `Authorization:
Bearer` with a Bedrock API key) and `POST /projects/{p}/locations/{r}/publishers/anthropic/models/{m}:rawPredict`
(Vertex; `Authorization: Bearer` with the access token). Both bodies carry no `model` (it is in the path) and an
`anthropic_version`; as the platforms do, the fake answers 400 when `anthropic_version` is missing or (Bedrock) when
the body names a `model`. Otherwise they are answered exactly as `POST /v1/messages` (same brain, controls, cache,
error bodies and recording); each request records `platform` ("anthropic" | "bedrock" | "vertex") and the model
from the path, and `RecordedRequest.model` is that or the body's `model`. The streaming paths are not served (404).

Prompt caching: the system prefix up to the last `cache_control` marker is written on first sight and read
afterwards, whatever its length. `FakeMessagesAPI(cache_min_tokens=N)` (or `api.cache_minimum(N)`) emulates the
API's minimum: a shorter prefix is never cached and is billed as plain input. Tokens are characters / 4 unless
`chars_per_token` says otherwise (the judges estimate costs with 3.5 and check the cache minimum with a conservative
4.5: pass one of them to agree with that side). `api.cache_reads(False)` makes the cache never serve: a prefix that
reaches the minimum is written again on every request and read on none (every entry expired or was evicted before
the next call), so `cache_read_input_tokens` is 0 on every reply; `cache_reads(True)` or `reset` ends it.

Message Batches (`client.messages.batches.create / retrieve / results / cancel`): `POST /v1/messages/batches`
validates like the API (non-empty `requests`, each `custom_id` matching ^[a-zA-Z0-9_-]{1,64}$ and unique in the
batch; else 400 invalid_request_error) and answers an `in_progress` batch. It ends after `batch_processing(s)`
seconds (0.2 by default; None: only on `end_batch`, `expire_batch` or cancel), noticed when the batch is next
read. Its results (JSONL, sorted by custom_id, so not in request order, as the API warns) are what
`POST /v1/messages` would answer each request's params, with the same brain, usage and prompt cache, unless an
outcome was scripted: `script_batch(...)` for the next requests in submission order or `batch_outcome(id, step)`
for one custom_id (one-shot). A `Reply` is a succeeded message (its text, stop_reason and usage as given), a
`Fault` an errored entry with its error type, `expired()` / `canceled()` an unprocessed one. `expire_batch()`
ends a batch with every unscripted request expired; after `cancel` the next read finds it ended with every
unscripted request canceled. `fail_batch_call("create" | "retrieve" | "results" | "cancel", *faults)` fails the
HTTP calls themselves (the SDK's `results` reads the batch first: that read is a "retrieve"). Each batched
request is recorded in `batch_requests` (its `body` is the request's params); `message_requests` keeps meaning
`POST /v1/messages` only.

    api.batch_processing(None)
    api.script_batch(Reply(), bad_request("prompt too long"), malformed())  # succeeded, errored, bad body
    api.fail_batch_call("create", overloaded())                             # the first create gets a 529"""

from __future__ import annotations

import json
import math
import re
import socket
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

API_KEY = "sk-ant-fake-test-key"
SECTIONS = ("user_question", "assistant_response")  # the judge prompt's delimited sections

# ---- what the fake can be told to do -------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """A 200 `message`. `text` None: the brain's answer; a dict/list is sent as its JSON."""

    text: str | dict[str, Any] | list[Any] | None = None
    delay_s: float = 0.0
    stop_reason: str = "end_turn"
    usage: dict[str, int] | None = None  # overrides the computed usage fields


@dataclass(frozen=True)
class Fault:
    """An error response: `status` with the API's error JSON (or a raw `body`), optionally `retry-after`."""

    status: int
    error_type: str
    message: str = ""
    retry_after: float | None = None
    delay_s: float = 0.0
    body: bytes | None = None


@dataclass(frozen=True)
class Drop:
    """Close the connection without answering (the client sees a connection error)."""

    delay_s: float = 0.0


Step = Reply | Fault | Drop


@dataclass(frozen=True)
class Unprocessed:
    """A batched request the batch never processed: its result is `{"type": kind}`."""

    kind: Literal["expired", "canceled"]


Platform = Literal["anthropic", "bedrock", "vertex"]
BatchStep = Reply | Fault | Unprocessed  # the outcome of one request inside a batch
BatchEndpoint = Literal["create", "retrieve", "results", "cancel"]
BATCH_ENDPOINTS: tuple[BatchEndpoint, ...] = ("create", "retrieve", "results", "cancel")
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_BATCH_REQUESTS = 100_000
DEFAULT_BATCH_PROCESSING_S = 0.2


def overloaded(delay_s: float = 0.0) -> Fault:
    """HTTP 529 overloaded_error."""
    return Fault(529, "overloaded_error", "Overloaded", delay_s=delay_s)


def rate_limited(retry_after: float | None = 1.0) -> Fault:
    """HTTP 429 rate_limit_error with `retry-after` seconds."""
    return Fault(429, "rate_limit_error", "Number of requests has exceeded your rate limit", retry_after=retry_after)


def server_error() -> Fault:
    """HTTP 500 api_error."""
    return Fault(500, "api_error", "Internal server error")


def bad_request(message: str = "invalid request") -> Fault:
    """HTTP 400 invalid_request_error (not retryable)."""
    return Fault(400, "invalid_request_error", message)


def malformed() -> Reply:
    """A 200 whose text is not JSON (an invalid reply for every judge)."""
    return Reply("{not json")


def out_of_range_score() -> Reply:
    """A rubric reply with score 5 (valid JSON, invalid value)."""
    return Reply({"reasoning": "Scored above the scale.", "score": 5})


def mismatched_verdicts() -> Reply:
    """A statements reply with two statements and one verdict."""
    return Reply({"statements": ["One.", "Two."], "verdicts": [{"verdict": "yes", "reason": ""}]})


def expired() -> Unprocessed:
    """A batched request that expired before it was processed."""
    return Unprocessed("expired")


def canceled() -> Unprocessed:
    """A batched request canceled before it was processed."""
    return Unprocessed("canceled")


def slow(delay_s: float, reply: Reply | None = None) -> Reply:
    """A reply sent only after `delay_s` (longer than the client timeout: the client gives up first)."""
    base = reply or Reply()
    return Reply(text=base.text, delay_s=delay_s, stop_reason=base.stop_reason, usage=base.usage)


# ---- what was received ---------------------------------------------------------------------------------


@dataclass
class RecordedRequest:
    """One request as received, plus the status the fake answered with."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any
    at: float  # time.monotonic() on arrival
    status: int = 0
    platform: Platform = "anthropic"  # which Messages route it came by (see `messages_route`)
    path_model: str | None = None  # the model named in a Bedrock or Vertex path

    @property
    def model(self) -> str | None:
        """The model asked for: from the path (Bedrock, Vertex) or the body's `model`."""
        if self.path_model is not None:
            return self.path_model
        model = (self.body or {}).get("model") if isinstance(self.body, dict) else None
        return model if isinstance(model, str) else None

    @property
    def system_blocks(self) -> list[dict[str, Any]]:
        """The `system` parameter as a list of blocks (a plain string becomes one block)."""
        system = (self.body or {}).get("system")
        if system is None:
            return []
        if isinstance(system, str):
            return [{"type": "text", "text": system}]
        return list(system)

    @property
    def system_text(self) -> str:
        """All system text, concatenated."""
        return "".join(b.get("text", "") for b in self.system_blocks)

    @property
    def user_text(self) -> str:
        """The text of every user message, joined: the judged sections are in the first, a corrective retry's note
        (after the model's own invalid reply) in the last, and a model reads them all."""
        texts = []
        for msg in (self.body or {}).get("messages", []):
            if msg.get("role") == "user":
                content = msg.get("content")
                if isinstance(content, str):
                    texts.append(content)
                else:
                    texts.append("".join(b.get("text", "") for b in content if b.get("type") == "text"))
        return "\n\n".join(texts)

    @property
    def schema(self) -> dict[str, Any] | None:
        """The JSON schema asked for in `output_config.format`, if any."""
        fmt = ((self.body or {}).get("output_config") or {}).get("format") or {}
        return fmt.get("schema") if fmt.get("type") == "json_schema" else None

    def section(self, name: str) -> str | None:
        """The text of the delimited section `name` (e.g. "assistant_response"), as a model would read it."""
        return find_section(self.user_text, name)


@dataclass
class BatchedRequest(RecordedRequest):
    """One request of a created Message Batch: `body` is its `params`, headers and time those of the create call."""

    batch_id: str = ""
    custom_id: str = ""


def find_section(text: str, name: str) -> str | None:
    """Content between `<name_CODE>` and `</name_CODE>`, where CODE is that of the message's LAST closing tag.

    The prompt's own last closing tag comes after all judged text, so fake tags inside the text cannot win."""
    closes = list(re.finditer(rf"</(?:{'|'.join(SECTIONS)})_([0-9A-Za-z]+)>", text))
    if not closes:
        return None
    code = closes[-1].group(1)
    match = re.search(rf"<{name}_{code}>\n?(.*?)\n?</{name}_{code}>", text, re.DOTALL)
    return match.group(1) if match else None


# ---- the default brain ---------------------------------------------------------------------------------

_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"\w+")
_STOPWORDS = frozenset(
    """a about also am an and any are as at be been but by can could did do does for from get getting got had has
    have hello hi how i if in into is it its just me my no not of on or our please so some than thank thanks that
    the their them then there these they this to us was we were what when where which who why will with would you
    your""".split()
)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_SPLIT.split(text) if s and s.strip()]


def _content_words(text: str) -> set[str]:
    return {w for w in (m.group(0).lower() for m in _WORD.finditer(text)) if w not in _STOPWORDS}


def _related(a: str, b: str) -> bool:
    short, long_ = sorted((a, b), key=len)
    return a == b or (len(short) >= 4 and long_.startswith(short))


def _verdicts(question: str, response: str) -> tuple[list[str], list[bool]]:
    q_words = _content_words(question)
    q_norm = " ".join(sorted(q_words))
    sentences = _sentences(response)
    marks = []
    for s in sentences:
        words = _content_words(s)
        echo = " ".join(sorted(words)) == q_norm
        marks.append(not echo and any(_related(w, q) for w in words for q in q_words))
    return sentences, marks


def default_brain(request: RecordedRequest) -> str | dict[str, Any]:
    """A deterministic stand-in for the model: sentences sharing a content word with the question address it.

    Answers in the format the request's schema asks for (rubric: reasoning + score 0..4; statements: statements
    + verdicts). Without both delimited sections it answers something no judge accepts."""
    question = request.section("user_question")
    response = request.section("assistant_response")
    props = (request.schema or {}).get("properties", {})
    if question is None or response is None:
        return {"error": "could not find the delimited question and response"}
    sentences, marks = _verdicts(question, response)
    if "statements" in props:
        return {
            "statements": sentences,
            "verdicts": [
                {"verdict": "yes", "reason": ""} if ok else {"verdict": "no", "reason": "does not address the question"}
                for ok in marks
            ],
        }
    if "score" in props:
        share = sum(marks) / len(marks) if marks else 0.0
        return {"reasoning": f"{sum(marks)} of {len(marks)} sentences address the question.", "score": round(4 * share)}
    return "I can only answer judge requests."


# ---- the server ----------------------------------------------------------------------------------------


@dataclass
class _Batch:
    id: str
    entries: list[tuple[BatchedRequest, BatchStep | None]]  # None: what POST /v1/messages would answer
    created_at: datetime
    ends_at: float | None  # time.monotonic() when processing ends on its own; None: never
    status: Literal["in_progress", "canceling", "ended"] = "in_progress"
    cancel_initiated_at: datetime | None = None
    ended_at: datetime | None = None
    results: list[dict[str, Any]] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(("processing", "succeeded", "errored", "canceled", "expired"), 0)
        if self.status != "ended":
            counts["processing"] = len(self.entries)  # the API tallies outcomes only once the whole batch ended
        for line in self.results:
            counts[line["result"]["type"]] += 1
        return counts

    def wire(self, base_url: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "message_batch",
            "processing_status": self.status,
            "request_counts": self.counts(),
            "created_at": _rfc3339(self.created_at),
            "expires_at": _rfc3339(self.created_at + timedelta(hours=24)),
            "ended_at": _rfc3339(self.ended_at),
            "cancel_initiated_at": _rfc3339(self.cancel_initiated_at),
            "archived_at": None,
            "results_url": f"{base_url}/v1/messages/batches/{self.id}/results" if self.status == "ended" else None,
        }


def _rfc3339(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat().replace("+00:00", "Z")


class _BatchError(Exception):
    """A batch call answered with an API error (400 invalid request, 404 unknown batch)."""

    def __init__(self, status: int, error_type: str, message: str) -> None:
        super().__init__(message)
        self.fault = Fault(status, error_type, message)


_BATCH_ROUTES: tuple[tuple[str, re.Pattern[str], BatchEndpoint], ...] = (
    ("POST", re.compile(r"/v1/messages/batches()"), "create"),
    ("GET", re.compile(r"/v1/messages/batches/([^/]+)"), "retrieve"),
    ("GET", re.compile(r"/v1/messages/batches/([^/]+)/results"), "results"),
    ("POST", re.compile(r"/v1/messages/batches/([^/]+)/cancel"), "cancel"),
)


def batch_route(method: str, path: str) -> tuple[BatchEndpoint, str] | None:
    """The batch endpoint and batch id (empty for create) a request goes to, or None if not a batch call."""
    path = path.split("?")[0]
    for route_method, pattern, endpoint in _BATCH_ROUTES:
        match = pattern.fullmatch(path)
        if match and method == route_method:
            return endpoint, match.group(1)
    return None


_MESSAGES_ROUTES: tuple[tuple[re.Pattern[str], Platform], ...] = (
    (re.compile(r"/v1/messages()"), "anthropic"),
    (re.compile(r"/model/([^/]+)/invoke"), "bedrock"),
    (re.compile(r"/projects/[^/]+/locations/[^/]+/publishers/anthropic/models/([^/:]+):rawPredict"), "vertex"),
)


def messages_route(method: str, path: str) -> tuple[Platform, str | None] | None:
    """The platform and path model (None for `/v1/messages`) of a Messages request, or None if not one."""
    if method != "POST":
        return None
    path = path.split("?")[0]
    for pattern, platform in _MESSAGES_ROUTES:
        match = pattern.fullmatch(path)
        if match:
            return platform, (urllib.parse.unquote(match.group(1)) or None)
    return None


def _platform_error(req: RecordedRequest) -> Fault | None:
    """The 400 a cloud platform answers to a body shaped for the other routes (None: acceptable)."""
    if req.platform == "anthropic" or not isinstance(req.body, dict):
        return None
    if not req.body.get("anthropic_version"):
        return bad_request("anthropic_version: Field required")
    if req.platform == "bedrock" and "model" in req.body:
        return bad_request("extraneous key [model] is not permitted")
    return None


class _Server(ThreadingHTTPServer):
    # The stdlib's listen backlog of 5 refuses connections when a pipeline opens many at once.
    request_queue_size = 256


class FakeMessagesAPI:
    """The fake server; use as a context manager or call `start()`/`stop()`."""

    def __init__(
        self,
        brain: Callable[[RecordedRequest], str | dict[str, Any]] = default_brain,
        *,
        cache_min_tokens: int | None = None,
        chars_per_token: float = 4.0,
    ) -> None:
        """Set up a stopped server whose default replies come from `brain`; `cache_min_tokens` None caches a prefix
        of any length (the default), else only one of at least that many tokens."""
        self.brain = brain
        self._cache_config = (cache_min_tokens, chars_per_token)
        self._cache_min_tokens = cache_min_tokens
        self._chars_per_token = chars_per_token
        self.default: Step = Reply()
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._requests: list[RecordedRequest] = []
        self._queue: deque[Step] = deque()
        self._outage: tuple[float, Fault] | None = None
        self._outage_from_first: tuple[float, Fault] | None = None  # an outage that starts at the next request
        self._rate: tuple[float, float | None] | None = None
        self._accepted: deque[float] = deque()
        self._cached_prefixes: set[str] = set()
        self._cache_reads = True  # False: the cache is written on every request and never read
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._ids = 0
        # Batch state has its own lock, taken before `_lock` (never after): ending a batch computes messages.
        self._batch_lock = threading.Lock()
        self._batches: dict[str, _Batch] = {}
        self._batch_requests: list[BatchedRequest] = []
        self._batch_queue: deque[BatchStep] = deque()
        self._batch_by_id: dict[str, BatchStep] = {}
        self._batch_call_faults: dict[BatchEndpoint, deque[Fault | Drop]] = {e: deque() for e in BATCH_ENDPOINTS}
        self._batch_processing_s: float | None = DEFAULT_BATCH_PROCESSING_S
        self._batch_ids = 0

    # -- lifecycle

    def start(self) -> FakeMessagesAPI:
        """Listen on a free port and serve in a background thread."""
        server = _Server(("127.0.0.1", 0), _make_handler(self))
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.01}, name="fake-messages-api", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake delayed replies and drop open connections."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            with self._lock:
                conns = list(self._connections)
            for conn in conns:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeMessagesAPI:
        """Start serving for the `with` block."""
        return self.start()

    def __exit__(self, *exc: object) -> None:
        """Stop serving at the end of the `with` block."""
        self.stop()

    @property
    def port(self) -> int:
        """The port listened on."""
        assert self._server is not None, "not started"
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """What to give the client as `base_url` (MONITOR_ANTHROPIC_BASE_URL)."""
        return f"http://127.0.0.1:{self.port}"

    def settings_overrides(self) -> dict[str, Any]:
        """Settings keywords that point a judge at this server."""
        return {"anthropic_base_url": self.base_url, "anthropic_api_key": API_KEY}

    def env(self) -> dict[str, str]:
        """Environment variables that point a subprocess monitor at this server."""
        return {"MONITOR_ANTHROPIC_BASE_URL": self.base_url, "MONITOR_ANTHROPIC_API_KEY": API_KEY}

    # -- controls

    def script(self, *steps: Step) -> None:
        """Queue steps, one per request, before falling back to `default`."""
        with self._lock:
            self._queue.extend(steps)

    def fail_next(self, n: int, fault: Fault | None = None) -> None:
        """The next `n` requests get `fault` (529 overloaded by default)."""
        self.script(*([fault or overloaded()] * n))

    def fail_for(self, seconds: float, fault: Fault | None = None) -> None:
        """Every request for the next `seconds` gets `fault` (529 overloaded by default)."""
        with self._lock:
            self._outage = (time.monotonic() + seconds, fault or overloaded())

    def fail_from_next_request_for(self, seconds: float, fault: Fault | None = None) -> None:
        """Like `fail_for`, but the `seconds` start at the next request, so a slow client still meets the outage."""
        with self._lock:
            self._outage_from_first = (seconds, fault or overloaded())

    def rate_limit(self, per_second: float | None, retry_after: float | None = None) -> None:
        """Accept at most `per_second` requests in any 1 s window, else 429 + retry-after; None lifts it.

        `retry_after` None: the time until the window has room, rounded up to whole seconds as the API does."""
        with self._lock:
            self._rate = None if per_second is None else (per_second, retry_after)
            self._accepted.clear()

    def cache_minimum(self, tokens: int | None, chars_per_token: float | None = None) -> None:
        """Cache only prefixes of at least `tokens` tokens (None: any length), counting `chars_per_token` characters
        per token if given; empties the cache."""
        with self._lock:
            self._cache_min_tokens = tokens
            if chars_per_token is not None:
                self._chars_per_token = chars_per_token
            self._cached_prefixes.clear()

    def cache_reads(self, enabled: bool) -> None:
        """False: the prompt cache never serves (each cacheable prefix is written on every request, read on none, as
        when every entry expires before the next call); True: back to normal. Empties the cache either way."""
        with self._lock:
            self._cache_reads = enabled
            self._cached_prefixes.clear()

    def always(self, step: Step) -> None:
        """Answer every unscripted request with `step` (e.g. a persistently malformed reply)."""
        self.default = step

    def reset(self) -> None:
        """Back to brain replies: no script, outage, rate limit, batches or recorded requests; an empty cache with the
        cache settings the server was built with, read again; the default batch processing time."""
        with self._batch_lock:
            self._batches.clear()
            self._batch_requests.clear()
            self._batch_queue.clear()
            self._batch_by_id.clear()
            for faults in self._batch_call_faults.values():
                faults.clear()
            self._batch_processing_s = DEFAULT_BATCH_PROCESSING_S
        with self._lock:
            self._cache_min_tokens, self._chars_per_token = self._cache_config
            self._queue.clear()
            self._outage = self._outage_from_first = None
            self._rate = None
            self._accepted.clear()
            self._requests.clear()
            self._cached_prefixes.clear()
            self._cache_reads = True
        self.default = Reply()

    # -- batch controls

    def batch_processing(self, seconds: float | None) -> None:
        """Batches created from now on end `seconds` after creation (None: only on `end_batch`, `expire_batch` or a
        cancel). The end is noticed when the batch is next read."""
        with self._batch_lock:
            self._batch_processing_s = seconds

    def script_batch(self, *steps: BatchStep) -> None:
        """Queue outcomes for the next batched requests, in submission order across batches (see the module doc)."""
        for step in steps:
            if not isinstance(step, Reply | Fault | Unprocessed):
                raise TypeError(f"a batched request cannot {type(step).__name__}: use a Reply, Fault or Unprocessed")
        with self._batch_lock:
            self._batch_queue.extend(steps)

    def batch_outcome(self, custom_id: str, step: BatchStep) -> None:
        """The outcome of the next batched request with `custom_id` (used once; wins over `script_batch`)."""
        with self._batch_lock:
            self._batch_by_id[custom_id] = step

    def fail_batch_call(self, endpoint: BatchEndpoint, *steps: Fault | Drop) -> None:
        """The next calls to `endpoint` (create, retrieve, results or cancel) get `steps`, one per call."""
        if endpoint not in BATCH_ENDPOINTS:
            raise ValueError(f"no batch endpoint {endpoint!r}: one of {BATCH_ENDPOINTS}")
        with self._batch_lock:
            self._batch_call_faults[endpoint].extend(steps)

    def end_batch(self, batch_id: str | None = None) -> None:
        """End `batch_id` (or every batch not yet ended) now, processing every request."""
        self._end_now(batch_id, "processed")

    def expire_batch(self, batch_id: str | None = None) -> None:
        """End `batch_id` (or every batch not yet ended) now, as the API does at 24 h: unscripted requests expire."""
        self._end_now(batch_id, "expired")

    def batch(self, batch_id: str) -> dict[str, Any]:
        """The `message_batch` object as a read would answer it now (its end is noticed); KeyError if unknown."""
        with self._batch_lock:
            batch = self._batches[batch_id]
            self._advance(batch)
            return batch.wire(self.base_url)

    # -- observations

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def message_requests(self) -> list[RecordedRequest]:
        """Requests to POST /v1/messages and its Bedrock and Vertex routes (see `RecordedRequest.platform`)."""
        return [r for r in self.requests if messages_route(r.method, r.path) is not None]

    @property
    def batch_requests(self) -> list[BatchedRequest]:
        """The requests of every created batch, in submission order (`body` is each request's params)."""
        with self._batch_lock:
            return list(self._batch_requests)

    def batch_calls(self, endpoint: BatchEndpoint | None = None) -> list[RecordedRequest]:
        """HTTP calls to the batch endpoint `endpoint` (None: any batch endpoint), in arrival order."""
        calls = []
        for r in self.requests:
            route = batch_route(r.method, r.path)
            if route is not None and endpoint in (None, route[0]):
                calls.append(r)
        return calls

    def statuses(self) -> list[int]:
        """The status answered to each request, in order (0 for a dropped connection)."""
        return [r.status for r in self.requests]

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> list[RecordedRequest]:
        """Block until at least `n` requests arrived; raises TimeoutError."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while len(self._requests) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(self._requests)} of {n} requests arrived within {timeout}s")
                self._arrived.wait(left)
            return list(self._requests)

    # -- request handling (server threads)

    def _record(self, req: RecordedRequest) -> Step:
        with self._arrived:
            self._requests.append(req)
            self._arrived.notify_all()
            now = req.at
            if self._outage_from_first is not None:
                seconds, fault = self._outage_from_first
                self._outage, self._outage_from_first = (now + seconds, fault), None
            if self._outage is not None:
                until, fault = self._outage
                if now < until:
                    return fault
                self._outage = None
            if self._rate is not None:
                per_second, retry_after = self._rate
                while self._accepted and self._accepted[0] <= now - 1.0:
                    self._accepted.popleft()
                if len(self._accepted) >= per_second:
                    wait = retry_after if retry_after is not None else math.ceil(1.0 - (now - self._accepted[0]))
                    return rate_limited(retry_after=max(wait, 0))
                self._accepted.append(now)
            if self._queue:
                return self._queue.popleft()
            return self.default

    def _reply_body(self, req: RecordedRequest, step: Reply) -> bytes:
        return json.dumps(self._message(req, step)).encode()

    def _message(self, req: RecordedRequest, step: Reply) -> dict[str, Any]:
        text: Any = step.text if step.text is not None else self.brain(req)
        if not isinstance(text, str):
            text = json.dumps(text)
        with self._lock:
            self._ids += 1
            msg_id = f"msg_fake_{self._ids:06d}"
            usage = self._usage(req, text)
        usage.update(step.usage or {})
        return {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": req.model or "fake-model",
            "content": [{"type": "text", "text": text}],
            "stop_reason": step.stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }

    def _append(self, req: RecordedRequest) -> None:
        with self._arrived:
            self._requests.append(req)
            self._arrived.notify_all()

    def _batch_call_fault(self, endpoint: BatchEndpoint) -> Fault | Drop | None:
        with self._batch_lock:
            faults = self._batch_call_faults[endpoint]
            return faults.popleft() if faults else None

    def _batch_call(self, endpoint: BatchEndpoint, batch_id: str, req: RecordedRequest) -> tuple[bytes, str]:
        """The answer (body, content type) to a batch call; raises `_BatchError`."""
        with self._batch_lock:
            if endpoint == "create":
                return json.dumps(self._create_batch(req).wire(self.base_url)).encode(), "application/json"
            batch = self._batches.get(batch_id)
            if batch is None:
                raise _BatchError(404, "not_found_error", f"message batch {batch_id!r} not found")
            self._advance(batch)
            if endpoint == "cancel" and batch.status == "in_progress":
                batch.status = "canceling"  # ends (with unscripted requests canceled) on the next read
                batch.cancel_initiated_at = datetime.now(UTC)
            if endpoint != "results":
                return json.dumps(batch.wire(self.base_url)).encode(), "application/json"
            if batch.status != "ended":
                raise _BatchError(
                    400, "invalid_request_error", f"message batch {batch_id} has not ended: {batch.status}"
                )
            lines = sorted(batch.results, key=lambda line: str(line["custom_id"]))
            return b"".join(json.dumps(line).encode() + b"\n" for line in lines), "application/binary"

    def _create_batch(self, req: RecordedRequest) -> _Batch:
        requests = _validated_batch(req.body)
        self._batch_ids += 1
        batch_id = f"msgbatch_fake{self._batch_ids:06d}"
        entries: list[tuple[BatchedRequest, BatchStep | None]] = []
        for item in requests:
            custom_id, params = item["custom_id"], item["params"]
            one = BatchedRequest(
                method="POST",
                path="/v1/messages",
                headers=req.headers,
                raw=json.dumps(params).encode(),
                body=params,
                at=req.at,
                status=200,
                batch_id=batch_id,
                custom_id=custom_id,
            )
            step = self._batch_by_id.pop(custom_id, None)
            if step is None and self._batch_queue:
                step = self._batch_queue.popleft()
            entries.append((one, step))
            self._batch_requests.append(one)
        wait = self._batch_processing_s
        batch = _Batch(batch_id, entries, datetime.now(UTC), None if wait is None else time.monotonic() + wait)
        self._batches[batch_id] = batch
        return batch

    def _advance(self, batch: _Batch) -> None:
        # Called with `_batch_lock` held, whenever a batch is read: that is when a due end is noticed.
        if batch.status == "canceling":
            self._finish(batch, "canceled")
        elif batch.status == "in_progress" and batch.ends_at is not None and time.monotonic() >= batch.ends_at:
            self._finish(batch, "processed")

    def _end_now(self, batch_id: str | None, how: Literal["processed", "expired"]) -> None:
        with self._batch_lock:
            batches = [self._batches[batch_id]] if batch_id is not None else list(self._batches.values())
            for batch in batches:
                if batch.status != "ended":
                    self._finish(batch, how)

    def _finish(self, batch: _Batch, how: Literal["processed", "expired", "canceled"]) -> None:
        # Requests are processed in submission order, so the first one writes the prompt cache and later ones read it.
        results = []
        for one, scripted in batch.entries:
            step = scripted or (Reply() if how == "processed" else Unprocessed(how))
            result: dict[str, Any]
            if isinstance(step, Reply):
                result = {"type": "succeeded", "message": self._message(one, step)}
            elif isinstance(step, Fault):
                error = {"type": step.error_type, "message": step.message or step.error_type}
                result = {"type": "errored", "error": {"type": "error", "error": error}}
            else:
                result = {"type": step.kind}
            results.append({"custom_id": one.custom_id, "result": result})
        batch.results = results
        batch.status = "ended"
        batch.ended_at = datetime.now(UTC)

    def _usage(self, req: RecordedRequest, reply_text: str) -> dict[str, int]:
        # Simulates prompt caching: the system prefix up to the last cache_control marker is written on first
        # sight and read afterwards (written every time while `cache_reads(False)`), if it reaches the minimum
        # (when one is set); `chars_per_token` characters per token.
        tokens = self._tokens
        blocks = req.system_blocks
        marked = [i for i, b in enumerate(blocks) if b.get("cache_control")]
        prefix = "".join(b.get("text", "") for b in blocks[: marked[-1] + 1]) if marked else ""
        rest = "".join(b.get("text", "") for b in blocks[marked[-1] + 1 :]) if marked else req.system_text
        cache_write = cache_read = 0
        if prefix and self._cache_min_tokens is not None and tokens(prefix) < self._cache_min_tokens:
            rest = prefix + rest  # below the minimum the API caches nothing and bills the prefix as input
        elif prefix:
            if self._cache_reads and prefix in self._cached_prefixes:
                cache_read = tokens(prefix)
            else:
                self._cached_prefixes.add(prefix)
                cache_write = tokens(prefix)
        return {
            "input_tokens": tokens(rest) + tokens(req.user_text),
            "output_tokens": max(1, tokens(reply_text)),
            "cache_creation_input_tokens": cache_write,
            "cache_read_input_tokens": cache_read,
        }

    def _tokens(self, text: str) -> int:
        return math.ceil(len(text) / self._chars_per_token)

    def _sleep(self, seconds: float) -> bool:
        """Wait `seconds` unless the server stops first; True if still running."""
        return not self._stopping.wait(seconds) if seconds > 0 else not self._stopping.is_set()


def _error_body(fault: Fault) -> bytes:
    if fault.body is not None:
        return fault.body
    return json.dumps(
        {"type": "error", "error": {"type": fault.error_type, "message": fault.message or fault.error_type}}
    ).encode()


def _validated_batch(body: Any) -> list[dict[str, Any]]:
    """The `requests` of a create call, checked as the API checks them; raises `_BatchError` (400)."""

    def invalid(message: str) -> _BatchError:
        return _BatchError(400, "invalid_request_error", message)

    requests = body.get("requests") if isinstance(body, dict) else None
    if not isinstance(requests, list):
        raise invalid("requests: Field required")
    if not requests:
        raise invalid("requests: List should have at least 1 item after validation, not 0")
    if len(requests) > MAX_BATCH_REQUESTS:
        raise invalid(f"requests: a batch holds at most {MAX_BATCH_REQUESTS} requests, got {len(requests)}")
    seen: set[str] = set()
    for i, item in enumerate(requests):
        if not isinstance(item, dict) or not isinstance(item.get("params"), dict):
            raise invalid(f"requests.{i}.params: Field required")
        custom_id = item.get("custom_id")
        if not isinstance(custom_id, str) or not CUSTOM_ID.fullmatch(custom_id):
            raise invalid(f"requests.{i}.custom_id: String should match pattern '{CUSTOM_ID.pattern}'")
        if custom_id in seen:
            raise invalid(
                f"requests.{i}.custom_id: duplicate custom_id {custom_id!r}; custom_id must be unique within a batch"
            )
        seen.add(custom_id)
        params = item["params"]
        for key, kind in (("model", str), ("max_tokens", int), ("messages", list)):
            if not isinstance(params.get(key), kind):
                raise invalid(f"requests.{i}.params.{key}: Field required")
        if params.get("stream"):
            raise invalid(f"requests.{i}.params.stream: streaming is not supported in a batch")
    return requests


def _make_handler(api: FakeMessagesAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            with api._lock:
                api._connections.add(self.connection)

        def finish(self) -> None:
            with api._lock:
                api._connections.discard(self.connection)
            try:
                super().finish()
            except OSError:
                pass

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the recorded requests are the log

        def do_GET(self) -> None:
            self._handle()

        def do_POST(self) -> None:
            self._handle()

        def _handle(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            req = RecordedRequest(
                method=self.command,
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                raw=raw,
                body=body,
                at=time.monotonic(),
            )
            route = batch_route(self.command, self.path)
            if route is not None:
                api._append(req)
                self._batch(req, *route)
                return
            messages = messages_route(self.command, self.path)
            if messages is None:
                api._append(req)
                self._send(req, 404, _error_body(Fault(404, "not_found_error", f"no route {self.path}")))
                return
            req.platform, req.path_model = messages
            refusal = _platform_error(req)
            if refusal is not None:
                api._append(req)
                self._send(req, refusal.status, _error_body(refusal))
                return
            step = api._record(req)
            if not api._sleep(step.delay_s):
                self.close_connection = True
                return
            try:
                if self._fail(req, step):
                    return
                assert isinstance(step, Reply)  # every other step is answered by `_fail`
                self._send(req, 200, api._reply_body(req, step))
            except OSError:
                # The client gave up (timeout) and closed the connection while we were "thinking".
                self.close_connection = True

        def _batch(self, req: RecordedRequest, endpoint: BatchEndpoint, batch_id: str) -> None:
            step = api._batch_call_fault(endpoint)
            if step is not None and not api._sleep(step.delay_s):
                self.close_connection = True
                return
            try:
                if step is not None and self._fail(req, step):
                    return
                try:
                    body, content_type = api._batch_call(endpoint, batch_id, req)
                except _BatchError as e:
                    self._send(req, e.fault.status, _error_body(e.fault))
                    return
                self._send(req, 200, body, content_type=content_type)
            except OSError:
                self.close_connection = True

        def _fail(self, req: RecordedRequest, step: Step) -> bool:
            """Answer a `Drop` (close the connection) or a `Fault` (its error); False for any other step."""
            if isinstance(step, Drop):
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return True
            if isinstance(step, Fault):
                headers = {"retry-after": f"{step.retry_after:g}"} if step.retry_after is not None else {}
                self._send(req, step.status, _error_body(step), headers)
                return True
            return False

        def _send(
            self,
            req: RecordedRequest,
            status: int,
            body: bytes,
            headers: dict[str, str] | None = None,
            content_type: str = "application/json",
        ) -> None:
            req.status = status
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.send_header("request-id", f"req_fake_{id(req):x}")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()

    return Handler


__all__ = [
    "API_KEY",
    "BATCH_ENDPOINTS",
    "BatchEndpoint",
    "BatchStep",
    "BatchedRequest",
    "Drop",
    "FakeMessagesAPI",
    "Fault",
    "Platform",
    "RecordedRequest",
    "Reply",
    "Step",
    "Unprocessed",
    "bad_request",
    "batch_route",
    "canceled",
    "default_brain",
    "expired",
    "find_section",
    "malformed",
    "messages_route",
    "mismatched_verdicts",
    "out_of_range_score",
    "overloaded",
    "rate_limited",
    "server_error",
    "slow",
]
