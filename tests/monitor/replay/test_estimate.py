"""The replay's cost estimate and its spending cap (pure)."""

from __future__ import annotations

import pytest

from monitor.judges.base import JudgeInfo
from monitor.judges.pricing import DEFAULT_PRICES, ModelPrice
from monitor.judges.statements import SYSTEM_PROMPT
from monitor.replay.estimate import CostModel, estimate
from monitor.replay.spend_cap import SpendCap

INFO = JudgeInfo("statements", "claude-haiku-5-5", "statements-x")
PRICE = DEFAULT_PRICES["claude-haiku-5-5"]


def test_a_heuristic_judge_costs_nothing() -> None:
    """The lexical judge calls no API: no calls, no tokens, $0."""
    model = CostModel.for_judge(JudgeInfo("lexical", "", "lexical-x", heuristic=True), None, None, 20_000)
    e = estimate(model, 1000, 50_000, 200_000)
    assert (e.calls, e.input_tokens, e.usd) == (0, 0, 0.0)


def test_the_cached_prompt_is_written_once_and_read_after() -> None:
    """With a cacheable system prompt, the estimate counts it once as input tokens and prices one write, the rest
    reads."""
    model = CostModel.for_judge(INFO, PRICE, SYSTEM_PROMPT, 20_000)
    assert model.prefix_cached
    one, many = estimate(model, 1, 40, 200), estimate(model, 101, 40 * 101, 200 * 101)
    per_event = model.event_usd(40, 200)
    assert per_event is not None and one.usd is not None and many.usd is not None
    assert many.usd - one.usd == pytest.approx(100 * per_event)
    assert many.input_tokens - one.input_tokens == 100 * model.event_tokens(40, 200)[0]


def test_the_batch_api_halves_the_estimate() -> None:
    """The same events cost half through the Message Batches API."""
    direct = estimate(CostModel.for_judge(INFO, PRICE, SYSTEM_PROMPT, 20_000), 500, 20_000, 100_000)
    batch = estimate(CostModel.for_judge(INFO, PRICE, SYSTEM_PROMPT, 20_000, batch=True), 500, 20_000, 100_000)
    assert direct.usd is not None and batch.usd is not None
    assert batch.usd == pytest.approx(direct.usd / 2)


def test_an_unknown_price_is_none_not_zero() -> None:
    """A model without a price gives an unknown estimate, never a guess."""
    assert estimate(CostModel.for_judge(INFO, None, SYSTEM_PROMPT, 20_000), 10, 100, 100).usd is None


def test_longer_answers_cost_more_for_the_statements_judge() -> None:
    """The statements judge restates the response: its output estimate grows with the response's length."""
    model = CostModel.for_judge(
        INFO, ModelPrice(input=1, output=5, cache_read=0.1, cache_write=1.25), SYSTEM_PROMPT, 20_000
    )
    assert model.event_tokens(40, 2_000)[1] > model.event_tokens(40, 200)[1]


def test_the_cap_holds_back_the_call_that_could_cross_it() -> None:
    """Reservations use the larger of the estimate and the mean real cost; the call past the cap is refused."""
    cap = SpendCap(0.25)
    first = cap.try_reserve(0.01)
    assert first == 0.01
    cap.settle(first, 0.10)  # cost ten times the estimate
    second = cap.try_reserve(0.01)
    assert second == pytest.approx(0.10)  # the mean so far, not the estimate
    cap.settle(second, 0.10)
    assert cap.try_reserve(0.01) is None and cap.reached
    assert cap.spent == pytest.approx(0.20)


def test_no_cap_reserves_everything() -> None:
    """Without --max-usd every reservation succeeds."""
    cap = SpendCap(None)
    assert all(cap.try_reserve(1.0) is not None for _ in range(100))
