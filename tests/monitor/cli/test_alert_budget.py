"""`alerts check` and `alerts backtest` show the false-alarm budget: each rule's share and what it expects, the whole
deployment's expected false pages and tickets a week, and one line when explicit levels take a severity over it."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from pathlib import Path

import pytest
from rich.console import Console

from monitor.alerts.spending import NO_TEST
from monitor.cli.alerts import run_backtest_cmd, run_check
from monitor.store.connection import ClickHouseStore
from tests.monitor.alerts.conftest import T0, insert, noisy, stream
from tests.monitor.cli.test_alerts import parse

RULES = """
false_alarms_per_week: {page: 1, ticket: 3}
rules:
  - name: drop
    metric: mean_score
    segment_by: [app]
    window: 30m
    baseline: {trailing: 24h}
    condition: {relative_change: {fire: 0.10, clear: 0.05}}
    min_events: 30
    min_baseline_events: 100
    severity: page
  - name: errors
    metric: error_rate
    segment_by: [app]
    window: 15m
    condition: {threshold: {fire: 0.05, clear: 0.02}}
    min_events: 20
    severity: page
  - name: lag
    metric: scoring_lag_p90
    segment_by: [app]
    window: 10m
    condition: {threshold: 600}
    min_events: 10
    severity: ticket
"""
EXPLICIT = RULES.replace("    min_events: 20\n", "    min_events: 20\n    alpha: 0.01\n")
NOW = T0 + timedelta(hours=25)


def _flags(store: ClickHouseStore, tmp_path: Path, rules: str) -> list[str]:
    path = tmp_path / "rules.yaml"
    path.write_text(rules, encoding="utf-8")
    return ["--rules", str(path), "--clickhouse-url", store.url, "--clickhouse-database", store.database]


@pytest.fixture
def two_apps(store: ClickHouseStore) -> ClickHouseStore:
    """Apps a and b, 2 judged events a minute each for 25 hours, nothing wrong."""
    insert(store, stream(T0, NOW, per_minute=2, segments=[{"app": "a"}, {"app": "b"}], score=noisy(0.75, 0.1)))
    return store


def test_check_json_gives_each_rule_its_share_and_the_deployment_over_its_budget(
    two_apps: ClickHouseStore, tmp_path: Path
) -> None:
    """Every row carries its rule's share, level and expected false alarms and the deployment's totals: `drop` (half
    the page budget, derived: 0.5 / (336 windows x 2 apps)), `errors` at its explicit 0.01 over 672 windows x 2 apps
    (13.4 a week), `lag` no test; the page severity is over its budget, and the table says so in one line."""
    flags = _flags(two_apps, tmp_path, EXPLICIT)
    out = io.StringIO()
    assert run_check(parse("alerts", "check", *flags, "--at", NOW.isoformat(), "--json", "--no-state"), out) == 0
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    budget = {r["rule"]: r["budget"] for r in rows}
    assert budget["drop"]["share_per_week"] == pytest.approx(0.5)
    assert budget["drop"]["alpha"] == pytest.approx(0.5 / 672) and budget["drop"]["alpha_from"] == "derived"
    assert budget["drop"]["expected_per_week"] == pytest.approx(0.5) and budget["drop"]["alpha_per"] == "evaluation"
    assert budget["errors"]["alpha"] == 0.01 and budget["errors"]["alpha_from"] == "rules file"
    assert budget["errors"]["share_per_week"] == pytest.approx(0.5)
    assert budget["errors"]["expected_per_week"] == pytest.approx(0.01 * 672 * 2)
    assert budget["lag"]["spends"] == "none" and budget["lag"]["how"] == NO_TEST
    assert budget["lag"]["expected_per_week"] == 0.0 and budget["lag"]["share_per_week"] == 0.0
    deployment = {json.dumps(r["deployment"], sort_keys=True) for r in rows}
    assert len(deployment) == 1  # the same totals on every row
    assert rows[0]["deployment"] == {
        "page": {"budget_per_week": 1.0, "expected_per_week": pytest.approx(13.94), "over_budget": True},
        "ticket": {"budget_per_week": 3.0, "expected_per_week": 0.0, "over_budget": False},
    }

    out = io.StringIO()
    assert run_check(parse("alerts", "check", *flags, "--at", NOW.isoformat(), "--no-state"), out) == 0
    lines = out.getvalue().splitlines()
    text = " ".join(out.getvalue().split())
    assert text.count("over its budget") == 1
    assert (
        "page: the rules expect 14 false alarms a week, over its budget of 1 (explicit alpha: errors 13); remove "
        "`alpha:` to derive it from budget_share" in text
    ), text
    assert "expected false alarms a week over these segments: page 14 of 1, ticket 0 of 3" in text, text
    assert NO_TEST in text and "alpha 0.00074 per evaluation (derived" in text
    assert max(len(line) for line in lines) <= 80


def test_backtest_json_gives_the_deployment_totals_within_the_budget(two_apps: ClickHouseStore, tmp_path: Path) -> None:
    """With every level derived, the backtest's last step expects exactly the page budget (0.5 + 0.5 over two apps)
    and nothing of the tickets (no tested ticket rule); each rule's share is listed; `--rule` keeps a rule's share."""
    flags = _flags(two_apps, tmp_path, RULES)
    span = ["--since", (NOW - timedelta(hours=1)).isoformat(), "--until", NOW.isoformat(), "--step", "10m", "--json"]
    out = io.StringIO()
    assert run_backtest_cmd(parse("alerts", "backtest", *flags, *span), out, Console(file=io.StringIO())) == 0
    report = json.loads(out.getvalue())
    assert report["deployment"] == {
        "page": {"budget_per_week": 1.0, "expected_per_week": pytest.approx(1.0), "over_budget": False},
        "ticket": {"budget_per_week": 3.0, "expected_per_week": 0.0, "over_budget": False},
    }
    assert report["expected_false_alarms_per_week"] == {"page": pytest.approx(1.0), "ticket": 0.0}
    shares = {r["rule"]: (r["share_per_week"], r["spends"]) for r in report["budget"]}
    assert shares == {"drop": (0.5, "test"), "errors": (0.5, "test"), "lag": (0.0, "none")}

    out = io.StringIO()
    one = parse("alerts", "backtest", *flags, *span, "--rule", "errors")
    assert run_backtest_cmd(one, out, Console(file=io.StringIO())) == 0
    [errors] = json.loads(out.getvalue())["budget"]
    assert errors["share_per_week"] == pytest.approx(0.5) and errors["alpha"] == pytest.approx(0.5 / 672 / 2)
