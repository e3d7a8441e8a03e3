"""The statements judge against the fake Messages API, through the real `anthropic` client."""

from __future__ import annotations

from typing import Any

import pytest

from monitor.judges.statements import SYSTEM_PROMPT, StatementsJudge
from schemas.errors import JudgeReplyInvalid
from tests.fake_messages_api import FakeMessagesAPI, Reply, mismatched_verdicts
from tests.monitor.judges.conftest import PADDED, QUESTION, TIGHT, MakeJudge, judge_settings


def reply(statements: list[str], verdicts: list[tuple[str, str]], **extra: Any) -> Reply:
    """A statements reply with `statements`, (verdict, reason) pairs and any extra top-level keys."""
    return Reply({"statements": statements, "verdicts": [{"verdict": v, "reason": r} for v, r in verdicts], **extra})


async def test_padded_answer_scores_one_third_and_tight_answer_scores_one(make_judge: MakeJudge) -> None:
    """The padded answer scores 1/3 with verdicts and reasons per statement; the tight one scores 1."""
    judge = make_judge("statements")
    padded = await judge.judge(QUESTION, PADDED)
    assert padded.score == pytest.approx(1 / 3) and padded.raw_score == pytest.approx(1 / 3)
    assert padded.statements == (
        "Thanks for getting in touch.",
        "We also sell gift cards.",
        "Order A17 shipped on 3 March.",
    )
    assert padded.verdicts == ("no", "no", "yes")
    assert padded.verdict_reasons[2] == "" and all(padded.verdict_reasons[:2])
    assert padded.reasoning.startswith("1 of 3 statements address the question")
    assert "We also sell gift cards." in padded.reasoning

    tight = await judge.judge(QUESTION, TIGHT)
    assert (tight.score, tight.raw_score) == (1.0, 1.0)
    assert tight.statements == (TIGHT,) and tight.verdicts == ("yes",)


async def test_idk_counts_as_addressing_the_question(fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge) -> None:
    """An idk verdict counts as addressing the question, and each verdict's reason is kept."""
    fake_messages_api.script(
        reply(
            ["A17 shipped.", "Shipping is usually fast.", "We sell gift cards."],
            [("yes", ""), ("idk", "background"), ("no", "upsell")],
        )
    )
    j = await make_judge("statements").judge(QUESTION, PADDED)
    assert j.score == pytest.approx(2 / 3)
    assert j.verdicts == ("yes", "idk", "no")
    assert j.verdict_reasons == ("", "background", "upsell")


async def test_strict_mode_zeroes_a_share_below_the_threshold_and_keeps_the_raw_share(make_judge: MakeJudge) -> None:
    """Strict mode zeroes a share below the threshold, keeps the raw share and says so in the reasoning."""
    judge = make_judge("statements", statements_strict_threshold=0.5)
    padded = await judge.judge(QUESTION, PADDED)
    assert padded.score == 0.0
    assert padded.raw_score == pytest.approx(1 / 3)
    assert "strict mode" in padded.reasoning
    tight = await judge.judge(QUESTION, TIGHT)
    assert tight.score == 1.0


async def test_strict_mode_keeps_a_share_equal_to_the_threshold(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge
) -> None:
    """Strict mode keeps a share equal to the threshold unchanged."""
    fake_messages_api.script(reply(["A17 shipped.", "Gift cards."], [("yes", ""), ("no", "upsell")]))
    j = await make_judge("statements", statements_strict_threshold=0.5).judge(QUESTION, PADDED)
    assert j.score == 0.5 and "strict mode" not in j.reasoning


async def test_request_uses_the_statements_schema_and_cached_system_prompt(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge
) -> None:
    """The request sends the cached system prompt and the statements schema with yes/no/idk verdicts."""
    await make_judge("statements").judge(QUESTION, PADDED)
    [req] = fake_messages_api.message_requests
    assert req.body["system"] == [{"type": "text", "text": SYSTEM_PROMPT, "cache_control": {"type": "ephemeral"}}]
    schema = req.schema
    assert schema is not None and set(schema["properties"]) == {"statements", "verdicts"}
    verdict_schema = schema["$defs"]["StatementVerdict"]
    assert verdict_schema["properties"]["verdict"]["enum"] == ["yes", "no", "idk"]
    assert req.section("assistant_response") == PADDED


