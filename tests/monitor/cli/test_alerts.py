"""`relevancy-monitor alerts ...`: in-process through a parser built around `register`, and one subprocess run
through the real `monitor.cli.main` (errors as one line, exit codes)."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from monitor.alerts.state import StateStore
from monitor.cli.alerts import alert_settings, register, run_backtest_cmd, run_check
from monitor.runtime.store import ClickHouseStore
from tests.monitor.alerts.conftest import T0, insert, noisy, stream
from tests.monitor.alerts.receiver import Receiver

RULES_YAML = """
rules:
  - name: relevancy_drop
    metric: mean_score
    segment_by: [app]
    window: 30m
    baseline: {trailing: 24h}
    condition: {relative_change: {fire: 0.10, clear: 0.05}}
    min_events: 30
    min_baseline_events: 100
    for: 10m
    severity: page
"""
DROP_AT = T0 + timedelta(hours=24, minutes=30)


def parse(*argv: str) -> argparse.Namespace:
    """Parse `argv` with a parser that holds only the `alerts` commands."""
    parser = argparse.ArgumentParser(prog="relevancy-monitor")
    register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(list(argv))


@pytest.fixture
def populated(store: ClickHouseStore, tmp_path: Path) -> tuple[ClickHouseStore, list[str]]:
    """App a drops at T0+24h30m; b is stable. Returns the store and the common flags."""
    segs = [{"app": "a"}, {"app": "b"}]
    insert(store, stream(T0, DROP_AT, per_minute=2, segments=segs, score=noisy(0.75, 0.1)))
    insert(store, stream(DROP_AT, DROP_AT + timedelta(hours=2), per_minute=2, segments=segs[:1], score=noisy(0.5, 0.1), seed=3))
    insert(store, stream(DROP_AT, DROP_AT + timedelta(hours=2), per_minute=2, segments=segs[1:], score=noisy(0.75, 0.1), seed=4))
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES_YAML, encoding="utf-8")
    return store, ["--rules", str(rules), "--clickhouse-url", store.url, "--clickhouse-database", store.database]


def test_check_prints_every_segment_and_fails_on_firing_only_when_asked(populated: tuple[ClickHouseStore, list[str]]) -> None:
    """`alerts check` prints every segment, writes no state, and exits 1 only with --fail-on-firing and something firing."""
    store, flags = populated
    at = (DROP_AT + timedelta(minutes=40)).isoformat()
    out = io.StringIO()
    assert run_check(parse("alerts", "check", *flags, "--at", at), out) == 0
    text = out.getvalue()
    assert "relevancy_drop" in text and "app=a, judge_id=j1" in text and "pending" in text and "inactive" in text

    out = io.StringIO()
    ns = parse("alerts", "check", *flags, "--at", at, "--json", "--ignore-for", "--fail-on-firing")
    assert run_check(ns, out) == 1
    rows = {r["segment"]["app"]: r for r in map(json.loads, out.getvalue().splitlines())}
    assert rows["a"]["state"] == "firing" and rows["b"]["state"] == "inactive"
    assert rows["a"]["p_value"] < 1e-6 and rows["a"]["n_current"] == 60 and rows["a"]["baseline"] == pytest.approx(0.75, abs=0.03)
    assert run_check(parse("alerts", "check", *flags, "--at", at, "--json", "--fail-on-firing"), io.StringIO()) == 0  # only pending
    assert StateStore(store).load() == {}  # check writes nothing


def test_backtest_reports_the_fire_time_and_touches_no_state(populated: tuple[ClickHouseStore, list[str]]) -> None:
    """`alerts backtest` reports when the drop would have fired and after what delay, as JSON and as a table, and writes no state."""
    store, flags = populated
    out = io.StringIO()
    ns = parse(
        "alerts",
        "backtest",
        *flags,
        "--since",
        (T0 + timedelta(hours=24)).isoformat(),
        "--until",
        (DROP_AT + timedelta(hours=2)).isoformat(),
        "--step",
        "5m",
        "--json",
    )
    assert run_backtest_cmd(ns, out) == 0
    report = json.loads(out.getvalue())
    assert report["evaluations"] == 30
    [ep] = report["episodes"]
    assert ep["segment"] == {"app": "a", "judge_id": "j1"} and ep["rule"] == "relevancy_drop"
    assert ep["fired_at"] == (DROP_AT + timedelta(minutes=25)).isoformat()  # pending at +15m (10% down), + for 10m
    assert ep["delay_s"] == 600 and ep["resolved_at"] is None
    assert report["rules"] == [{"rule": "relevancy_drop", "fired": 1, "suppressed": 0, "mean_delay_s": 600.0, "still_firing": 1, "errors": 0}]
    table = io.StringIO()
    run_backtest_cmd(
        parse("alerts", "backtest", *flags, "--since", (T0 + timedelta(hours=24)).isoformat(), "--until", (DROP_AT + timedelta(hours=2)).isoformat()),
        table,
    )
    assert "relevancy_drop" in table.getvalue() and "still firing" in table.getvalue()
    assert store.query(f"SELECT count() FROM {store.database}.alert_state").rows[0][0] == 0


def test_run_once_notifies_and_keeps_state(store: ClickHouseStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`alerts run --once` takes the webhook from ALERTS_*, notifies the firing segment and stores its state."""
    now = datetime.now(UTC)  # `run` evaluates at the real time: the data is placed around it
    segs = [{"app": "a"}, {"app": "b"}]
    insert(store, stream(now - timedelta(hours=25), now - timedelta(minutes=40), per_minute=2, segments=segs, score=noisy(0.75, 0.1)))
    insert(store, stream(now - timedelta(minutes=40), now, per_minute=2, segments=segs[:1], score=noisy(0.45, 0.1), seed=3))
    insert(store, stream(now - timedelta(minutes=40), now, per_minute=2, segments=segs[1:], score=noisy(0.75, 0.1), seed=4))
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES_YAML.replace("for: 10m", "for: 0s"), encoding="utf-8")
    flags = ["--rules", str(rules), "--clickhouse-url", store.url, "--clickhouse-database", store.database]
    with Receiver() as receiver:
        monkeypatch.setenv("ALERTS_WEBHOOK_URL", receiver.base + "/hook")
        ns = parse("alerts", "run", *flags, "--once", "--no-lease")
        assert alert_settings(ns).webhook_url == receiver.base + "/hook"
        assert ns.func(ns) == 0
        [post] = receiver.posts["/hook"]
    assert [a["segment"]["app"] for a in post["alerts"]] == ["a"]
    states = StateStore(store).load()
    assert [(dict(s.segment)["app"], s.state) for s in states.values()] == [("a", "firing")]


