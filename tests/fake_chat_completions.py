"""A fake OpenAI-compatible Chat Completions server on 127.0.0.1, for driving the REAL `openai` client in tests.

It plays OpenAI, Azure OpenAI, vLLM, Ollama or DeepSeek, as set. Routes: `POST /v1/chat/completions` (OpenAI, vLLM,
Ollama, LiteLLM: give the SDK `api.openai_base_url`), `POST /openai/v1/chat/completions` (Azure's v1 API:
`api.azure_base_url`) and `POST /openai/deployments/{deployment}/chat/completions?api-version=…` (Azure's older API,
as `AsyncAzureOpenAI(azure_endpoint=api.base_url, api_version=…)` posts it; without `api-version` it is a 404, as on
Azure; the deployment is the model). Anything else is a 404 in OpenAI's error shape. Auth: `Authorization: Bearer KEY`
or Azure's `api-key: KEY` on any route, else 401; `FakeChatCompletions(require_auth=False)` is a local vLLM or Ollama
that takes any key or none.

Replies come from a *brain*, by default `tests.fake_messages_api.default_brain`, which reads the delimited sections
of the user message (`<user_question_CODE>` / `<assistant_response_CODE>`) and answers the rubric (reasoning + score
0..4) or statements (statements + verdicts) schema. The brain gets a `ChatRequest` (a `RecordedRequest`) whose
`schema` is the one the request asks for, from the first of: `response_format` json_schema, the first function
tool's `parameters`, vLLM's `structured_outputs.json`; failing those (json_object or prompt mode, where the schema is
only described in the prompt) a stand-in named after the prompt's words: `"verdicts"` means statements, else
`"score"` means rubric (the system message is read before the user message, so judged text cannot choose).

How the brain's JSON goes out depends on the structured-output mechanism of the request (`ChatRequest.mechanism`):
- `response_format: {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`, vLLM's
  `structured_outputs: {"json": schema}`, or `{"type": "json_object"}`: as `message.content`, a JSON string;
- `tools` (function tools; `tool_choice` "auto", "required" or a named function): as
  `message.tool_calls[0].function.arguments` (a JSON string) with `content` null; `finish_reason` is "tool_calls",
  except "stop" when `tool_choice` names the function, as OpenAI does; `tool_choice: "none"` answers text;
- nothing (prompt mode): as text, plain unless `prompt_wrapping("fence")` (in a ```json fence) or
  `prompt_wrapping("prose")` (between sentences) exercises a tolerant parser.
The request is validated as OpenAI does: a missing `model` (outside the deployments route) or empty `messages` is a
400; a json_schema without `name` or `schema` is a 400; in a json_schema or function tool with `strict: true`, every
object in the schema (`$defs` included) must say `additionalProperties: false` and list all its properties in
`required` (else 400, as OpenAI; `strict_schemas(False)` accepts any, as vLLM); `json_object` is a 400 unless some
message contains the word "json";
`top_logprobs` needs `logprobs: true` and is at most 20. vLLM's removed keys (`guided_json`, `guided_choice`,
`guided_regex`, `guided_grammar`) are unknown fields: ignored (the reply is what the other fields ask for) but recorded,
see `saw_guided_keys()`; `prompt_cache_key` and `structured_outputs` are recorded too (`ChatRequest` properties).

Modes, each a setter (off by default; `reset` turns them all off):
- `schema_ignored(share)`: a vLLM that ignores structured-output fields with HTTP 200. That share of the requests that
  ask for structure (any mechanism but prompt) get free text back instead ("The answer is relevant, I'd say 3 out of
  4."), with `finish_reason` "stop" and no tool call. Deterministic by count: the n-th such request is ignored when
  floor(n * share) > floor((n - 1) * share), so 1/3 ignores the 3rd, 6th, 9th, … and any run of requests holds the
  share to within one. `ignored()` scripts one such reply.
- `json_object_only()`: DeepSeek. `json_schema` (and `structured_outputs`) get 400 invalid_request_error "This
  response_format type is unavailable now"; `json_object` works (with the "json" word rule above).
- `no_tools()`: a request with `tools` gets 400 "tools are not supported by this model".
- `no_response_format()`: `response_format` of any type gets 400: a server without structured output, so a ladder
  falls to tools or prompt.
- `cut_off(share=1.0)`: that share of replies (counted as above, over all replies) is cut as at `max_tokens`: the
  generated text (content or tool arguments) is cut to half its length, `finish_reason` is "length" and
  `completion_tokens` is the request's `max_completion_tokens`/`max_tokens` when it gives one. A reply longer than
  the request's limit is always cut there, as a server would. `cut()` scripts one cut reply.
- `score_distribution({"0": p0, …, "4": p4})`: the model's distribution over the rubric score's digit. The reply's
  score becomes its most likely digit (greedy decoding); None (the default) keeps the brain's score d and gives it
  0.7, its neighbours 0.12 each and the rest an equal share.
- `rate_limit(per_second, retry_after=None)`: at most that many requests in any 1 s window, else 429 with
  `retry-after` (whole seconds until the window has room, or as given) and `x-ratelimit-remaining-requests: 0` /
  `x-ratelimit-reset-requests`; while set, every 200 carries `x-ratelimit-limit-requests`, `-remaining-requests` and
  `-reset-requests` as OpenAI sends them.
Faults per request (`script`, `fail_next`) or over time (`fail_for`): `rate_limited(retry_after)` (429 with
`retry-after` seconds and the `x-ratelimit-*` headers), `azure_rate_limited(retry_after_ms)` (429 with Azure's
`retry-after-ms` and `retry-after`), `server_error(500 | 503 | …)`, `unavailable()` (503), `bad_request(message)`,
`slow(delay_s)` (a reply held past the client's timeout), `Drop()` (the connection is closed unanswered),
`malformed()` (200 with text that is not JSON), or any `ChatReply` / `ChatFault`.

Order of decisions for each request: route and auth (404, 401), then the validation and capability refusals above
(400s; none of these consume a scripted step or the rate limit), then an active outage (`fail_for`), the rate limit,
the next scripted step, and `default` (a brain reply unless changed by `always`). Every request is recorded
(headers, JSON body, answered status).

Reply shape as OpenAI's: `{"id", "object": "chat.completion", "created", "model", "system_fingerprint",
"choices": [{"index": 0, "message": {"role": "assistant", "content", "refusal": null, "tool_calls"?},
"finish_reason", "logprobs"}], "usage": {"prompt_tokens", "completion_tokens", "total_tokens",
"prompt_tokens_details": {"cached_tokens", "audio_tokens"}, "completion_tokens_details": {…}}}`; the model is the
request's (or the Azure deployment).

Tokens are characters / 4 (`chars_per_token`). The prompt is serialized as the `tools` JSON, then the
`response_format` JSON, then each message as `<|role|>` + its text, one per line (`ChatRequest.prompt_text`); that is
what `prompt_tokens` counts and what the prefix cache keys on. Prefix caching as OpenAI's automatic one: the cached
part of a prompt is the longest prefix it shares with any earlier prompt, in whole steps of 128 tokens (512 chars at
4 per token) counted from the start, and only if that reaches 1,024 tokens; it is reported as
`prompt_tokens_details.cached_tokens` (part of `prompt_tokens`, as on OpenAI). `prefix_cache(min_tokens, step_tokens)`
changes both; `prefix_cache(None)` turns caching off (cached_tokens 0, as vLLM without prefix caching).

Log-probabilities: with `logprobs: true` (and `top_logprobs: k`), `choices[0].logprobs.content` lists one entry per
token of the generated text (content, or the tool call's arguments, as vLLM reports them): `{"token", "logprob",
"bytes", "top_logprobs": [{"token", "logprob", "bytes"}, …k]}`. The tokenizer is simple and documented: a run of ASCII
letters, a run of whitespace, a single digit, or any other single character is one token (so JSON punctuation and
each digit stand alone, and the tokens join back to the text). The digit after `"score":` carries the score
distribution: its `top_logprobs` are the digits "0".."4" by falling probability (then filler tokens if k > 5), so a
client can compute the expected score; every other token has logprob -0.01 and filler alternatives far below.

OpenAI's Batch API, under `/v1` only (`client.files.create / batches.create / batches.retrieve / batches.cancel /
files.content`):
`POST /v1/files` takes a multipart upload (`purpose` batch for an input file) and answers a `file` object;
`POST /v1/batches` needs `endpoint` "/v1/chat/completions", `completion_window` "24h" and an uploaded batch file
(else 400) and answers a batch in `validating`. The first read moves it to `failed` (its `errors` list each bad
line as the API does: `invalid_json_line`, `missing_required_parameter`, `duplicate_custom_id`,
`mismatched_endpoint`, or `empty_file`) or to `in_progress`; it completes `batch_processing(s)` seconds later
(0.2 by default; None: only on `end_batch`, `expire_batch` or a cancel), noticed when next read. Each line is then
answered as `POST /v1/chat/completions` would answer its body (same brain, modes, validation and prefix cache, run
in submission order) unless `script_batch(...)` set its outcome (in submission order across batches): a `ChatReply`,
a `ChatFault` (an error-file line with its status and error body) or `expired()` (an error-file line with
`error.code` "batch_expired"). 200s go to the `output_file_id`, the others to the `error_file_id`, each sorted by
custom_id (so not in input order, as the API warns), read by `GET /v1/files/{id}/content`. `expire_batch()` ends
a batch with every unscripted request expired; after `cancel` the next read finds it `cancelled`, with only the
scripted requests answered. `fail_batch_call("upload" | "create" | "retrieve" | "content" | "cancel", *faults)`
fails the HTTP calls themselves. Each batched request is recorded in `batch_requests` (`body` is its line's body).

    with FakeChatCompletions() as api:
        api.json_object_only()
        api.script(rate_limited(retry_after=0), ChatReply())   # 429, then a brain reply
        client = AsyncOpenAI(base_url=api.openai_base_url, api_key=API_KEY)

Point a judge at it with `load_settings(**api.settings_overrides())` (provider openai, or `settings_overrides(
"azure_openai")`), a subprocess monitor with `api.env()`."""

