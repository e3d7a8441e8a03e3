"""The Grafana dashboard's queries run on chDB (macros expanded as the ClickHouse plugin does), and the
Prometheus rules are well-formed and name only metrics the monitor exports."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from monitor.alerts.prometheus import AlertMetrics
from monitor.runtime.metrics import Metrics
from monitor.store.connection import ClickHouseStore
from tests.monitor.alerts.conftest import canary_run, insert, insert_canary, make_row

ROOT = Path(__file__).resolve().parents[3]


def _expand(sql: str, store: ClickHouseStore) -> str:
    """The plugin's macros and the dashboard variables, as Grafana would expand them."""
    sql = re.sub(r"\$__timeFilter\((\w+)\)", r"\1 >= now() - INTERVAL 1 DAY AND \1 <= now()", sql)
    sql = re.sub(r"\$__timeInterval\((\w+)\)", r"toStartOfInterval(\1, INTERVAL 60 second)", sql)
    sql = sql.replace("${database}", store.database).replace("${table}", store.table)
    return re.sub(r"\$\{\w+:singlequote\}", "'a', 'b', '', 'v1', 'j1'", sql)


def test_every_dashboard_query_runs_and_panels_cover_the_required_views(store: ClickHouseStore) -> None:
    """Every dashboard query returns rows on chDB, and the panels cover relevancy, low-score share, volume, errors,
    cost and lag."""
    now = datetime.now(UTC)
    insert(
        store,
        [make_row(now - timedelta(minutes=m), app="a", score=0.5 + m / 200) for m in range(1, 60)]
        + [make_row(now - timedelta(minutes=3), app="a", status="error", cost=None)],
    )
    store.command(
        f"INSERT INTO {store.database}.alert_state (rule, segment_key, segment, state, last_eval_at, updated_at) "
        "VALUES ('r', '[]', '[]', 'firing', now64(3), now64(3))"
    )
    insert_canary(store, [canary_run(now - timedelta(hours=h), judge_id="j1", seed=h) for h in (1, 2)])
    dash = json.loads((ROOT / "dashboards" / "relevancy.json").read_text(encoding="utf-8"))
    sqls = [t["rawSql"] for p in dash["panels"] for t in p["targets"]]
    sqls += [v["query"] for v in dash["templating"]["list"] if v["type"] == "query"]
    for sql in sqls:
        assert store.query(_expand(sql, store)).rows, sql
    titles = " | ".join(p["title"].lower() for p in dash["panels"])
    for word in ("relevancy", "low-score", "volume", "error", "cost", "lag", "canary"):
        assert word in titles
    assert all(p["datasource"]["type"] == "grafana-clickhouse-datasource" for p in dash["panels"])


def test_the_canary_series_sits_beside_the_live_relevancy() -> None:
    """The canary's mean shift sits right of the mean relevancy on the first row, so the two stories read apart at a
    glance."""
    dash = json.loads((ROOT / "dashboards" / "relevancy.json").read_text(encoding="utf-8"))
    first_row = sorted((p for p in dash["panels"] if p["gridPos"]["y"] == 0), key=lambda p: p["gridPos"]["x"])
    assert [p["title"].split(" per ")[0].split(":")[0] for p in first_row] == ["Mean relevancy", "Judge canary"]
    live, canary = first_row
    assert (
        live["gridPos"]["x"] + live["gridPos"]["w"] == canary["gridPos"]["x"]
        and live["gridPos"]["h"] == canary["gridPos"]["h"]
    )
    sql = canary["targets"][0]["rawSql"]
    assert "canary_runs" in sql and "run_mean_shift" in sql and "judge_id IN (${judge_id:singlequote})" in sql
    # Panels never overlap: the grid is 24 wide and each cell belongs to one panel.
    cells = [
        (x, y)
        for p in dash["panels"]
        for g in [p["gridPos"]]
        for x in range(g["x"], g["x"] + g["w"])
        for y in range(g["y"], g["y"] + g["h"])
    ]
    assert len(cells) == len(set(cells)) and all(x < 24 for x, _ in cells)


def _exported_names() -> set[str]:
    names = set()
    for registry in (Metrics().registry, AlertMetrics().registry):
        for family in registry.collect():
            # Labelled metrics have no samples until used: name them from the family.
            names.add(family.name + "_total" if family.type == "counter" else family.name)
    # Exported at scrape time by the LLM judges' stats collector (monitor/metrics.py).
    names |= {
        "relevancy_monitor_judge_api_requests_total",
        "relevancy_monitor_judge_api_errors_total",
        "relevancy_monitor_judge_api_retries_total",
        "relevancy_monitor_judge_tokens_total",
    }
    return names


def test_prometheus_rules_are_well_formed_and_use_exported_metrics() -> None:
    """The Prometheus rules have unique names and known keys, and use only metrics the monitor and the evaluator
    export."""
    doc = yaml.safe_load((ROOT / "dashboards" / "prometheus-rules.yaml").read_text(encoding="utf-8"))
    exported = _exported_names()
    rules = [r for g in doc["groups"] for r in g["rules"]]
    assert len({r["alert"] for r in rules}) == len(rules) >= 10
    for r in rules:
        assert set(r) <= {"alert", "expr", "for", "labels", "annotations"} and r["labels"]["severity"] in {
            "page",
            "ticket",
        }
        used = set(re.findall(r"relevancy_monitor_\w+", r["expr"]))
        assert used and used <= exported, (r["alert"], used - exported)
        assert r["expr"].count("(") == r["expr"].count(")")
    exprs = " ".join(r["expr"] for r in rules)
    assert (
        'relevancy_monitor_judge_api_errors_total{kind="rate_limited"}' in exprs
        and "relevancy_monitor_judge_circuit_open" in exprs
    )
    assert "relevancy_monitor_consumer_lag" in exprs and "absent(" in exprs
