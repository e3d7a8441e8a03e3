"""Judging a labelled set through the service's guard: order, progress, spend, redaction and failures, with the
offline judge and with the real client against the fake Messages API."""

from __future__ import annotations

from monitor.calibration.labels import LabelledPair
from monitor.calibration.run import FAILED_PROBES_BEFORE_GIVING_UP, Spend, judge_pairs, outage_outlasts_patience
from monitor.judges.base import JudgeFailure
from monitor.judges.lexical import LexicalJudge
from monitor.judges.rubric import RubricJudge
from monitor.judging.settings import FlowSettings
from monitor.privacy.redactor import build_redactor
from monitor.privacy.settings import RedactionSettings
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
