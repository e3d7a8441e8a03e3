"""Issue 10, item 5: mean-based alert rules use the sample weights (1/sample_rate), so a change of sampling rates
that shifts the mean of the judged rows is no regression, while a real one still is."""

from __future__ import annotations

import random
import statistics
from datetime import datetime, timedelta

import pytest

from consumers.sampling import Match, Sampler, SamplingPolicy
from consumers.sampling import Rule as SamplingRule
from monitor.alerts import stats
from monitor.alerts.backtest import run_backtest
from monitor.alerts.evaluator import decide
from monitor.alerts.observations import Observation, effective_n, weighted_moments
from monitor.alerts.windows import WeightedSums
from monitor.store.connection import ClickHouseStore
from schemas.events import ConversationEvent, KafkaPosition
from schemas.scored import ScoredRow
from tests.monitor.alerts.conftest import SCORE_RULES, T0, default_rules, insert, make_row, rules_from
from tests.monitor.alerts.test_detection import DROP_RULES

BUDGET_FROM = T0 + timedelta(hours=26)  # the judge budget's soft limit is reached: rate-based sampling falls to a fifth
END = BUDGET_FROM + timedelta(hours=3)
# One app and prompt version served by two models of different quality; the small one is always judged, the large
# one at 50% (a sampling rule), which the budget factor lowers to 10%.
POLICY = SamplingPolicy(
    default_rate=1.0,
    rules=[
        SamplingRule(name="small-always", match=Match(model=["small"]), always=True),
        SamplingRule(name="large-half", match=Match(model=["large"]), rate=0.5),
    ],
)
MODELS = {"large": (0.9, 0.1), "small": (0.5, 0.15)}  # mean and sd of the scores; 10 events a minute each


def _sampled_stream() -> list[ScoredRow]:
    """What the monitor judges of a steady stream (traffic mean 0.70 throughout) sampled by POLICY and the budget
    factor."""
    sampler, rng, rows, i = Sampler(POLICY), random.Random(7), [], 0
    t = T0
    while t < END:
        factor = 0.2 if t >= BUDGET_FROM else 1.0
        for model, (mean, sd) in MODELS.items():
            for k in range(10):
                i += 1
                at = t + timedelta(seconds=6 * k)
                event = ConversationEvent(
                    event_id=f"e{i}",
                    conversation_id=f"c{i}",
                    event_time=at,
                    app="a",
                    model=model,
                    prompt_version="v1",
                    metadata={},
                    question="q",
                    response="r",
                    shape="flat",
                    source=KafkaPosition(topic="t", partition=0, offset=i),
                )
                d = sampler.decide(event, factor=factor, reason="budget")
                score = min(1.0, max(0.0, rng.gauss(mean, sd)))
                if d.sampled:
                    rows.append(
                        make_row(at, app="a", model=model, event_id=event.event_id, score=score, sample_rate=d.rate)
                    )
        t += timedelta(minutes=1)
    return rows


def _window_stats(store: ClickHouseStore, start: datetime, end: datetime) -> tuple[float, float, int, float]:
    """Unweighted mean, variance and count of the ok scores in [start, end), and the traffic-weighted mean."""
    row = store.query(
        f"SELECT avg(score), varSamp(score), count(), sum(score / sample_rate) / sum(1 / sample_rate) FROM "
        f"{store.qualified_table} FINAL "
        "WHERE status = 'ok' AND event_time >= {s:DateTime64(3, 'UTC')} AND event_time < {e:DateTime64(3, 'UTC')}",
        {"s": start, "e": end},
    ).rows[0]
    return float(row[0]), float(row[1]), int(row[2]), float(row[3])


def test_a_sampling_rate_change_mid_window_fires_no_false_alert_where_the_unweighted_mean_would(
    store: ClickHouseStore,
) -> None:
    """The budget lowers one model's sampling rate mid-window: the unweighted mean drops (the old computation fires),
    the weighted one holds."""
    insert(store, _sampled_stream())
    rules = default_rules(*SCORE_RULES)
    report = run_backtest(store, rules, BUDGET_FROM - timedelta(hours=1), END, timedelta(minutes=5))
    assert not report.errors and report.fired() == []

    # The numbers behind it, for a window after the change against its 24-hour baseline.
    now = BUDGET_FROM + timedelta(minutes=47)
    cur_start, cur_end = now - timedelta(minutes=32), now - timedelta(minutes=2)
    plain, var, n, weighted = _window_stats(store, cur_start, cur_end)
    b_plain, b_var, b_n, b_weighted = _window_stats(store, cur_start - timedelta(hours=24), cur_start)
    # Judged rows a minute: 5 large + 10 small before, 1 large + 10 small after: about (4.5 + 5) / 15 = 0.63, then (0.9
    # + 5) / 11 = 0.54.
    assert b_plain == pytest.approx(0.633, abs=0.01) and plain < 0.85 * b_plain
    assert b_weighted == pytest.approx(0.70, abs=0.01) and weighted == pytest.approx(
        b_weighted, abs=0.03
    )  # the traffic mean never moved

    # The old computation: a window rule and its decision code on the unweighted mean and test would have paged.
    drop = rules_from(DROP_RULES)[0]  # the shipped relevancy_drop of old: a 30-minute window and Welch's t
    p_old = stats.welch_t_test(plain, var, n, b_plain, b_var, b_n, "less")
    old = Observation(drop.name, (), plain, b_plain, n, b_n, True, p_change=p_old, test=drop.spec.test_label)
    assert decide(drop, old).fire and p_old < 1e-6


def test_weighted_moments_match_a_direct_computation_and_equal_weights_change_nothing() -> None:
    """The weighted mean, variance and effective n from sums match a direct computation, and with equal weights they
    are the plain ones."""
    rng = random.Random(2)
    xs = [rng.random() for _ in range(300)]
    ws = [rng.choice([1.0, 2.0, 10.0]) for _ in xs]

    def sums(weights: list[float]) -> WeightedSums:
        return WeightedSums(
            weight=sum(weights),
            weight_sq=sum(w * w for w in weights),
            score=sum(w * x for w, x in zip(weights, xs, strict=True)),
            score_sq=sum(w * x * x for w, x in zip(weights, xs, strict=True)),
        )

    m = weighted_moments(sums(ws))
    assert m is not None
    mean = sum(w * x for w, x in zip(ws, xs, strict=True)) / sum(ws)
    n_eff = sum(ws) ** 2 / sum(w * w for w in ws)
    var = sum(w * (x - mean) ** 2 for w, x in zip(ws, xs, strict=True)) / (sum(ws) - sum(w * w for w in ws) / sum(ws))
    assert (m.mean, m.variance, m.n_eff) == (pytest.approx(mean), pytest.approx(var), pytest.approx(n_eff))
    assert n_eff < 0.6 * len(xs)  # uneven weights: fewer effective rows than judged rows

    for rate in (1.0, 0.25):  # one rate for everything: weights change nothing
        plain = weighted_moments(sums([1 / rate] * len(xs)))
        assert plain is not None
        assert (plain.mean, plain.variance, plain.n_eff) == (
            pytest.approx(statistics.mean(xs)),
            pytest.approx(statistics.variance(xs)),
            pytest.approx(len(xs)),
        )
    assert weighted_moments(WeightedSums()) is None and effective_n(WeightedSums()) == 0.0
