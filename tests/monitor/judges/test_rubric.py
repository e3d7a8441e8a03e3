"""The rubric judge against the fake Messages API, through the real `anthropic` client."""

from __future__ import annotations

import pytest

from monitor.judges.pricing import DEFAULT_PRICES
from monitor.judges.rubric import SYSTEM_PROMPT, RubricJudge
from schemas.errors import JudgeReplyInvalid
from tests.fake_messages_api import API_KEY, FakeMessagesAPI, Reply, malformed, out_of_range_score
from tests.monitor.judges.conftest import PADDED, QUESTION, TIGHT, MakeJudge, judge_settings


@pytest.mark.parametrize("raw", [0, 1, 2, 3, 4])
async def test_score_is_raw_over_four_and_reasoning_is_kept(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge, raw: int
) -> None:
    """The score is the raw 0..4 score over four, with the reasoning kept and no statements."""
    fake_messages_api.script(Reply({"reasoning": f"scored {raw} because of X.", "score": raw}))
    j = await make_judge("rubric").judge(QUESTION, TIGHT)
    assert j.raw_score == raw
    assert j.score == raw / 4
    assert j.reasoning == f"scored {raw} because of X."
    assert j.statements == () and j.verdicts == ()


async def test_tight_answer_outscores_padded_one_with_the_default_brain(make_judge: MakeJudge) -> None:
    """With the default brain the tight answer scores 4 of 4 and the padded one 1 of 4."""
    judge = make_judge("rubric")
    tight = await judge.judge(QUESTION, TIGHT)
    padded = await judge.judge(QUESTION, PADDED)
    assert (tight.raw_score, tight.score) == (4, 1.0)
    assert (padded.raw_score, padded.score) == (1, 0.25)


async def test_request_shape_cached_system_prompt_schema_and_sections(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge
) -> None:
    """The request carries model, max_tokens, cached system prompt, strict schema, sections and API key."""
    judge = make_judge("rubric", judge_model="claude-sonnet-5-5", judge_max_tokens=333)
    await judge.judge(QUESTION, TIGHT)
    [req] = fake_messages_api.message_requests
    body = req.body
    assert body["model"] == "claude-sonnet-5-5"
    assert body["max_tokens"] == 333
    assert body["system"] == [{"type": "text", "text": SYSTEM_PROMPT, "cache_control": {"type": "ephemeral"}}]
    assert [m["role"] for m in body["messages"]] == ["user"]
    fmt = body["output_config"]["format"]
    assert fmt["type"] == "json_schema"
    assert set(fmt["schema"]["properties"]) == {"reasoning", "score"}
    assert fmt["schema"]["additionalProperties"] is False
    assert req.section("user_question") == QUESTION
    assert req.section("assistant_response") == TIGHT
    assert QUESTION not in req.system_text and TIGHT not in req.system_text
    assert req.headers["authorization"] == f"Bearer {API_KEY}"


async def test_malformed_then_good_reply_is_retried_and_usage_is_summed(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge
) -> None:
    """A malformed reply is retried, and both attempts' tokens and their cost are summed into the usage."""
    fake_messages_api.script(
        Reply(
            "{not json",
            usage={
                "input_tokens": 100,
                "output_tokens": 10,
                "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 50,
            },
        ),
        Reply(
            {"reasoning": "On topic.", "score": 3},
            usage={
                "input_tokens": 200,
                "output_tokens": 20,
                "cache_read_input_tokens": 50,
                "cache_creation_input_tokens": 0,
            },
        ),
    )
    judge = make_judge("rubric", judge_model="claude-haiku-5-5")
    j = await judge.judge(QUESTION, TIGHT)
    assert len(fake_messages_api.message_requests) == 2
    assert j.raw_score == 3
    u = j.usage
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens) == (300, 30, 50, 50)
    assert u.cost_usd == pytest.approx(DEFAULT_PRICES["claude-haiku-5-5"].cost(300, 30, 50, 50))
    assert (
        judge.stats["error.invalid_reply"] == 1 and judge.stats["retry.invalid_reply"] == 1 and judge.stats["ok"] == 1
    )


async def test_cost_is_none_for_a_model_without_a_price(make_judge: MakeJudge) -> None:
    """A model without a price gets cost None while its tokens are still counted."""
    j = await make_judge("rubric", judge_model="claude-unpriced-test-model").judge(QUESTION, TIGHT)
    assert j.usage.cost_usd is None
    assert j.usage.input_tokens > 0 and j.usage.output_tokens > 0


async def test_second_call_reads_the_cached_system_prefix(make_judge: MakeJudge) -> None:
    """The second call reads the system prefix that the first call wrote to the prompt cache."""
    judge = make_judge("rubric")
    first = await judge.judge(QUESTION, TIGHT)
    second = await judge.judge(QUESTION, PADDED)
    assert first.usage.cache_write_tokens > 0 and first.usage.cache_read_tokens == 0
    assert second.usage.cache_read_tokens == first.usage.cache_write_tokens and second.usage.cache_write_tokens == 0


