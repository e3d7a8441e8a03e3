"""What the two LLM judges share: identity, the empty-response rule, the prompt and the call."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar, Generic, TypeVar, Unpack, cast

from pydantic import BaseModel

from monitor.judges.base import JudgeInfo, Judgement, make_judge_id
from monitor.judges.cache_minimums import PrefixCheck, warn_if_uncacheable
from monitor.judges.judge_client import ClientOptions, JudgeClient
from monitor.judges.prompts import CONTEXT_TEMPLATES, USER_TEMPLATE, user_message
from monitor.judges.providers.base import JudgeRequest
from monitor.judges.settings import JudgeSettings, StructuredMode
from monitor.judges.structured_output import id_output_config, parse_reply
from schemas.events import Turn
from schemas.usage import Usage

R = TypeVar("R", bound=BaseModel)

# The pair the structured-output probe judges: plainly relevant, short, and free of anything a model might refuse.
PROBE_QUESTION = "Which kettles ship to Spain?"
PROBE_RESPONSE = "The blue kettle and the steel kettle both ship to Spain."

EMPTY_REASONING = "empty response: nothing that could address the question (scored 0 without calling the model)"


class LLMJudge(Generic[R]):
    """Base of the rubric and statements judges: subclasses give the method, system prompt, reply model and
    the mapping from a validated reply to a `Judgement`.

    A judge sends through a ready `client` built for its `settings`, or through a `JudgeClient` it builds (and
    closes) from `options` (`backoff`, `http_client`, `provider`)."""

    method: ClassVar[str]
    system_prompt: ClassVar[str]
    reply_model: ClassVar[type[BaseModel]]

    def __init__(
        self,
        settings: JudgeSettings,
        *,
        client: JudgeClient | None = None,
        **options: Unpack[ClientOptions],
    ) -> None:
        if client is not None and options:
            raise TypeError(f"a judge takes a ready JudgeClient or options to build one, not both: {list(options)}")
        if client is not None and client.settings != settings:
            # The judge id names the settings' model and limits: a client for other settings would make it lie.
            raise ValueError("the JudgeClient was built for other judge settings than the judge's")
        self.settings = settings
        self._owns_client = client is None
        self._client = client if client is not None else JudgeClient(settings, **options)
        self._info = JudgeInfo(
            method=self.method,
            model=settings.model,
            judge_id=make_judge_id(self.method, settings.model, self.prompt_template(), self.params()),
            heuristic=False,
            provider=settings.provider,
        )
        # The system prompt is the whole cached prefix (no tools precede it): say so at start-up if it is too short.
        # Only where requests mark a prefix (Anthropic); OpenAI-compatible servers cache prefixes by themselves.
        self.prefix_check: PrefixCheck | None = (
            warn_if_uncacheable(self.method, self.system_prompt, settings.model)
            if self._client.provider.marks_cache
            else None
        )

    @property
    def info(self) -> JudgeInfo:
        """Identity stored on every row."""
        return self._info

    @property
    def stats(self) -> Counter[str]:
        """Attempt, retry, give-up, invalid-reply and token counters of this judge (see `JudgeClient`)."""
        return self._client.stats

    @property
    def rate_limited(self) -> int:
        """429 responses met so far, retried ones included."""
        return self._client.stats["error.rate_limited"]

    @property
    def reads_context(self) -> bool:
        """Whether any context can reach the model: earlier turns (`context_turns` > 0) or the system instructions."""
        return self.settings.context_turns > 0 or self.settings.context_system

    def prompt_template(self) -> str:
        """Everything the model is told apart from the judged text: system prompt, user templates, schema."""
        schema = json.dumps(id_output_config(self.reply_model, self.settings.provider), sort_keys=True)
        user = USER_TEMPLATE
        if self.reads_context:
            user += f"\n\n---\n{CONTEXT_TEMPLATES}"
        return f"{self.system_prompt}\n\n---\n{user}\n\n---\n{schema}"

    def params(self) -> dict[str, Any]:
        """Parameters that change the judgement and so belong in the judge id (the provider among them, so two
        providers serving one model name never share a verdict or a baseline). The context window is among them
        only when context can reach the model: a judge that reads none sends the same requests whatever its cap."""
        base: dict[str, Any] = {
            "max_tokens": self.settings.max_tokens,
            "max_input_chars": self.settings.max_input_chars,
        }
        if self.reads_context:
            window = self.settings.context_window()
            base["context"] = {"turns": window.turns, "max_chars": window.max_chars, "system": window.system}
        return {**base, **self.settings.identity()}

    def context_of(self, context: Sequence[Turn], system: str) -> tuple[tuple[Turn, ...], str]:
        """What of `context` and `system` this judge reads: the newest `context_turns` turns (none at 0) and the
        system instructions if `context_system`. The caller has cut them to the window already (the pipeline does,
        once, before redaction); this keeps a judge that reads no context from ever sending any."""
        turns = self.settings.context_turns
        kept = tuple(context[-turns:]) if turns else ()
        return kept, system if self.settings.context_system else ""

    @property
    def client(self) -> JudgeClient:
        """The client (with its retry policy and provider) this judge sends through."""
        return self._client

    def without_call(self, question: str, response: str) -> Judgement | None:
        """The verdict that needs no model call (a blank response scores 0), else None."""
        if not response.strip():
            return Judgement(score=0.0, raw_score=0.0, reasoning=EMPTY_REASONING, usage=Usage(cost_usd=0.0))
        return None

    def request(self, question: str, response: str, *, context: Sequence[Turn] = (), system: str = "") -> JudgeRequest:
        """The request judging this pair, after the earlier turns and system instructions it reads (a fresh section
        code each time)."""
        turns, instructions = self.context_of(context, system)
        user = user_message(question, response, self.settings.max_input_chars, context=turns, system=instructions)
        return JudgeRequest(system=self.system_prompt, user=user, reply_model=self.reply_model)

    def request_body(
        self,
        question: str,
        response: str,
        mode: StructuredMode | None = None,
        *,
        context: Sequence[Turn] = (),
        system: str = "",
    ) -> dict[str, Any]:
        """The wire body judging this pair (with its context) in `mode` (the client's chosen mode, else the
        provider's first), as the provider sends it and a batch line carries it."""
        chosen = mode or self._client.mode or self._client.provider.modes[0]
        return self._client.provider.body(self.request(question, response, context=context, system=system), chosen)

    def parse(self, text: str) -> R:
        """The reply `text` validated as this judge's reply model; raises `JudgeReplyInvalid`."""
        return cast(R, parse_reply(self.reply_model, text))

    async def judge(self, question: str, response: str, *, context: Sequence[Turn] = (), system: str = "") -> Judgement:
        """Score one pair, read with the earlier turns and system instructions given; raises `JudgeError` (never a
        made-up score)."""
        verdict = self.without_call(question, response)
        if verdict is not None:
            return verdict
        probe = self.request(PROBE_QUESTION, PROBE_RESPONSE) if self._client.mode is None else None
        request = self.request(question, response, context=context, system=system)
        sent = await self._client.send(request, parse=self.parse, probe=probe)
        return self.to_judgement(sent.value, sent.usage, sent.level_probabilities)

    def to_judgement(self, reply: R, usage: Usage, levels: tuple[float, ...] | None = None) -> Judgement:
        """The `Judgement` for a validated reply (`levels`: the rubric levels' probabilities, where given)."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """Close the API client this judge built (a ready one passed in is its owner's to close)."""
        if self._owns_client:
            await self._client.aclose()