from __future__ import annotations

import email.policy
import hashlib
import json
import math
import re
import socket
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from tests.fake_messages_api import Drop, RecordedRequest, default_brain, find_section

API_KEY = "sk-fake-openai-test-key"
DEFAULT_MODEL = "fake-chat-model"
GUIDED_KEYS = ("guided_json", "guided_choice", "guided_regex", "guided_grammar")
MAX_TOP_LOGPROBS = 20
OTHER_TOKEN_LOGPROB = -0.01
_FILLERS = (" ", '"', ",", "\n", "the", ":", "a", ".", "}", "{", "is", "and", "to", "of", "-", "in", "it", "s", "I")
_TOKEN = re.compile(r"[A-Za-z]+|\s+|\d|.", re.DOTALL)
_SCORE_DIGIT = re.compile(r'"score"\s*:\s*(\d)')
_DIGITS = ("0", "1", "2", "3", "4")

Mechanism = Literal["json_schema", "structured_outputs", "json_object", "tools", "prompt"]
Route = Literal["openai", "azure_v1", "azure_deployment"]

# ---- what the fake can be told to do -------------------------------------------------------------------


@dataclass(frozen=True)
class ChatReply:
    """A 200 `chat.completion`. `content` None: the brain's answer; a dict/list is sent as its JSON (in the slot the
    request's mechanism uses: content or tool arguments); a str as is."""

    content: str | dict[str, Any] | list[Any] | None = None
    delay_s: float = 0.0
    finish_reason: str | None = None  # None: as computed ("stop", "tool_calls" or "length")
    usage: dict[str, int] | None = None  # overrides usage fields; "cached_tokens" goes into prompt_tokens_details
    ignore_schema: bool = False  # free text whatever structure was asked for (a server ignoring the schema)
    cut: bool = False  # cut as at max_tokens


@dataclass(frozen=True)
class ChatFault:
    """An error response in OpenAI's shape `{"error": {"message", "type", "param", "code"}}` (or a raw `body`)."""

    status: int
    message: str = ""
    error_type: str = "invalid_request_error"
    code: str | None = None
    param: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    body: bytes | None = None


ChatStep = ChatReply | ChatFault | Drop


def rate_limited(retry_after: float | None = 1.0) -> ChatFault:
    """HTTP 429 as OpenAI sends it: `retry-after` seconds (None: omitted) and the `x-ratelimit-*` request headers."""
    headers = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": f"{retry_after or 1:g}s"}
    if retry_after is not None:
        headers["retry-after"] = f"{retry_after:g}"
    return ChatFault(
        429,
        "Rate limit reached for requests. Please try again later.",
        "requests",
        "rate_limit_exceeded",
        headers=headers,
    )


def azure_rate_limited(retry_after_ms: int = 500) -> ChatFault:
    """HTTP 429 as Azure OpenAI sends it: `retry-after-ms` and `retry-after` (whole seconds, rounded up)."""
    headers = {"retry-after-ms": str(retry_after_ms), "retry-after": str(math.ceil(retry_after_ms / 1000))}
    message = "Requests to the ChatCompletions_Create Operation have exceeded the call rate limit of your pricing tier."
    return ChatFault(429, message, "requests", "429", headers=headers)


def server_error(status: int = 500) -> ChatFault:
    """A 5xx server_error (500 by default)."""
    return ChatFault(status, "The server had an error while processing your request. Sorry about that!", "server_error")


def unavailable() -> ChatFault:
    """HTTP 503: the engine is overloaded."""
    return ChatFault(503, "The engine is currently overloaded, please try again later.", "server_error")


def bad_request(message: str = "invalid request", param: str | None = None) -> ChatFault:
    """HTTP 400 invalid_request_error (not retryable)."""
    return ChatFault(400, message, "invalid_request_error", param=param)


def malformed() -> ChatReply:
    """A 200 whose generated text is not JSON."""
    return ChatReply("{not json")


def ignored() -> ChatReply:
    """A 200 answering free text whatever structure the request asked for (one `schema_ignored` reply)."""
    return ChatReply(ignore_schema=True)