@pytest.mark.parametrize(
    "bad",
    [
        reply([], []),
        reply(["A17 shipped.", "Gift cards."], [("yes", "")]),
        reply(["A17 shipped."], [("yes", ""), ("no", "extra")]),
        reply(["A17 shipped."], [("maybe", "")]),
        reply(["Gift cards."], [("no", "")]),
        reply(["  "], [("yes", "")]),
        reply(["A17 shipped."], [("yes", "")], score=1),
        Reply({"statements": ["A17 shipped."], "verdicts": ["yes"]}),
        Reply("statements: A17 shipped. verdict: yes"),
    ],
    ids=[
        "zero-statements",
        "fewer-verdicts",
        "more-verdicts",
        "unknown-verdict",
        "no-without-reason",
        "blank-statement",
        "extra-key",
        "bare-verdicts",
        "not-json",
    ],
)
async def test_invalid_replies_raise_after_their_one_corrective_retry(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge, bad: Reply
) -> None:
    """Each kind of invalid statements reply raises JudgeReplyInvalid after exactly two requests (the reply and its
    correction), even with two retries left for transient errors."""
    fake_messages_api.always(bad)
    judge = make_judge("statements", judge_max_retries=2)
    with pytest.raises(JudgeReplyInvalid):
        await judge.judge(QUESTION, PADDED)
    assert len(fake_messages_api.message_requests) == 2


async def test_mismatched_verdicts_then_good_reply_is_retried(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge
) -> None:
    """A reply with fewer verdicts than statements is retried and the next, good reply is used."""
    fake_messages_api.script(reply(["A17 shipped.", "Gift cards."], [("yes", "")]))  # then the brain
    j = await make_judge("statements").judge(QUESTION, PADDED)
    assert j.score == pytest.approx(1 / 3)
    assert len(fake_messages_api.message_requests) == 2


async def test_mismatch_error_says_why(fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge) -> None:
    """The error for mismatched verdicts says how many verdicts came for how many statements."""
    fake_messages_api.always(mismatched_verdicts())
    with pytest.raises(JudgeReplyInvalid, match="1 verdicts for 2 statements"):
        await make_judge("statements", judge_max_retries=0).judge(QUESTION, PADDED)


async def test_empty_response_has_zero_statements_and_sends_nothing(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge
) -> None:
    """A blank response scores 0 with no statements and no request."""
    j = await make_judge("statements").judge(QUESTION, "  \n ")
    assert (j.score, j.raw_score, j.statements, j.verdicts) == (0.0, 0.0, (), ())
    assert fake_messages_api.requests == []


async def test_usage_and_cost_are_recorded(make_judge: MakeJudge) -> None:
    """A priced model's judgement records input, output and cache-write tokens and a positive cost."""
    j = await make_judge("statements", judge_model="claude-haiku-5-5").judge(QUESTION, PADDED)
    assert j.usage.input_tokens > 0 and j.usage.output_tokens > 0 and j.usage.cache_write_tokens > 0
    assert j.usage.cost_usd is not None and j.usage.cost_usd > 0


def test_judge_id_covers_the_strict_threshold_and_differs_from_rubric(fake_messages_api: FakeMessagesAPI) -> None:
    """The judge id starts with statements- and changes with the strict threshold and the model."""

    def jid(**overrides: object) -> str:
        return StatementsJudge(judge_settings(fake_messages_api, "statements", **overrides).judge).info.judge_id

    base = jid()
    assert base.startswith("statements-") and base == jid()
    assert jid(statements_strict_threshold=0.5) != base
    assert jid(statements_strict_threshold=0.5) != jid(statements_strict_threshold=0.6)
    assert jid(judge_model="claude-sonnet-5-5") != base
    info = StatementsJudge(judge_settings(fake_messages_api, "statements").judge).info
    assert (info.method, info.heuristic) == ("statements", False)
