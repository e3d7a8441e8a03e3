"""A fake Anthropic Messages API on 127.0.0.1, for driving the REAL `anthropic` client in tests.

`POST /v1/messages` answers in the Messages wire format. Replies come from a pluggable *brain* (by default a
deterministic rule that reads the delimited sections of the judge prompt the way a model would see them);
faults are scripted per request (`script`, `fail_next`), over time (`fail_for`) or by load (`rate_limit`).
Every request is recorded (headers and JSON body) so tests can assert what was sent.

Order of decisions for each request: an active outage (`fail_for`), then the rate limit, then the next
scripted step, then `default` (a brain reply unless changed).

    with FakeMessagesAPI() as api:
        api.script(overloaded(), overloaded(), Reply())      # 529, 529, then a brain reply
        settings = load_settings(judge="rubric", **api.settings_overrides())

Point a subprocess (a whole monitor) at it with `api.env()` (MONITOR_ANTHROPIC_BASE_URL and _API_KEY).

Prompt caching: the system prefix up to the last `cache_control` marker is written on first sight and read
afterwards, whatever its length. `FakeMessagesAPI(cache_min_tokens=N)` (or `api.cache_minimum(N)`) emulates the
API's minimum: a shorter prefix is never cached and is billed as plain input. Tokens are characters / 4 unless
`chars_per_token` says otherwise (the judges estimate with 3.5: pass that to agree with them)."""

from __future__ import annotations

import json
import math
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

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
        """The text of the last user message."""
        for msg in reversed((self.body or {}).get("messages", [])):
            if msg.get("role") == "user":
                content = msg.get("content")
                if isinstance(content, str):
                    return content
                return "".join(b.get("text", "") for b in content if b.get("type") == "text")
        return ""

    @property
    def schema(self) -> dict[str, Any] | None:
        """The JSON schema asked for in `output_config.format`, if any."""
        fmt = ((self.body or {}).get("output_config") or {}).get("format") or {}
        return fmt.get("schema") if fmt.get("type") == "json_schema" else None

    def section(self, name: str) -> str | None:
        """The text of the delimited section `name` (e.g. "assistant_response"), as a model would read it."""
        return find_section(self.user_text, name)


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
            "verdicts": [{"verdict": "yes", "reason": ""} if ok else {"verdict": "no", "reason": "does not address the question"} for ok in marks],
        }
    if "score" in props:
        share = sum(marks) / len(marks) if marks else 0.0
        return {"reasoning": f"{sum(marks)} of {len(marks)} sentences address the question.", "score": round(4 * share)}
    return "I can only answer judge requests."


# ---- the server ----------------------------------------------------------------------------------------


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
        self._rate: tuple[float, float | None] | None = None
        self._accepted: deque[float] = deque()
        self._cached_prefixes: set[str] = set()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._ids = 0

    # -- lifecycle

    def start(self) -> FakeMessagesAPI:
        """Listen on a free port and serve in a background thread."""
        server = _Server(("127.0.0.1", 0), _make_handler(self))
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, name="fake-messages-api", daemon=True)
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

    def always(self, step: Step) -> None:
        """Answer every unscripted request with `step` (e.g. a persistently malformed reply)."""
        self.default = step

    def reset(self) -> None:
        """Back to brain replies: no script, outage, rate limit or recorded requests; an empty cache with the cache
        settings the server was built with."""
        with self._lock:
            self._cache_min_tokens, self._chars_per_token = self._cache_config
            self._queue.clear()
            self._outage = None
            self._rate = None
            self._accepted.clear()
            self._requests.clear()
            self._cached_prefixes.clear()
        self.default = Reply()

    # -- observations

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def message_requests(self) -> list[RecordedRequest]:
        """Requests to POST /v1/messages."""
        return [r for r in self.requests if r.method == "POST" and r.path.split("?")[0] == "/v1/messages"]

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
        text: Any = step.text if step.text is not None else self.brain(req)
        if not isinstance(text, str):
            text = json.dumps(text)
        with self._lock:
            self._ids += 1
            msg_id = f"msg_fake_{self._ids:06d}"
            usage = self._usage(req, text)
        usage.update(step.usage or {})
        body = {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": (req.body or {}).get("model", "fake-model"),
            "content": [{"type": "text", "text": text}],
            "stop_reason": step.stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }
        return json.dumps(body).encode()

    def _usage(self, req: RecordedRequest, reply_text: str) -> dict[str, int]:
        # Simulates prompt caching: the system prefix up to the last cache_control marker is written on first
        # sight and read afterwards, if it reaches the minimum (when one is set); ~4 characters per token.
        tokens = self._tokens
        blocks = req.system_blocks
        marked = [i for i, b in enumerate(blocks) if b.get("cache_control")]
        prefix = "".join(b.get("text", "") for b in blocks[: marked[-1] + 1]) if marked else ""
        rest = "".join(b.get("text", "") for b in blocks[marked[-1] + 1 :]) if marked else req.system_text
        cache_write = cache_read = 0
        if prefix and self._cache_min_tokens is not None and tokens(prefix) < self._cache_min_tokens:
            rest = prefix + rest  # below the minimum the API caches nothing and bills the prefix as input
        elif prefix:
            if prefix in self._cached_prefixes:
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
    return json.dumps({"type": "error", "error": {"type": fault.error_type, "message": fault.message or fault.error_type}}).encode()


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
            if self.command != "POST" or self.path.split("?")[0] != "/v1/messages":
                with api._lock:
                    api._requests.append(req)
                self._send(req, 404, _error_body(Fault(404, "not_found_error", f"no route {self.path}")))
                return
            step = api._record(req)
            if not api._sleep(step.delay_s):
                self.close_connection = True
                return
            try:
                if isinstance(step, Drop):
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if isinstance(step, Fault):
                    headers = {"retry-after": f"{step.retry_after:g}"} if step.retry_after is not None else {}
                    self._send(req, step.status, _error_body(step), headers)
                    return
                self._send(req, 200, api._reply_body(req, step))
            except OSError:
                # The client gave up (timeout) and closed the connection while we were "thinking".
                self.close_connection = True

        def _send(self, req: RecordedRequest, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            req.status = status
            self.send_response(status)
            self.send_header("content-type", "application/json")
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
    "Drop",
    "FakeMessagesAPI",
    "Fault",
    "RecordedRequest",
    "Reply",
    "Step",
    "bad_request",
    "default_brain",
    "find_section",
    "malformed",
    "mismatched_verdicts",
    "out_of_range_score",
    "overloaded",
    "rate_limited",
    "server_error",
    "slow",
]
