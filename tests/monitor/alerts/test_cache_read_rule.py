"""The shipped `judge_prompt_cache_cold` ticket: the share of an LLM judge's prompt tokens read from the prompt cache
over an hour, on a store where the cache works and where it does not, in a round and in a backtest."""

from __future__ import annotations

from datetime import timedelta

from monitor.alerts.backtest import run_backtest
from monitor.alerts.engine import SegmentResult, evaluate_rules
from monitor.alerts.metric_specs import SPECS
from monitor.store.connection import ClickHouseStore
from schemas.scored import ScoredRow
from tests.monitor.alerts.conftest import T0, default_rules, insert, make_row

RULE = "judge_prompt_cache_cold"
NOW = T0 + timedelta(hours=3)
PREFIX = 5000  # tokens of the judge's cached system prompt


def call(minute: float, *, read: bool, user: int = 400, judge_id: str = "rubric-1", **kw: object) -> ScoredRow:
    """A row of one judge call `minute`s after T0: the prefix read from the cache, or billed as plain input."""
    row = make_row(T0 + timedelta(minutes=minute), judge_id=judge_id, judge="rubric", **kw)  # type: ignore[arg-type]
    tokens = {"input_tokens": user, "cache_read_tokens": PREFIX} if read else {"input_tokens": user + PREFIX}
    return row.model_copy(update={"output_tokens": 60, "cache_write_tokens": 0, **tokens})


def results(store: ClickHouseStore) -> dict[str, SegmentResult]:
    """The rule's results at NOW (its `for` ignored), by judge_id."""
    ev = evaluate_rules(store, default_rules(RULE, ignore_for=True), NOW, {})
    assert not ev.errors
    return {dict(r.observation.segment)["judge_id"]: r for r in ev.results if r.rule.name == RULE}


def test_the_rule_is_a_ticket_on_the_share_of_prompt_tokens_read_from_the_cache_over_an_hour() -> None:
    """It ships as a judge-keyed ticket below 50% over 1h (clearing at 60%), on its own metric."""
    [rule] = default_rules(RULE).rules
    assert rule.metric == "cache_read_share" and rule.severity == "ticket" and rule.window == timedelta(hours=1)
    assert rule.condition.threshold is not None and (rule.condition.threshold.fire, rule.bad_direction) == (0.5, "down")
    assert rule.key_fields == ("judge_id",) and SPECS["cache_read_share"].judge_keyed


def test_it_fires_where_the_cache_is_not_read_and_stays_quiet_where_it_is(store: ClickHouseStore) -> None:
    """A judge whose calls bill the prefix as input (share 0) fires; one reading it on 29 calls of 30 (share 0.90)
    stays quiet. The share is of all prompt tokens, so a working cache under texts longer than the prefix (share 0.42)
    fires too: most of what that judge pays for cannot be cached."""
    cold = [call(120 + m, read=False, judge_id="rubric-cold") for m in range(40)]
    warm = [call(120 + m, read=m > 0, judge_id="rubric-warm") for m in range(30)]
    long_texts = [call(120 + m, read=True, user=7000, judge_id="rubric-long") for m in range(30)]
    insert(store, [*cold, *warm, *long_texts])
    got = results(store)
    assert got["rubric-cold"].verdict.fire and got["rubric-cold"].observation.value == 0.0
    assert got["rubric-cold"].observation.n_current == 40
    assert got["rubric-warm"].verdict.sufficient and not got["rubric-warm"].verdict.fire
    assert got["rubric-warm"].observation.value == (29 * PREFIX) / (30 * (PREFIX + 400))
    assert got["rubric-long"].verdict.fire


def test_rows_without_a_call_neither_count_nor_dilute(store: ClickHouseStore) -> None:
    """Rows that sent no prompt (a lexical judge, a reused verdict, an empty response) are not calls: a judge with only
    those has no value, and they leave a real judge's share alone."""
    heuristic = [make_row(T0 + timedelta(minutes=120 + m), judge_id="lexical-1") for m in range(50)]
    reused = [make_row(T0 + timedelta(minutes=120 + m, seconds=30), judge_id="rubric-1") for m in range(50)]
    calls = [call(120 + m, read=True) for m in range(25)]
    insert(store, [*heuristic, *reused, *calls])
    got = results(store)
    assert not got["lexical-1"].verdict.sufficient and got["lexical-1"].observation.value is None
    assert got["rubric-1"].observation.n_current == 25 and not got["rubric-1"].verdict.fire
    assert got["rubric-1"].observation.value == PREFIX / (PREFIX + 400)


def test_too_few_calls_decide_nothing(store: ClickHouseStore) -> None:
    """Under min_events calls in the hour the rule waits, whatever the share."""
    insert(store, [call(150 + m, read=False) for m in range(10)])
    got = results(store)["rubric-1"]
    assert not got.verdict.sufficient and not got.verdict.fire


def test_a_backtest_finds_the_cold_stretch(store: ClickHouseStore) -> None:
    """Backtested over the history, the rule fires in the hour the cache stopped being read and not before."""
    insert(store, [call(m, read=m < 120) for m in range(180)])
    report = run_backtest(store, default_rules(RULE), T0 + timedelta(hours=1), NOW, timedelta(minutes=10))
    [episode] = [e for e in report.episodes if e.rule == RULE]
    assert episode.fired_at is not None and T0 + timedelta(hours=2) < episode.fired_at <= NOW