@pytest.mark.parametrize(
    "bad",
    [
        "{not json",
        {"reasoning": "Too good.", "score": 5},
        {"reasoning": "Below zero.", "score": -1},
        {"reasoning": "Half.", "score": 2.5},
        {"reasoning": "As a string.", "score": "4"},
        {"reasoning": "   ", "score": 2},
        {"score": 2},
        "",
    ],
    ids=["malformed", "above-4", "below-0", "fractional", "string", "blank-reasoning", "no-reasoning", "empty"],
)
@pytest.mark.parametrize("retries", [0, 2])
async def test_persistently_invalid_reply_raises_after_its_one_corrective_retry(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge, bad: object, retries: int
) -> None:
    """A persistently invalid rubric reply raises JudgeReplyInvalid after exactly two requests (the reply and its
    one correction), whatever the retry budget for transient errors."""
    fake_messages_api.always(Reply(bad))  # type: ignore[arg-type]
    judge = make_judge("rubric", judge_max_retries=retries)
    with pytest.raises(JudgeReplyInvalid) as exc:
        await judge.judge(QUESTION, TIGHT)
    assert exc.value.reason == "invalid_reply"
    assert len(fake_messages_api.message_requests) == 2
    assert "after a corrective retry" in str(exc.value)
    assert judge.stats["gave_up.invalid_reply"] == 1


async def test_fault_helpers_give_invalid_replies(fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge) -> None:
    """The malformed and out-of-range helper replies are both rejected: the second is the corrective retry's reply,
    so the call ends invalid after two requests instead of reaching a third."""
    fake_messages_api.script(malformed(), out_of_range_score())
    with pytest.raises(JudgeReplyInvalid, match="score"):
        await make_judge("rubric", judge_max_retries=2).judge(QUESTION, TIGHT)
    assert len(fake_messages_api.message_requests) == 2


async def test_reply_cut_off_at_max_tokens_is_invalid_and_retried(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge
) -> None:
    """A reply cut off at max_tokens is invalid and retried."""
    fake_messages_api.script(
        Reply('{"reasoning": "On top', stop_reason="max_tokens"), Reply({"reasoning": "Fine.", "score": 4})
    )
    j = await make_judge("rubric").judge(QUESTION, TIGHT)
    assert j.raw_score == 4
    assert len(fake_messages_api.message_requests) == 2


@pytest.mark.parametrize("response", ["", "   ", "\n\t \n"])
async def test_empty_response_scores_zero_without_calling_the_api(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge, response: str
) -> None:
    """A blank response scores 0 as an empty response, without calling the API."""
    j = await make_judge("rubric").judge(QUESTION, response)
    assert (j.score, j.raw_score) == (0.0, 0.0)
    assert "empty response" in j.reasoning
    assert j.statements == ()
    assert fake_messages_api.requests == []


async def test_response_repeating_the_question_is_not_relevant(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge
) -> None:
    """A response that only repeats the question scores 0, as the rubric in the system prompt says."""
    j = await make_judge("rubric").judge(QUESTION, QUESTION)
    assert j.score == 0.0
    # ...and the model is told so, with the rubric placing it at 0.
    system = fake_messages_api.message_requests[0].system_text
    assert "only repeats or rephrases the question without answering it is not relevant: score 0" in system


async def test_long_question_and_response_are_truncated_with_a_visible_marker(
    fake_messages_api: FakeMessagesAPI, make_judge: MakeJudge
) -> None:
    """An over-long question and response are cut to the input limit with a visible marker, ends kept."""
    question = "Q" * 150 + "?" + "q" * 849  # 1000 chars
    response = "start " + "x" * 4988 + " end."  # 4999 chars
    await make_judge("rubric", judge_max_input_chars=400).judge(question, response)
    req = fake_messages_api.message_requests[0]
    sent_q = req.section("user_question")
    sent_r = req.section("assistant_response")
    assert sent_q is not None and sent_r is not None
    assert "[… truncated 600 chars]" in sent_q
    assert "[… truncated 4599 chars]" in sent_r
    assert sent_r.startswith("start ") and sent_r.endswith(" end.")
    assert len(sent_r) < 400 + 40


def test_judge_id_changes_with_model_prompt_and_parameters(fake_messages_api: FakeMessagesAPI) -> None:
    """The judge id changes with model, max tokens, input limit and prompt, but not retries or timeout."""

    def jid(cls: type[RubricJudge] = RubricJudge, **overrides: object) -> str:
        return cls(judge_settings(fake_messages_api, "rubric", **overrides).judge).info.judge_id

    class OtherPrompt(RubricJudge):
        system_prompt = SYSTEM_PROMPT + "\nBe brief."

    base = jid()
    assert base == jid()
    assert base.startswith("rubric-")
    assert jid(judge_model="claude-sonnet-5-5") != base
    assert jid(judge_max_tokens=512) != base
    assert jid(judge_max_input_chars=5000) != base
    assert jid(OtherPrompt) != base
    # Retry and timeout settings do not change what is measured: same id.
    assert jid(judge_max_retries=0, judge_request_timeout_s=9.0) == base


def test_info_names_method_and_model(fake_messages_api: FakeMessagesAPI) -> None:
    """The judge info names the rubric method and the configured model, and is not heuristic."""
    info = RubricJudge(judge_settings(fake_messages_api, "rubric", judge_model="claude-opus-5-5").judge).info
    assert (info.method, info.model, info.heuristic) == ("rubric", "claude-opus-5-5", False)
