"""Judging a labelled set through the service's guard: order, progress, spend, redaction and failures, with the
offline judge and with the real client against the fake Messages API."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from types import ModuleType

import pytest

from monitor.calibration.labels import LabelledPair
from monitor.calibration.run import (
    FAILED_PROBES_BEFORE_GIVING_UP,
    Spend,
    judge_pairs,
    outage_outlasts_patience,
    pair_event,
)
from monitor.judges.base import JudgeFailure
from monitor.judges.context_window import ContextWindow
from monitor.judges.lexical import LexicalJudge
from monitor.judges.rubric import RubricJudge
from monitor.judging.guarded_judge import GuardedJudge, Judgeable, JudgeOutcome
from monitor.judging.settings import FlowSettings
from monitor.privacy.redactor import build_redactor
from monitor.privacy.settings import RedactionSettings
from schemas.events import ConversationEvent, Turn
from schemas.usage import Usage
from tests.fake_messages_api import FakeMessagesAPI, malformed, overloaded
from tests.monitor.judges.conftest import FAST, QUESTION, TIGHT, judge_settings

IRRELEVANT = "We sell gift cards."


def pair(line: int, answer: str, label: float = 4, question: str = QUESTION) -> LabelledPair:
    """A labelled pair on the rubric scale."""
    return LabelledPair(line=line, question=question, answer=answer, label=label, label_unit=label / 4, id=f"p{line}")


async def test_outcomes_keep_input_order_and_progress_counts_up() -> None:
    """Judged concurrently, the outcomes come back in input order; progress is told after each pair."""
    pairs = [pair(n, TIGHT if n % 2 else IRRELEVANT) for n in range(1, 8)]
    seen: list[tuple[int, int]] = []
    run = await judge_pairs(
        pairs, LexicalJudge(), FlowSettings(judge_concurrency=3), progress=lambda d, t: seen.append((d, t))
    )
    assert [o.pair.line for o in run.outcomes] == list(range(1, 8))
    assert [o.judgement.score if o.judgement else None for o in run.outcomes] == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    assert seen == [(d, 7) for d in range(1, 8)]
    assert run.judge.method == "lexical" and run.failed == () and len(run.scored) == 7
    assert run.spend == Spend(calls=7, cost_usd=0.0)


async def test_text_is_redacted_before_the_judge_sees_it(fake_messages_api: FakeMessagesAPI) -> None:
    """With a redactor, the request carries [EMAIL] where the labelled question had an address, as in the service."""
    judge = RubricJudge(judge_settings(fake_messages_api, "rubric").judge, backoff=FAST)
    asked = "When did order A17 ship to jane.doe@example.com?"
    run = await judge_pairs(
        [pair(1, TIGHT, question=asked)], judge, FlowSettings(), build_redactor(RedactionSettings())
    )
    [request] = fake_messages_api.message_requests
    assert request.section("user_question") == "When did order A17 ship to [EMAIL]?"
    assert run.outcomes[0].pair.question == asked  # the report shows the pair as labelled


async def test_a_failed_call_is_a_failure_outcome_and_its_tokens_are_spent(fake_messages_api: FakeMessagesAPI) -> None:
    """An invalid reply and an invalid correction leave the pair without a score, with the reason; their tokens still
    count."""
    fake_messages_api.script(malformed(), malformed())
    judge = RubricJudge(judge_settings(fake_messages_api, "rubric", judge_max_retries=0).judge, backoff=FAST)
    run = await judge_pairs([pair(1, TIGHT), pair(2, TIGHT)], judge, FlowSettings(judge_concurrency=1))
    [failed] = run.failed
    assert failed.pair.line == 1 and failed.judgement is None
    assert [o.pair.line for o in run.scored] == [2]
    assert (
        run.spend.calls == 2
        and run.spend.input_tokens > 0
        and run.spend.cost_usd is not None
        and run.spend.cost_usd > 0
    )


def test_spend_without_a_price_is_unknown_not_zero() -> None:
    """One call with no price makes the whole cost unknown (None), while tokens keep adding up."""
    spend = (
        Spend().plus(Usage(input_tokens=10, output_tokens=2, cost_usd=0.5)).plus(Usage(input_tokens=5, cost_usd=None))
    )
    assert spend == Spend(calls=2, input_tokens=15, output_tokens=2, cost_usd=None)
    assert spend.tokens == 17


async def test_a_judge_that_stays_down_ends_in_failures_not_a_hang(fake_messages_api: FakeMessagesAPI) -> None:
    """Every call answered 529: the circuit opens, its probes fail, and the pairs are given up as failures."""
    fake_messages_api.always(overloaded())
    settings = judge_settings(fake_messages_api, "rubric", judge_max_retries=0)
    judge = RubricJudge(settings.judge, backoff=FAST)
    flow = FlowSettings(judge_concurrency=2, breaker_threshold=2, breaker_cooldown_s=0.01, breaker_max_cooldown_s=0.05)
    run = await judge_pairs([pair(n, TIGHT) for n in range(1, 7)], judge, flow)
    assert run.scored == () and len(run.failed) == 6
    reasons = {o.verdict.reason for o in run.failed if isinstance(o.verdict, JudgeFailure)}
    assert reasons == {"unavailable"}
    assert any("gave up waiting" in o.verdict.detail for o in run.failed if isinstance(o.verdict, JudgeFailure))


def test_patience_ends_after_the_probes_following_the_first_open_fail() -> None:
    """The first open plus FAILED_PROBES_BEFORE_GIVING_UP failed probes is when waiting stops, not before."""
    assert not outage_outlasts_patience(FAILED_PROBES_BEFORE_GIVING_UP)
    assert outage_outlasts_patience(FAILED_PROBES_BEFORE_GIVING_UP + 1)


KETTLE_CONTEXT = (
    Turn("user", "Which kettles ship to Spain?"),
    Turn("assistant", "The blue and the steel kettle."),
    Turn("user", "Nice. Mail me the list at jane.doe@example.com."),
    Turn("assistant", "Anything else?"),
)


def follow_up(line: int = 1) -> LabelledPair:
    """A labelled follow-up: relevant only through its earlier turns, with the assistant's brief."""
    return LabelledPair(
        line=line,
        question="How long does the second one take?",
        answer="About four days.",
        label=4,
        label_unit=1.0,
        id=f"f{line}",
        context=KETTLE_CONTEXT,
        system="You help the customers of a kettle shop.",
        tags=("multi_turn",),
    )