def cut() -> ChatReply:
    """A 200 cut as at max_tokens (`finish_reason` "length", the JSON truncated)."""
    return ChatReply(cut=True)


def slow(delay_s: float, reply: ChatReply | None = None) -> ChatReply:
    """A reply sent only after `delay_s` (longer than the client timeout: the client gives up first)."""
    base = reply or ChatReply()
    return ChatReply(base.content, delay_s, base.finish_reason, base.usage, base.ignore_schema, base.cut)


# ---- what was received ---------------------------------------------------------------------------------


def _text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


@dataclass
class ChatRequest(RecordedRequest):
    """One request as received; `body` is the Chat Completions request (`system_blocks`, `user_text` and `section`
    read its messages)."""

    route: Route | None = None  # None: not a chat route
    deployment: str | None = None  # the Azure deployment in the path

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The request's messages (empty if none or malformed)."""
        messages = self.body.get("messages") if isinstance(self.body, dict) else None
        return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []

    @property
    def system_blocks(self) -> list[dict[str, Any]]:
        """The system (and developer) messages, each as a text block."""
        return [
            {"type": "text", "text": _text(m.get("content"))}
            for m in self.messages
            if m.get("role") in ("system", "developer")
        ]

    @property
    def user_text(self) -> str:
        """The text of every user message, joined (as the Messages fake reads them): the judged sections are in the
        first, a corrective retry's note (after the model's own invalid reply) in the last, and a model reads all."""
        return "\n\n".join(_text(m.get("content")) for m in self.messages if m.get("role") == "user")

    @property
    def model(self) -> str | None:
        """The Azure deployment from the path, else the body's `model`."""
        if self.deployment is not None:
            return self.deployment
        model = self.body.get("model") if isinstance(self.body, dict) else None
        return model if isinstance(model, str) else None

    def _get(self, key: str) -> Any:
        return self.body.get(key) if isinstance(self.body, dict) else None

    @property
    def response_format(self) -> dict[str, Any] | None:
        """The `response_format` parameter, if any."""
        value = self._get("response_format")
        return value if isinstance(value, dict) else None

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The function tools offered."""
        tools = self._get("tools")
        return [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []

    @property
    def tool_choice(self) -> Any:
        """The `tool_choice` parameter (None if absent)."""
        return self._get("tool_choice")

    @property
    def structured_outputs(self) -> dict[str, Any] | None:
        """vLLM's `structured_outputs` parameter, if any."""
        value = self._get("structured_outputs")
        return value if isinstance(value, dict) else None

    @property
    def prompt_cache_key(self) -> str | None:
        """OpenAI's `prompt_cache_key`, if sent."""
        value = self._get("prompt_cache_key")
        return value if isinstance(value, str) else None

    @property
    def guided_keys(self) -> set[str]:
        """vLLM's removed `guided_*` keys this request carried."""
        return {k for k in GUIDED_KEYS if isinstance(self.body, dict) and k in self.body}

    @property
    def max_tokens(self) -> int | None:
        """`max_completion_tokens`, else `max_tokens`."""
        for key in ("max_completion_tokens", "max_tokens"):
            value = self._get(key)
            if isinstance(value, int):
                return value
        return None

    @property
    def mechanism(self) -> Mechanism:
        """How the request asks for structure: tools win (unless `tool_choice` is "none"), then `response_format`,
        then `structured_outputs`; else prompt."""
        if self.tools and self.tool_choice != "none":
            return "tools"
        kind = (self.response_format or {}).get("type")
        if kind in ("json_schema", "json_object"):
            return "json_schema" if kind == "json_schema" else "json_object"
        if self.structured_outputs is not None:
            return "structured_outputs"
        return "prompt"

    @property
    def schema(self) -> dict[str, Any] | None:
        """The JSON schema asked for (see the module doc for the order), or a stand-in read from the prompt."""
        json_schema = (self.response_format or {}).get("json_schema")
        if (self.response_format or {}).get("type") == "json_schema" and isinstance(json_schema, dict):
            schema = json_schema.get("schema")
            if isinstance(schema, dict):
                return schema
        if self.tools and self.tool_choice != "none":
            parameters = (self.tools[0].get("function") or {}).get("parameters")
            if isinstance(parameters, dict):
                return parameters
        so_schema = (self.structured_outputs or {}).get("json")
        if isinstance(so_schema, dict):
            return so_schema
        for text in ("".join(b["text"] for b in self.system_blocks), self.user_text):
            if '"verdicts"' in text:
                return {"type": "object", "properties": {"statements": {}, "verdicts": {}}}
            if '"score"' in text:
                return {"type": "object", "properties": {"reasoning": {}, "score": {}}}
        return None

    @property
    def prompt_text(self) -> str:
        """The prompt as the fake counts and caches it: tools, response_format, then `<|role|>text` per message."""
        parts = []
        if self.tools:
            parts.append(json.dumps(self.tools, sort_keys=True))
        if self.response_format is not None:
            parts.append(json.dumps(self.response_format, sort_keys=True))
        parts.extend(f"<|{m.get('role')}|>{_text(m.get('content'))}" for m in self.messages)
        return "\n".join(parts)


def chat_route(method: str, path: str) -> tuple[Route, str | None] | None:
    """The chat route and Azure deployment of a request, or None if it is not a chat completion."""
    if method != "POST":
        return None
    bare = path.split("?")[0]
    if bare == "/v1/chat/completions":
        return "openai", None
    if bare == "/openai/v1/chat/completions":
        return "azure_v1", None
    match = re.fullmatch(r"/openai/deployments/([^/]+)/chat/completions", bare)
    if match:
        return "azure_deployment", urllib.parse.unquote(match.group(1))
    return None


# ---- replies -------------------------------------------------------------------------------------------


def tokenize(text: str) -> list[str]:
    """The fake's tokens: a run of ASCII letters, a run of whitespace, one digit, or any other single character."""
    return _TOKEN.findall(text)


def _free_text(answer: str | dict[str, Any] | list[Any]) -> str:
    """What a model writes when nothing constrains it: prose about the verdict, no JSON."""
    if isinstance(answer, dict) and isinstance(answer.get("score"), int):
        return f"The answer is relevant, I'd say {answer['score']} out of 4."
    if isinstance(answer, dict) and "verdicts" in answer:
        return "Most of the response addresses the question; a sentence or two drift off topic."
    return answer if isinstance(answer, str) else "I think the response is mostly relevant."


def _wrap(payload: str, style: Literal["fence", "prose"] | None) -> str:
    if style == "fence":
        return f"Here is my evaluation:\n```json\n{payload}\n```"
    if style == "prose":
        return f"Sure. My evaluation as JSON:\n{payload}\nLet me know if you need anything else."
    return payload


def _default_distribution(digit: int) -> dict[str, float]:
    probs = {d: 0.0 for d in _DIGITS}
    probs[str(digit)] = 0.7
    for near in (digit - 1, digit + 1):
        if 0 <= near <= 4:
            probs[str(near)] = 0.12
    rest = [d for d, p in probs.items() if p == 0.0]
    left = 1.0 - sum(probs.values())
    for d in rest:
        probs[d] = left / len(rest)
    return probs