def test_bad_input_is_a_one_line_error(populated: tuple[ClickHouseStore, list[str]], tmp_path: Path) -> None:
    """A bad rules file, time or rule name raises a one-line error naming the input."""
    from schemas.errors import RulesError, UsageError

    _, flags = populated
    bad = tmp_path / "bad.yaml"
    bad.write_text(RULES_YAML.replace("for: 10m", "for: ten minutes"), encoding="utf-8")
    with pytest.raises(RulesError, match=r"bad.yaml: rules\[0\] \(relevancy_drop\).for: 'ten minutes' is not a duration"):
        run_check(parse("alerts", "check", *flags, "--rules", str(bad)), io.StringIO())
    with pytest.raises(UsageError, match="--since: 'yesterday' is neither ISO 8601"):
        run_backtest_cmd(parse("alerts", "backtest", *flags, "--since", "yesterday"), io.StringIO())
    with pytest.raises(UsageError, match="--rule: no rule named nope"):
        run_backtest_cmd(parse("alerts", "backtest", *flags, "--since=-1h", "--rule", "nope"), io.StringIO())


# The real entry point, with `alerts` added the way the lead will wire it (skipped if already wired).
_MAIN = """
import argparse, sys
import monitor.cli.main as cli
from monitor.cli.alerts import register
_build = cli.build_parser
def build():
    parser = _build()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    if "alerts" not in sub.choices:
        register(sub)
    return parser
cli.build_parser = build
sys.exit(cli.main(sys.argv[1:]))
"""


def test_subprocess_check_on_a_fresh_store_and_a_bad_rules_file(tmp_path: Path) -> None:
    """Through the real entry point, check on an empty store decides nothing, and an invalid rules file exits 2 with one line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MONITOR_", "ALERTS_"))}
    env["MONITOR_CLICKHOUSE_URL"] = f"chdb://{tmp_path / 'chdb'}"

    def run(*a: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", _MAIN, *a], env=env, capture_output=True, text=True, timeout=120)

    done = run("migrate")  # `alerts check` reads an existing store only; it never creates one
    assert done.returncode == 0, done.stderr
    done = run("alerts", "check", "--json")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    # Empty store: the one whole-stream segment has no data to decide on; nothing reads as firing or fine.
    assert [(r["rule"], r["state"], r["sufficient"]) for r in rows] == [("stream_silent", "inactive", False)]
    (tmp_path / "r.yaml").write_text("rules:\n  - name: x\n    metric: mean_score\n", encoding="utf-8")
    done = run("alerts", "check", "--rules", str(tmp_path / "r.yaml"))
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert done.stderr.startswith("relevancy-monitor: error: ") and "condition needs threshold" in done.stderr