class _Recorder:
    """The events `GuardedJudge.judge_event` is given, in the order it is given them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> None:
        self.events: list[ConversationEvent] = []
        seen = self.events

        class Recording(GuardedJudge):
            async def judge_event(self, event: Judgeable, still_wanted: Callable[[], bool]) -> JudgeOutcome | None:
                assert isinstance(event, ConversationEvent)
                seen.append(event)
                return await super().judge_event(event, still_wanted)

        monkeypatch.setattr(module, "GuardedJudge", Recording)


def test_a_pairs_event_carries_its_context_system_and_turn() -> None:
    """A multi-turn case becomes a chat event with its earlier turns, brief and turn index; a first-turn case stays a
    flat event with none."""
    now = datetime(2026, 12, 1, tzinfo=UTC)
    event = pair_event(follow_up(), now)
    assert (event.context, event.system, event.turn, event.shape) == (
        KETTLE_CONTEXT,
        "You help the customers of a kettle shop.",
        2,
        "chat",
    )
    flat = pair_event(pair(3, TIGHT), now)
    assert (flat.context, flat.system, flat.turn, flat.shape) == ((), "", 0, "flat")


async def test_the_judge_receives_the_context_windowed_then_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The event handed to the guarded judge carries the case's context cut to the window (newest turns kept), with
    personal data in it redacted, the brief and the turn index; the pair in the outcome keeps the text as labelled."""
    import monitor.calibration.run as run_module

    recorder = _Recorder(monkeypatch, run_module)
    window = ContextWindow(turns=3, max_chars=8_000, system=True)
    run = await judge_pairs(
        [follow_up(1), pair(2, TIGHT)],
        LexicalJudge(),
        FlowSettings(judge_concurrency=1),
        build_redactor(RedactionSettings()),
        window=window,
    )
    got = {e.event_id: e for e in recorder.events}
    assert set(got) == {"f1", "p2"}
    judged = got["f1"]
    assert judged.context == (  # the oldest turn is over the window; the address is redacted before the judge
        Turn("assistant", "The blue and the steel kettle."),
        Turn("user", "Nice. Mail me the list at [EMAIL]."),
        Turn("assistant", "Anything else?"),
    )
    assert (judged.system, judged.turn, judged.shape) == ("You help the customers of a kettle shop.", 2, "chat")
    assert (got["p2"].context, got["p2"].system, got["p2"].turn) == ((), "", 0)
    assert run.outcomes[0].pair.context == KETTLE_CONTEXT  # the report shows the case as labelled