def _entry(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode())}


def _logprobs(text: str, k: int, distribution: Mapping[str, float] | None) -> dict[str, Any]:
    """`choices[0].logprobs` for `text` (see the module doc); the score digit carries `distribution`."""
    score = _SCORE_DIGIT.search(text)
    score_at = score.start(1) if score else -1
    content = []
    at = 0
    for token in tokenize(text):
        if at == score_at:
            probs = dict(distribution or _default_distribution(int(token)))
            ranked = sorted(((d, p) for d, p in probs.items() if p > 0), key=lambda dp: -dp[1])
            top = [_entry(d, math.log(p)) for d, p in ranked]
            entry = _entry(token, math.log(probs[token]) if probs.get(token, 0) > 0 else -100.0)
        else:
            top = [_entry(token, OTHER_TOKEN_LOGPROB)]
            entry = _entry(token, OTHER_TOKEN_LOGPROB)
        fillers = (f for f in _FILLERS if f not in {t["token"] for t in top})
        top += [_entry(f, -12.0 - i) for i, f in zip(range(max(0, k - len(top))), fillers, strict=False)]
        entry["top_logprobs"] = top[:k]
        content.append(entry)
        at += len(token)
    return {"content": content, "refusal": None}


def _strict_schema_problem(schema: Any, where: str = "()") -> str | None:
    """Why OpenAI's strict mode refuses `schema` (every object closed, every property required), or None."""
    if isinstance(schema, list):
        for item in schema:
            problem = _strict_schema_problem(item, where)
            if problem:
                return problem
        return None
    if not isinstance(schema, dict):
        return None
    if schema.get("type") == "object" or "properties" in schema:
        if schema.get("additionalProperties") is not False:
            return f"In context={where}, 'additionalProperties' is required to be supplied and to be false."
        props = list((schema.get("properties") or {}).keys())
        missing = [p for p in props if p not in (schema.get("required") or [])]
        if missing:
            return (
                f"In context={where}, 'required' is required to be supplied and to be an array including every key "
                f"in properties. Missing '{missing[0]}'."
            )
    for key, value in schema.items():
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            for name, sub in value.items():
                problem = _strict_schema_problem(sub, f"('{key}', '{name}')")
                if problem:
                    return problem
        elif key in ("items", "anyOf", "allOf", "oneOf"):
            problem = _strict_schema_problem(value, f"('{key}',)")
            if problem:
                return problem
    return None


def _every(share: float, n: int) -> bool:
    """Whether the n-th (1-based) event is one of a `share`: exact over any run, deterministic by count."""
    return math.floor(n * share) > math.floor((n - 1) * share)


# ---- the Batch API -------------------------------------------------------------------------------------

BatchCall = Literal["upload", "create", "retrieve", "content", "cancel"]
BATCH_CALLS: tuple[BatchCall, ...] = ("upload", "create", "retrieve", "content", "cancel")
DEFAULT_BATCH_PROCESSING_S = 0.2
_BATCH_ROUTES: tuple[tuple[str, re.Pattern[str], BatchCall], ...] = (
    ("POST", re.compile(r"/v1/files()"), "upload"),
    ("POST", re.compile(r"/v1/batches()"), "create"),
    ("GET", re.compile(r"/v1/batches/([^/]+)"), "retrieve"),
    ("POST", re.compile(r"/v1/batches/([^/]+)/cancel"), "cancel"),
    ("GET", re.compile(r"/v1/files/([^/]+)/content"), "content"),
)


def batch_route(method: str, path: str) -> tuple[BatchCall, str] | None:
    """The Batch API call and the batch or file id (empty for upload and create) of a request, or None."""
    bare = path.split("?")[0]
    for route_method, pattern, call in _BATCH_ROUTES:
        match = pattern.fullmatch(bare)
        if match and method == route_method:
            return call, match.group(1)
    return None


@dataclass(frozen=True)
class BatchExpired:
    """A batched request the batch never ran before its window closed (an error-file line `batch_expired`)."""


BatchOutcome = ChatReply | ChatFault | BatchExpired  # the outcome of one request inside a batch


def expired() -> BatchExpired:
    """A batched request that expired unprocessed."""
    return BatchExpired()


@dataclass
class BatchedChatRequest(ChatRequest):
    """One line of a batch's input file: `body` is its `body`; headers and time are those of the create call."""

    batch_id: str = ""
    custom_id: str = ""


@dataclass
class _ChatBatch:
    id: str
    input_file_id: str
    endpoint: str
    created_at: int
    metadata: Any
    entries: list[tuple[BatchedChatRequest, BatchOutcome | None]]  # None: what the chat endpoint would answer
    errors: list[dict[str, Any]]  # validation errors of the input file: the batch fails
    processing_s: float | None
    status: str = "validating"
    ends_at: float | None = None
    times: dict[str, int] = field(default_factory=dict)  # in_progress_at, completed_at, … (unix seconds)
    output_file_id: str | None = None
    error_file_id: str | None = None
    completed: int = 0
    failed: int = 0

    def wire(self) -> dict[str, Any]:
        stamps = ("in_progress_at", "finalizing_at", "completed_at", "failed_at", "expired_at", "cancelling_at")
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "errors": {"object": "list", "data": self.errors} if self.errors else None,
            "input_file_id": self.input_file_id,
            "completion_window": "24h",
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": self.created_at,
            "expires_at": self.created_at + 24 * 3600,
            **{name: self.times.get(name) for name in (*stamps, "cancelled_at")},
            "request_counts": {"total": len(self.entries), "completed": self.completed, "failed": self.failed},
            "metadata": self.metadata,
        }


def _batch_lines(raw: bytes, endpoint: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The input file's request lines and, as the API lists them, the validation errors that fail the batch."""
    lines: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    seen: set[Any] = set()
    for n, text in enumerate(raw.decode(errors="replace").splitlines(), start=1):
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except ValueError:
            message = "This line is not parseable as valid JSON."
            errors.append({"code": "invalid_json_line", "message": message, "line": n})
            continue
        if not isinstance(line, dict) or not all(k in line for k in ("custom_id", "method", "url", "body")):
            message = "Each line needs 'custom_id', 'method', 'url' and 'body'."
            errors.append({"code": "missing_required_parameter", "message": message, "line": n})
        elif line["custom_id"] in seen:
            message = f"The custom_id '{line['custom_id']}' is duplicated; custom_id must be unique within a batch."
            errors.append({"code": "duplicate_custom_id", "message": message, "line": n})
        elif line["method"] != "POST" or line["url"] != endpoint:
            message = f"The line's method and url must be POST {endpoint}, as the batch's endpoint."
            errors.append({"code": "mismatched_endpoint", "message": message, "line": n})
        else:
            seen.add(line["custom_id"])
            lines.append(line)
    if not lines and not errors:
        errors.append({"code": "empty_file", "message": "The input file holds no requests.", "line": None})
    return lines, [{**e, "param": None} for e in errors]


def _multipart(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
    """The fields of a multipart/form-data body: name -> (filename, bytes)."""
    message = BytesParser(policy=email.policy.default).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + raw
    )
    fields = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str) and isinstance(payload, bytes):
            fields[name] = (part.get_filename(), payload)
    return fields


