"""Shadow agreement through the alert engine: a primary judge and its shadow scored the same events (rows written
through the store's insert path); the shadow rules read the pairs, the traffic rules ignore the shadow's rows."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from scipy import stats

from monitor.alerts.engine import evaluate_rules
from monitor.alerts.queries import examples_sql
from monitor.alerts.windows import windows_for
from monitor.store.connection import ClickHouseStore
from schemas.scored import ScoredRow
from tests.monitor.alerts.conftest import T0, default_rules, insert, make_row

NOW = T0 + timedelta(days=1, hours=7)
SHADOW_RULES = ("shadow_agreement_drop", "shadow_divergence_higher", "shadow_divergence_lower")
PAIR = (("app", "support"), ("judge_id", "js"), ("primary_judge_id", "j1"))


def _rows(*, diverge: bool, shadow: bool = True) -> list[ScoredRow]:
    """A day of primary rows (one a minute, judge j1) and, for every fourth event, the shadow's row (judge js):
    close to the primary's score, or (`diverge`) unrelated to it and higher. Shadow scores repeat (rounded), ties."""
    rng = random.Random(3)
    rows = []
    for m in range(24 * 60 + 7 * 60):
        t = T0 + timedelta(minutes=m, seconds=rng.random())
        score = min(1.0, max(0.0, rng.gauss(0.6, 0.2)))
        event = f"e{m}"
        rows.append(make_row(t, event_id=event, score=score, sample_rate=0.5))
        if shadow and m % 4 == 0:
            other = rng.uniform(0.6, 1.0) if diverge else min(1.0, max(0.0, score + rng.gauss(0.0, 0.03)))
            rows.append(
                make_row(
                    t,
                    event_id=event,
                    judge_id="js",
                    score=round(other, 1),
                    sample_rate=0.1,
                    sample_rule="shadow:base",
                    cost=0.01,
                )
            )
    return rows


def _evaluate(store: ClickHouseStore, *names: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], object]:
    evaluation = evaluate_rules(store, default_rules(*names, ignore_for=True), NOW, {})
    assert evaluation.errors == []
    return {(r.rule.name, r.state.segment): r for r in evaluation.results}


def test_a_shadow_that_agrees_with_its_primary_fires_nothing(store: ClickHouseStore) -> None:
    """ρ near 1 and a mean difference near 0 on 90 shared events: the shadow rules observe the pair and stay quiet."""
    insert(store, _rows(diverge=False))
    results = _evaluate(store, *SHADOW_RULES)
    assert set(results) == {(name, PAIR) for name in SHADOW_RULES}
    rho = results[("shadow_agreement_drop", PAIR)]
    assert rho.observation.n_current == 90 and rho.observation.value > 0.9  # type: ignore[attr-defined]
    assert abs(results[("shadow_divergence_higher", PAIR)].observation.value) < 0.05  # type: ignore[attr-defined]
    assert all(r.state.state == "inactive" and r.verdict.sufficient for r in results.values())  # type: ignore[attr-defined]


def test_a_shadow_that_diverges_fires_the_agreement_and_divergence_rules(store: ClickHouseStore) -> None:
    """Shadow scores unrelated to the primary's and higher: shadow_agreement_drop and shadow_divergence_higher fire;
    ρ is scipy's on the same pairs (ties averaged); the example query lists the pair's largest disagreements."""
    rows = _rows(diverge=True)
    insert(store, rows)
    results = _evaluate(store, *SHADOW_RULES)
    states = {name: results[(name, PAIR)].state.state for name in SHADOW_RULES}  # type: ignore[attr-defined]
    assert states == {
        "shadow_agreement_drop": "firing",
        "shadow_divergence_higher": "firing",
        "shadow_divergence_lower": "inactive",
    }
    rule = default_rules("shadow_agreement_drop").rules[0]
    start, end = windows_for(rule, NOW).current
    by_event = {(r.event_id, r.judge_id): r.score for r in rows if start <= r.event_time < end}
    pairs = [(s, by_event[(e, "j1")]) for (e, j), s in by_event.items() if j == "js"]
    expected = stats.spearmanr([s for s, _ in pairs], [p for _, p in pairs]).statistic
    assert results[("shadow_agreement_drop", PAIR)].observation.value == pytest.approx(expected, abs=1e-12)  # type: ignore[attr-defined]
    worst = store.query(examples_sql(rule, PAIR, windows_for(rule, NOW), store.database, store.table))
    diffs = [abs(r[worst.columns.index("difference")]) for r in worst.rows]
    assert len(diffs) == 20 and diffs == sorted(diffs, reverse=True)


@pytest.mark.parametrize("shadow", [True, False])
def test_shadow_rows_are_no_extra_traffic(store: ClickHouseStore, shadow: bool) -> None:
    """judged_volume, app_no_data and stream_silent count the primary's rows whether or not a shadow judged a
    quarter of them again (the shadow's rows are its own segment of the judge-keyed rules only)."""
    insert(store, _rows(diverge=False, shadow=shadow))
    results = _evaluate(store, "judged_volume_drop", "app_no_data", "stream_silent")
    seen = {name: (r.observation.value, r.observation.n_baseline) for (name, _), r in results.items()}  # type: ignore[attr-defined]
    assert seen == {"judged_volume_drop": (30.0, 30), "app_no_data": (30.0, 30), "stream_silent": (15.0, 1440)}