class _BatchError(Exception):
    """A Batch API call answered with an error (400 invalid request, 404 unknown id)."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.fault = ChatFault(status, message, param=param, code="404" if status == 404 else None)


# ---- the server ----------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    # The stdlib's listen backlog of 5 refuses connections when a pipeline opens many at once.
    request_queue_size = 256


class FakeChatCompletions:
    """The fake server; use as a context manager or call `start()`/`stop()`."""

    def __init__(
        self,
        brain: Callable[[RecordedRequest], str | dict[str, Any]] = default_brain,
        *,
        api_key: str = API_KEY,
        require_auth: bool = True,
        chars_per_token: float = 4.0,
        model: str = DEFAULT_MODEL,
    ) -> None:
        """A stopped server whose default replies come from `brain`; `require_auth=False` takes any key or none."""
        self.brain = brain
        self.api_key = api_key
        self.require_auth = require_auth
        self.model = model
        self._chars_per_token = chars_per_token
        self.default: ChatStep = ChatReply()
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._requests: list[ChatRequest] = []
        self._queue: deque[ChatStep] = deque()
        self._outage: tuple[float, ChatFault] | None = None
        self._rate: tuple[float, float | None] | None = None
        self._accepted: deque[float] = deque()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._ids = 0
        self._seen_blocks: set[bytes] = set()
        # Batch state has its own lock, taken before `_lock` (never after): ending a batch computes completions.
        self._batch_lock = threading.Lock()
        self._files: dict[str, tuple[str, str, bytes]] = {}  # id -> (filename, purpose, content)
        self._batches: dict[str, _ChatBatch] = {}
        self._batch_requests: list[BatchedChatRequest] = []
        self._batch_queue: deque[BatchOutcome] = deque()
        self._batch_call_faults: dict[BatchCall, deque[ChatFault | Drop]] = {c: deque() for c in BATCH_CALLS}
        self._batch_processing_s: float | None = DEFAULT_BATCH_PROCESSING_S
        self._batch_ids = 0
        self._set_defaults()

    def _set_defaults(self) -> None:
        self._ignore_share = 0.0
        self._structured_seen = 0
        self._cut_share = 0.0
        self._replies_seen = 0
        self._json_object_only = False
        self._no_tools = False
        self._no_response_format = False
        self._strict_schemas = True
        self._wrapping: Literal["fence", "prose"] | None = None
        self._distribution: dict[str, float] | None = None
        self._cache: tuple[int, int] | None = (1024, 128)
        self._seen_blocks.clear()

    # -- lifecycle

    def start(self) -> FakeChatCompletions:
        """Listen on a free port and serve in a background thread."""
        server = _Server(("127.0.0.1", 0), _make_handler(self))
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.01}, name="fake-chat-completions", daemon=True
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

    def __enter__(self) -> FakeChatCompletions:
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
        """The server's root (`azure_endpoint` for `AsyncAzureOpenAI`)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """What to give `AsyncOpenAI` as `base_url` (OpenAI, vLLM, Ollama, LiteLLM style): the root + `/v1`."""
        return f"{self.base_url}/v1"

    @property
    def azure_base_url(self) -> str:
        """Azure OpenAI's v1 API base URL: the root + `/openai/v1`."""
        return f"{self.base_url}/openai/v1"

    def settings_overrides(self, provider: Literal["openai", "azure_openai"] = "openai") -> dict[str, Any]:
        """Settings keywords that point the judges at this server as `provider`."""
        url = self.openai_base_url if provider == "openai" else self.azure_base_url
        return {
            "judge_provider": provider,
            "judge_model": self.model,
            "judge_base_url": url,
            "judge_api_key": self.api_key,
        }

    def env(self, provider: Literal["openai", "azure_openai"] = "openai") -> dict[str, str]:
        """Environment variables that point a subprocess monitor at this server as `provider`."""
        return {f"MONITOR_{k.upper()}": str(v) for k, v in self.settings_overrides(provider).items()}

    # -- controls

    def script(self, *steps: ChatStep) -> None:
        """Queue steps, one per request that passes validation, before falling back to `default`."""
        with self._lock:
            self._queue.extend(steps)

    def fail_next(self, n: int, fault: ChatFault | None = None) -> None:
        """The next `n` requests get `fault` (500 by default)."""
        self.script(*([fault or server_error()] * n))

    def fail_for(self, seconds: float, fault: ChatFault | None = None) -> None:
        """Every request for the next `seconds` gets `fault` (503 by default)."""
        with self._lock:
            self._outage = (time.monotonic() + seconds, fault or unavailable())

    def always(self, step: ChatStep) -> None:
        """Answer every unscripted request with `step`."""
        self.default = step

    def rate_limit(self, per_second: float | None, retry_after: float | None = None) -> None:
        """Accept at most `per_second` requests in any 1 s window, else 429 (see the module doc); None lifts it."""
        with self._lock:
            self._rate = None if per_second is None else (per_second, retry_after)
            self._accepted.clear()

    def schema_ignored(self, share: float) -> None:
        """That share (0..1) of structured requests gets free text with HTTP 200; 0 ends it. Restarts the count."""
        with self._lock:
            self._ignore_share, self._structured_seen = share, 0

    def json_object_only(self, on: bool = True) -> None:
        """json_schema (and structured_outputs) are refused with DeepSeek's 400; json_object works."""
        self._json_object_only = on

    def no_tools(self, on: bool = True) -> None:
        """Requests with `tools` get a 400."""
        self._no_tools = on

    def no_response_format(self, on: bool = True) -> None:
        """`response_format` of any type gets a 400."""
        self._no_response_format = on

    def strict_schemas(self, on: bool) -> None:
        """True (the default): a strict json_schema or tool must be closed and fully required, as on OpenAI."""
        self._strict_schemas = on

    def cut_off(self, share: float = 1.0) -> None:
        """That share (0..1) of replies is cut as at max_tokens; 0 ends it. Restarts the count."""
        with self._lock:
            self._cut_share, self._replies_seen = share, 0

    def prompt_wrapping(self, style: Literal["fence", "prose"] | None) -> None:
        """How prompt-mode JSON replies are wrapped: a ```json fence, prose around it, or nothing (None)."""
        self._wrapping = style

    def score_distribution(self, probs: Mapping[str, float] | None) -> None:
        """The model's probabilities over the score digits "0".."4" (None: peaked at the brain's score)."""
        self._distribution = None if probs is None else dict(probs)

    def prefix_cache(self, min_tokens: int | None = 1024, step_tokens: int = 128) -> None:
        """Cache prompt prefixes of at least `min_tokens` in steps of `step_tokens` (None: no caching); empties it."""
        with self._lock:
            self._cache = None if min_tokens is None else (min_tokens, step_tokens)
            self._seen_blocks.clear()

    # -- Batch API controls

    def batch_processing(self, seconds: float | None) -> None:
        """Batches created from now on complete `seconds` after creation (None: only on `end_batch`, `expire_batch`
        or a cancel). The end is noticed when the batch is next read."""
        with self._batch_lock:
            self._batch_processing_s = seconds

    def script_batch(self, *outcomes: BatchOutcome) -> None:
        """Outcomes for the next batched requests, in submission order across batches: a `ChatReply` (answered as
        the chat endpoint would), a `ChatFault` (an error-file line with its status) or `expired()`."""
        for outcome in outcomes:
            if not isinstance(outcome, ChatReply | ChatFault | BatchExpired):
                raise TypeError(
                    f"a batched request cannot {type(outcome).__name__}: a ChatReply, ChatFault or expired()"
                )
        with self._batch_lock:
            self._batch_queue.extend(outcomes)

    def fail_batch_call(self, call: BatchCall, *steps: ChatFault | Drop) -> None:
        """The next `call`s (upload, create, retrieve, content or cancel) get `steps`, one per call."""
        if call not in BATCH_CALLS:
            raise ValueError(f"no batch call {call!r}: one of {BATCH_CALLS}")
        with self._batch_lock:
            self._batch_call_faults[call].extend(steps)

    def end_batch(self, batch_id: str | None = None) -> None:
        """Complete `batch_id` (or every batch not yet ended) now, running every request."""
        self._end_now(batch_id, "completed")

    def expire_batch(self, batch_id: str | None = None) -> None:
        """End `batch_id` (or every batch not yet ended) as expired: unscripted requests get `batch_expired` lines."""
        self._end_now(batch_id, "expired")

    def batch(self, batch_id: str) -> dict[str, Any]:
        """The batch object as a read would answer it now (its end is noticed); KeyError if unknown."""
        with self._batch_lock:
            batch = self._batches[batch_id]
            self._advance(batch)
            return batch.wire()

    @property
    def batch_requests(self) -> list[BatchedChatRequest]:
        """The requests of every created batch, in submission order (`body` is each line's body)."""
        with self._batch_lock:
            return list(self._batch_requests)

    def batch_calls(self, call: BatchCall | None = None) -> list[ChatRequest]:
        """HTTP calls to the Batch API call `call` (None: any), in arrival order."""
        return [r for r in self.requests if (route := batch_route(r.method, r.path)) and call in (None, route[0])]

    def reset(self) -> None:
        """Back to brain replies: no script, outage, rate limit, mode, batch, file or recorded requests; an empty
        prefix cache; the default batch processing time."""
        with self._batch_lock:
            self._files.clear()
            self._batches.clear()
            self._batch_requests.clear()
            self._batch_queue.clear()
            for faults in self._batch_call_faults.values():
                faults.clear()
            self._batch_processing_s = DEFAULT_BATCH_PROCESSING_S
        with self._lock:
            self._queue.clear()
            self._outage = None
            self._rate = None
            self._accepted.clear()
            self._requests.clear()
            self._set_defaults()
        self.default = ChatReply()

    # -- observations

    @property
    def requests(self) -> list[ChatRequest]:
        """A snapshot of every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[ChatRequest]:
        """Requests to a chat completions route (any of the three)."""
        return [r for r in self.requests if r.route is not None]

    def statuses(self) -> list[int]:
        """The status answered to each request, in order (0 for a dropped connection)."""
        return [r.status for r in self.requests]

    def saw_guided_keys(self) -> set[str]:
        """vLLM's removed `guided_*` keys that any request carried (empty: none did)."""
        return {k for r in self.requests for k in r.guided_keys}

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> list[ChatRequest]:
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

    def _append(self, req: ChatRequest) -> None:
        with self._arrived:
            self._requests.append(req)
            self._arrived.notify_all()

    def _auth_ok(self, req: ChatRequest) -> bool:
        if not self.require_auth:
            return True
        bearer = req.headers.get("authorization", "")
        return bearer == f"Bearer {self.api_key}" or req.headers.get("api-key") == self.api_key

    def _refusal(self, req: ChatRequest) -> ChatFault | None:
        """The 400 this request gets before any step is taken (see the module doc), or None."""
        body = req.body
        if not isinstance(body, dict):
            return bad_request("We could not parse the JSON body of your request.")
        if req.route != "azure_deployment" and not isinstance(body.get("model"), str):
            return bad_request("you must provide a model parameter", "model")
        if not req.messages:
            return bad_request("[] is too short - 'messages'", "messages")
        top = body.get("top_logprobs")
        if top is not None and not body.get("logprobs"):
            return bad_request("top_logprobs requires logprobs to be true", "top_logprobs")
        if isinstance(top, int) and not 0 <= top <= MAX_TOP_LOGPROBS:
            return bad_request(f"top_logprobs must be at most {MAX_TOP_LOGPROBS}", "top_logprobs")
        if req.tools and self._no_tools:
            return bad_request("tools are not supported by this model", "tools")
        fmt = req.response_format
        if "response_format" in body and self._no_response_format:
            return bad_request("response_format is not supported by this model", "response_format")
        kind = (fmt or {}).get("type")
        if self._json_object_only and (kind == "json_schema" or req.structured_outputs is not None):
            return bad_request("This response_format type is unavailable now", "response_format")
        if kind == "json_object":
            if not any("json" in _text(m.get("content")).lower() for m in req.messages):
                return bad_request(
                    "'messages' must contain the word 'json' in some form, to use 'response_format' of type "
                    "'json_object'.",
                    "messages",
                )
        if kind == "json_schema":
            spec = (fmt or {}).get("json_schema")
            if not isinstance(spec, dict) or not spec.get("name"):
                return bad_request("Missing required parameter: 'response_format.json_schema.name'.", "response_format")
            if not isinstance(spec.get("schema"), dict):
                return bad_request("Missing required parameter: 'response_format.json_schema.schema'.")
            problem = _strict_schema_problem(spec["schema"]) if spec.get("strict") and self._strict_schemas else None
            if problem:
                name = spec["name"]
                return bad_request(f"Invalid schema for response_format '{name}': {problem}", "response_format")
        for tool in req.tools:
            function = tool.get("function") or {}
            if function.get("strict") and self._strict_schemas:
                problem = _strict_schema_problem(function.get("parameters") or {})
                if problem:
                    return bad_request(f"Invalid schema for function '{function.get('name')}': {problem}", "tools")
        return None

    def _record(self, req: ChatRequest) -> ChatStep:
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

    def _rate_headers(self) -> dict[str, str]:
        """The `x-ratelimit-*` request headers of a 200 while a rate limit is set."""
        with self._lock:
            if self._rate is None:
                return {}
            per_second = self._rate[0]
            now = time.monotonic()
            used = sum(1 for t in self._accepted if t > now - 1.0)
            reset = max(0.0, 1.0 - (now - self._accepted[0])) if self._accepted else 0.0
        return {
            "x-ratelimit-limit-requests": f"{per_second:g}",
            "x-ratelimit-remaining-requests": str(max(0, math.floor(per_second) - used)),
            "x-ratelimit-reset-requests": f"{round(reset * 1000)}ms",
        }

    def _completion(self, req: ChatRequest, step: ChatReply) -> dict[str, Any]:
        answer: str | dict[str, Any] | list[Any] = step.content if step.content is not None else self.brain(req)
        if self._distribution and isinstance(answer, dict) and isinstance(answer.get("score"), int):
            answer = {**answer, "score": int(max(self._distribution.items(), key=lambda dp: dp[1])[0])}
        mechanism = req.mechanism
        with self._lock:
            ignore = step.ignore_schema
            if mechanism != "prompt" and self._ignore_share > 0:
                self._structured_seen += 1
                ignore = ignore or _every(self._ignore_share, self._structured_seen)
            self._replies_seen += 1
            cut_now = step.cut or (self._cut_share > 0 and _every(self._cut_share, self._replies_seen))
            self._ids += 1
            completion_id = f"chatcmpl-fake{self._ids:08d}"
            cached = self._cached_tokens(req.prompt_text)
        as_tool = mechanism == "tools" and not ignore
        if ignore:
            text = _free_text(answer)
        else:
            text = answer if isinstance(answer, str) else json.dumps(answer)
            if mechanism == "prompt" and not isinstance(answer, str):
                text = _wrap(text, self._wrapping)
        finish = "stop"
        if as_tool:
            named = isinstance(req.tool_choice, dict)
            finish = "stop" if named else "tool_calls"
        limit = req.max_tokens
        completion_tokens = max(1, self._tokens(text))
        if cut_now:
            text, finish = text[: max(1, len(text) // 2)], "length"
            completion_tokens = limit if limit is not None else max(1, self._tokens(text))
        elif limit is not None and completion_tokens > limit:
            text, finish, completion_tokens = text[: int(limit * self._chars_per_token)], "length", limit
        message: dict[str, Any] = {"role": "assistant", "content": None if as_tool else text, "refusal": None}
        if as_tool:
            name = (req.tools[0].get("function") or {}).get("name", "")
            if isinstance(req.tool_choice, dict):
                name = (req.tool_choice.get("function") or {}).get("name", name)
            call_id = completion_id.replace("chatcmpl-", "call_")
            function = {"name": name, "arguments": text}
            message["tool_calls"] = [{"id": call_id, "type": "function", "function": function}]
        body = req.body if isinstance(req.body, dict) else {}
        k = body.get("top_logprobs") or 0
        logprobs = _logprobs(text, int(k), self._distribution) if body.get("logprobs") else None
        prompt_tokens = self._tokens(req.prompt_text)
        usage: dict[str, Any] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }
        for key, value in (step.usage or {}).items():
            if key == "cached_tokens":
                usage["prompt_tokens_details"]["cached_tokens"] = value
            else:
                usage[key] = value
        return {
            "id": completion_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": req.model or self.model,
            "system_fingerprint": "fp_fake",
            "service_tier": "default",
            "choices": [
                {"index": 0, "message": message, "finish_reason": step.finish_reason or finish, "logprobs": logprobs}
            ],
            "usage": usage,
        }

    def _cached_tokens(self, prompt: str) -> int:
        # Called with `_lock` held. Blocks of `step` tokens from the start are keyed by a running hash, so a block
        # matches only if everything before it matched too: the longest shared prefix, in whole steps.
        if self._cache is None:
            return 0
        min_tokens, step = self._cache
        step_chars = max(1, int(step * self._chars_per_token))
        running = hashlib.blake2b(digest_size=16)
        matched = 0
        for i in range(len(prompt) // step_chars):
            running.update(prompt[i * step_chars : (i + 1) * step_chars].encode())
            digest = running.digest()
            if digest in self._seen_blocks and matched == i:
                matched = i + 1
            self._seen_blocks.add(digest)
        cached = matched * step
        return cached if cached >= min_tokens else 0

    def _tokens(self, text: str) -> int:
        return math.ceil(len(text) / self._chars_per_token)

    def _batch_call_fault(self, call: BatchCall) -> ChatFault | Drop | None:
        with self._batch_lock:
            faults = self._batch_call_faults[call]
            return faults.popleft() if faults else None

    def _batch_call(self, call: BatchCall, item_id: str, req: ChatRequest) -> tuple[bytes, str]:
        """The answer (body, content type) to a Batch API call; raises `_BatchError`."""
        with self._batch_lock:
            if call == "upload":
                return json.dumps(self._upload(req)).encode(), "application/json"
            if call == "content":
                if item_id not in self._files:
                    raise _BatchError(404, f"No such File object: {item_id}")
                return self._files[item_id][2], "application/octet-stream"
            if call == "create":
                return json.dumps(self._create_batch(req).wire()).encode(), "application/json"
            batch = self._batches.get(item_id)
            if batch is None:
                raise _BatchError(404, f"No batch found with id '{item_id}'.")
            self._advance(batch)
            if call == "cancel" and batch.status in ("validating", "in_progress"):
                batch.status = "cancelling"  # ends (cancelled) on the next read
                batch.times["cancelling_at"] = int(time.time())
            return json.dumps(batch.wire()).encode(), "application/json"

    def _upload(self, req: ChatRequest) -> dict[str, Any]:
        fields = _multipart(req.headers.get("content-type", ""), req.raw)
        if "file" not in fields:
            raise _BatchError(400, "Missing required parameter: 'file'.", "file")
        purpose = fields.get("purpose", (None, b""))[1].decode()
        if purpose not in ("batch", "fine-tune", "assistants", "vision", "user_data", "evals"):
            raise _BatchError(400, f"Invalid value for 'purpose': {purpose!r}.", "purpose")
        filename, content = fields["file"][0] or "upload", fields["file"][1]
        self._batch_ids += 1
        file_id = f"file-fake{self._batch_ids:06d}"
        self._files[file_id] = (filename, purpose, content)
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(content),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }

    def _create_batch(self, req: ChatRequest) -> _ChatBatch:
        body = req.body if isinstance(req.body, dict) else {}
        file_id, endpoint = body.get("input_file_id"), body.get("endpoint")
        if endpoint != "/v1/chat/completions":
            raise _BatchError(
                400, f"Invalid value for 'endpoint': {endpoint!r}; this server batches /v1/chat/completions."
            )
        if body.get("completion_window") != "24h":
            raise _BatchError(400, "Invalid value for 'completion_window': only '24h' is supported.")
        if not isinstance(file_id, str) or file_id not in self._files:
            raise _BatchError(400, f"Invalid 'input_file_id': {file_id!r} is not an uploaded file.", "input_file_id")
        if self._files[file_id][1] != "batch":
            raise _BatchError(400, "The input file must be uploaded with purpose 'batch'.", "input_file_id")
        lines, errors = _batch_lines(self._files[file_id][2], endpoint)
        self._batch_ids += 1
        batch_id = f"batch_fake{self._batch_ids:06d}"
        entries: list[tuple[BatchedChatRequest, BatchOutcome | None]] = []
        for line in [] if errors else lines:
            raw = json.dumps(line["body"]).encode()
            one = BatchedChatRequest(
                "POST", endpoint, req.headers, raw, line["body"], req.at, 200, route="openai", batch_id=batch_id
            )
            one.custom_id = str(line["custom_id"])
            entries.append((one, self._batch_queue.popleft() if self._batch_queue else None))
            self._batch_requests.append(one)
        batch = _ChatBatch(
            batch_id,
            file_id,
            endpoint,
            int(time.time()),
            body.get("metadata"),
            entries,
            errors,
            self._batch_processing_s,
        )
        self._batches[batch_id] = batch
        return batch

    def _advance(self, batch: _ChatBatch) -> None:
        # Called with `_batch_lock` held, whenever a batch is read: that is when a due change is noticed.
        now = int(time.time())
        if batch.status == "validating":
            if batch.errors:
                batch.status, batch.times["failed_at"] = "failed", now
                return
            batch.status, batch.times["in_progress_at"] = "in_progress", now
            wait = batch.processing_s
            batch.ends_at = None if wait is None else time.monotonic() + wait
        if batch.status == "cancelling":
            self._finish(batch, "cancelled")
        elif batch.status == "in_progress" and batch.ends_at is not None and time.monotonic() >= batch.ends_at:
            self._finish(batch, "completed")

    def _end_now(self, batch_id: str | None, how: Literal["completed", "expired"]) -> None:
        with self._batch_lock:
            batches = [self._batches[batch_id]] if batch_id is not None else list(self._batches.values())
            for batch in batches:
                if batch.status == "validating":
                    self._advance(batch)
                if batch.status in ("in_progress", "cancelling"):
                    self._finish(batch, how)

    def _finish(self, batch: _ChatBatch, how: Literal["completed", "expired", "cancelled"]) -> None:
        # Requests run in submission order, so the prefix cache fills as it would on the chat endpoint.
        outputs, errors = [], []
        for one, scripted in batch.entries:
            outcome = scripted or (ChatReply() if how == "completed" else BatchExpired() if how == "expired" else None)
            if outcome is None:
                continue  # cancelled before it ran: no line
            line: dict[str, Any] = {"id": f"batch_req_fake_{one.custom_id}", "custom_id": one.custom_id}
            if isinstance(outcome, BatchExpired):
                message = "This request could not be executed before the completion window expired."
                errors.append({**line, "response": None, "error": {"code": "batch_expired", "message": message}})
                continue
            refusal = outcome if isinstance(outcome, ChatFault) else self._refusal(one)
            if refusal is not None:
                response = {
                    "status_code": refusal.status,
                    "request_id": line["id"],
                    "body": json.loads(_error_body(refusal)),
                }
                errors.append({**line, "response": response, "error": None})
                continue
            assert isinstance(outcome, ChatReply)
            body = self._completion(one, outcome)
            outputs.append(
                {**line, "response": {"status_code": 200, "request_id": line["id"], "body": body}, "error": None}
            )
        for kind, lines in (("output", outputs), ("error", errors)):
            if lines:
                self._batch_ids += 1
                file_id = f"file-fake{self._batch_ids:06d}"
                ordered = sorted(lines, key=lambda x: str(x["custom_id"]))  # not input order, as the API warns
                content = b"".join(json.dumps(x).encode() + b"\n" for x in ordered)
                self._files[file_id] = (f"{batch.id}_{kind}.jsonl", f"batch_{kind}", content)
                setattr(batch, f"{kind}_file_id", file_id)
        batch.completed, batch.failed = len(outputs), len(errors)
        batch.status = how
        batch.times[f"{how}_at"] = int(time.time())
        if how == "completed":
            batch.times["finalizing_at"] = batch.times["completed_at"]

    def _sleep(self, seconds: float) -> bool:
        """Wait `seconds` unless the server stops first; True if still running."""
        return not self._stopping.wait(seconds) if seconds > 0 else not self._stopping.is_set()


def _error_body(fault: ChatFault) -> bytes:
    if fault.body is not None:
        return fault.body
    error = {"message": fault.message or fault.error_type, "type": fault.error_type, "param": fault.param}
    return json.dumps({"error": {**error, "code": fault.code}}).encode()


def _make_handler(api: FakeChatCompletions) -> type[BaseHTTPRequestHandler]:
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
            req = ChatRequest(
                method=self.command,
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                raw=raw,
                body=body,
                at=time.monotonic(),
            )
            batch = batch_route(self.command, self.path)
            if batch is not None:
                api._append(req)
                self._batch(req, *batch)
                return
            route = chat_route(self.command, self.path)
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            if route is None or (route[0] == "azure_deployment" and not query.get("api-version")):
                api._append(req)
                message = (
                    f"Invalid URL ({self.command} {self.path.split('?')[0]})" if route is None else "Resource not found"
                )
                self._send(req, 404, _error_body(ChatFault(404, message, code="404" if route else None)))
                return
            req.route, req.deployment = route
            if not api._auth_ok(req):
                api._append(req)
                fault = ChatFault(401, "Incorrect API key provided.", code="invalid_api_key")
                self._send(req, 401, _error_body(fault))
                return
            refusal = api._refusal(req)
            if refusal is not None:
                api._append(req)
                self._send(req, refusal.status, _error_body(refusal))
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
                if isinstance(step, ChatFault):
                    self._send(req, step.status, _error_body(step), dict(step.headers))
                    return
                self._send(req, 200, json.dumps(api._completion(req, step)).encode(), api._rate_headers())
            except OSError:
                # The client gave up (timeout) and closed the connection while we were "thinking".
                self.close_connection = True

        def _batch(self, req: ChatRequest, call: BatchCall, item_id: str) -> None:
            if not api._auth_ok(req):
                fault = ChatFault(401, "Incorrect API key provided.", code="invalid_api_key")
                self._send(req, 401, _error_body(fault))
                return
            step = api._batch_call_fault(call)
            if step is not None and not api._sleep(step.delay_s):
                self.close_connection = True
                return
            try:
                if isinstance(step, Drop):
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if isinstance(step, ChatFault):
                    self._send(req, step.status, _error_body(step), dict(step.headers))
                    return
                try:
                    body, content_type = api._batch_call(call, item_id, req)
                except _BatchError as e:
                    self._send(req, e.fault.status, _error_body(e.fault))
                    return
                self._send(req, 200, body, content_type=content_type)
            except OSError:
                self.close_connection = True

        def _send(
            self,
            req: ChatRequest,
            status: int,
            body: bytes,
            headers: dict[str, str] | None = None,
            content_type: str = "application/json",
        ) -> None:
            req.status = status
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.send_header("x-request-id", f"req_fake_{id(req):x}")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()

    return Handler


__all__ = [
    "API_KEY",
    "BATCH_CALLS",
    "DEFAULT_MODEL",
    "GUIDED_KEYS",
    "BatchCall",
    "BatchExpired",
    "BatchOutcome",
    "BatchedChatRequest",
    "ChatFault",
    "ChatReply",
    "ChatRequest",
    "ChatStep",
    "Drop",
    "FakeChatCompletions",
    "azure_rate_limited",
    "bad_request",
    "batch_route",
    "chat_route",
    "cut",
    "default_brain",
    "expired",
    "find_section",
    "ignored",
    "malformed",
    "rate_limited",
    "server_error",
    "slow",
    "tokenize",
    "unavailable",
]
