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
from rich.console import Console

from monitor.alerts.engine import Delivery, Evaluation, RoundReport
from monitor.alerts.rules import load_rules
from monitor.alerts.settings import AlertSettings
from monitor.alerts.state import StateStore
from monitor.cli.alert_check_table import check_rows, print_check
from monitor.cli.alert_round import round_summary
from monitor.cli.alerts import alert_settings, register, run_accept, run_alerts, run_backtest_cmd, run_check
from monitor.store.connection import ClickHouseStore
from schemas.errors import UsageError
from tests.monitor.alerts.conftest import T0, insert, make_row, noisy, stream
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
    insert(
        store,
        stream(DROP_AT, DROP_AT + timedelta(hours=2), per_minute=2, segments=segs[:1], score=noisy(0.5, 0.1), seed=3),
    )
    insert(
        store,
        stream(DROP_AT, DROP_AT + timedelta(hours=2), per_minute=2, segments=segs[1:], score=noisy(0.75, 0.1), seed=4),
    )
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES_YAML, encoding="utf-8")
    return store, ["--rules", str(rules), "--clickhouse-url", store.url, "--clickhouse-database", store.database]


def test_check_prints_every_segment_and_fails_on_firing_only_when_asked(
    populated: tuple[ClickHouseStore, list[str]],
) -> None:
    """`alerts check` prints every segment, writes no state, and exits 1 only with --fail-on-firing and something
    firing."""
    store, flags = populated
    at = (DROP_AT + timedelta(minutes=40)).isoformat()
    out = io.StringIO()
    assert run_check(parse("alerts", "check", *flags, "--at", at), out) == 0
    text = out.getvalue()
    assert "relevancy_drop" in text and "app=a judge_id=j1" in text and "pending" in text and "inactive" in text

    out = io.StringIO()
    ns = parse("alerts", "check", *flags, "--at", at, "--json", "--ignore-for", "--fail-on-firing")
    assert run_check(ns, out) == 1
    rows = {r["segment"]["app"]: r for r in map(json.loads, out.getvalue().splitlines())}
    assert rows["a"]["state"] == "firing" and rows["b"]["state"] == "inactive"
    assert (
        rows["a"]["p_value"] < 1e-6
        and rows["a"]["n_current"] == 60
        and rows["a"]["baseline"] == pytest.approx(0.75, abs=0.03)
    )
    assert (
        run_check(parse("alerts", "check", *flags, "--at", at, "--json", "--fail-on-firing"), io.StringIO()) == 0
    )  # only pending
    assert StateStore(store).load() == {}  # check writes nothing


def test_backtest_reports_the_fire_time_and_touches_no_state(populated: tuple[ClickHouseStore, list[str]]) -> None:
    """`alerts backtest` reports when the drop would have fired and after what delay, as JSON and as a table, and
    writes no state."""
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
    assert report["rules"] == [
        {"rule": "relevancy_drop", "fired": 1, "suppressed": 0, "mean_delay_s": 600.0, "still_firing": 1, "errors": 0}
    ]
    table = io.StringIO()
    run_backtest_cmd(
        parse(
            "alerts",
            "backtest",
            *flags,
            "--since",
            (T0 + timedelta(hours=24)).isoformat(),
            "--until",
            (DROP_AT + timedelta(hours=2)).isoformat(),
        ),
        table,
    )
    assert "relevancy_drop" in table.getvalue() and "still firing" in table.getvalue()
    assert store.query(f"SELECT count() FROM {store.database}.alert_state").rows[0][0] == 0


def test_run_once_notifies_and_keeps_state(
    store: ClickHouseStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`alerts run --once` takes the webhook from ALERTS_*, notifies the firing segment and stores its state."""
    now = datetime.now(UTC)  # `run` evaluates at the real time: the data is placed around it
    segs = [{"app": "a"}, {"app": "b"}]
    insert(
        store,
        stream(
            now - timedelta(hours=25), now - timedelta(minutes=40), per_minute=2, segments=segs, score=noisy(0.75, 0.1)
        ),
    )
    insert(
        store, stream(now - timedelta(minutes=40), now, per_minute=2, segments=segs[:1], score=noisy(0.45, 0.1), seed=3)
    )
    insert(
        store, stream(now - timedelta(minutes=40), now, per_minute=2, segments=segs[1:], score=noisy(0.75, 0.1), seed=4)
    )
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES_YAML.replace("for: 10m", "for: 0s"), encoding="utf-8")
    flags = ["--rules", str(rules), "--clickhouse-url", store.url, "--clickhouse-database", store.database]
    with Receiver() as receiver:
        monkeypatch.setenv("ALERTS_WEBHOOK_URL", receiver.base + "/hook")
        ns = parse("alerts", "run", *flags, "--once", "--no-lease")
        assert alert_settings(ns).webhook_url == receiver.base + "/hook"
        out = io.StringIO()
        assert run_alerts(ns, out) == 0
        [post] = receiver.posts["/hook"]
    assert [a["segment"]["app"] for a in post["alerts"]] == ["a"]
    states = StateStore(store).load()
    assert [(dict(s.segment)["app"], s.state) for s in states.values()] == [("a", "firing")]
    # It says what it evaluated and what it sent.
    lines = out.getvalue().splitlines()
    assert lines[1] == "evaluated 1 rule, 2 segments: 1 firing (1 new), 0 pending, 0 resolved this round, 1 quiet"
    assert lines[-1] == "notifications: webhook 1 sent; state rows saved: 1"

    monkeypatch.delenv("ALERTS_WEBHOOK_URL")
    out = io.StringIO()
    assert run_alerts(parse("alerts", "run", *flags, "--once", "--no-lease"), out) == 0
    assert out.getvalue().splitlines()[-1].startswith("no notifier configured: nothing sent")


def test_the_round_summary_names_each_notifier_and_its_failures() -> None:
    """The `run --once` summary lists each notifier with what it sent and failed, and says when this replica does not
    lead."""
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    report = RoundReport(
        True,
        Evaluation(now, [], []),
        sent=2,
        failed=1,
        saved=3,
        deliveries=(Delivery("webhook", 2), Delivery("alertmanager", 0, 1, "POST http://am:9093/... failed: HTTP 503")),
    )
    lines = round_summary(report, "r1", ["webhook", "alertmanager"])
    assert lines[0] == "alerts run at 2026-11-30T12:00:00+00:00 (replica r1)"
    assert lines[-1] == (
        "notifications: webhook 2 sent; alertmanager 0 sent, 1 failed (POST http://am:9093/... failed: HTTP 503); "
        "state rows saved: 3"
    )
    assert round_summary(RoundReport(False), "r2", ["webhook"])[1].startswith("not the leader")


NOW = T0 + timedelta(hours=12, minutes=30)


@pytest.fixture
def fresh(store: ClickHouseStore) -> tuple[ClickHouseStore, list[str]]:
    """A store whose only rows are from the last minute and a half before NOW, and the flags for the default rules."""
    insert(
        store,
        [
            make_row(NOW - timedelta(seconds=100 - 10 * k), app=app)
            for k in range(10)
            for app in ("support-bot", "travel-agent")
        ],
    )
    return store, ["--clickhouse-url", store.url, "--clickhouse-database", store.database, "--at", NOW.isoformat()]


def test_check_lists_every_rule_and_says_why_nothing_was_decided(
    fresh: tuple[ClickHouseStore, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On minutes-old data `check --json` has an object for every rule: its segments, or one saying which window was
    empty and why."""
    monkeypatch.delenv("ALERTS_RULES", raising=False)
    _, flags = fresh
    out = io.StringIO()
    assert run_check(parse("alerts", "check", *flags, "--json", "--no-state"), out) == 0
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert rows[0]["rule"] == "relevancy_drop"  # in the order of the rules file
    assert {r["rule"] for r in rows} == {r.name for r in load_rules().rules}
    by_rule = {r["rule"]: r for r in rows}
    # The detector sums every minute up to now: it sees the rows, and says it has no baseline to judge them by.
    drop = by_rule["relevancy_drop"]
    assert (
        drop["segment"] is not None
        and not drop["sufficient"]
        and drop["no_decision"][0]["gap"] == "few_baseline_events"
    )
    floor = by_rule["relevancy_floor"]
    assert floor["segment"] is None and not floor["sufficient"]
    assert (
        floor["reason"]
        == "no judged rows between 11:58 and 12:28 (the window ends `offset` 2m before now; newest row 12:29)"
    )
    assert floor["no_decision"] == [{"gap": "no_rows", "newest": (NOW - timedelta(seconds=10)).isoformat()}]
    assert by_rule["upstream_silent"]["no_decision"][0]["gap"] == "traffic_empty"
    silent = by_rule["stream_silent"]
    assert silent["segment"] == {} and silent["no_decision"] == [{"gap": "silent_few_baseline", "have": 0, "need": 1}]
    assert all(r["reason"] for r in rows if not r["sufficient"])


def test_the_check_table_fits_80_columns_or_points_at_json(
    fresh: tuple[ClickHouseStore, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check table wraps to 80 columns with every rule and its reason, and a console too narrow for it gets one
    line naming --json."""
    monkeypatch.delenv("ALERTS_RULES", raising=False)
    monkeypatch.delenv("COLUMNS", raising=False)
    _, flags = fresh
    out = io.StringIO()
    run_check(parse("alerts", "check", *flags, "--no-state"), out)
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert all(r.name in text for r in load_rules().rules)
    words = " ".join(text.split())  # the reasons wrap inside their column
    assert "the window ends `offset` 2m before now; newest row 12:29" in words and "traffic table empty" in words

    narrow = io.StringIO()
    print_check(check_rows(Evaluation(NOW, [], [])), NOW, Console(file=narrow, width=50))
    assert narrow.getvalue() == "too narrow for the table (50 columns, 60 needed): use --json\n"


def test_backtest_shows_progress_on_stderr_and_keeps_stdout_clean(populated: tuple[ClickHouseStore, list[str]]) -> None:
    """The backtest's progress goes to its own console (stderr), its JSON on stdout stays one clean object, and its
    tables fit 80 columns."""
    _, flags = populated
    span = ["--since", (T0 + timedelta(hours=24)).isoformat(), "--until", (DROP_AT + timedelta(hours=2)).isoformat()]
    err, out = io.StringIO(), io.StringIO()
    run_backtest_cmd(
        parse("alerts", "backtest", *flags, *span, "--json"), out, Console(file=err, force_terminal=True, width=80)
    )
    assert json.loads(out.getvalue())["evaluations"] == 30
    assert "evaluating" in err.getvalue() and "30/30" in err.getvalue() and "reading history" in err.getvalue()
    table = io.StringIO()
    run_backtest_cmd(parse("alerts", "backtest", *flags, *span), table, Console(file=io.StringIO()))
    assert max(len(line) for line in table.getvalue().splitlines()) <= 80 and "relevancy_drop" in table.getvalue()


def test_every_flag_of_every_action_has_a_description_and_a_default() -> None:
    """`--help` of run, check, accept and backtest describes every flag and gives its default (or says it is
    required)."""
    parser = argparse.ArgumentParser(prog="relevancy-monitor")
    register(parser.add_subparsers(dest="command", required=True))
    alerts = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["alerts"]
    actions = next(a for a in alerts._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert set(actions) == {"run", "check", "accept", "backtest"}
    for name, sub in actions.items():
        assert sub.description, name
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
                continue  # -h, and the hidden former spellings
            text = action.help or ""
            assert not text.startswith("[env"), (name, action.option_strings)  # a description before the variable
            assert "default" in text or "required" in text, (name, action.option_strings, text)


def _alert_actions() -> dict[str, argparse.ArgumentParser]:
    parser = argparse.ArgumentParser(prog="relevancy-monitor")
    register(parser.add_subparsers(dest="command", required=True))
    alerts = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["alerts"]
    return dict(next(a for a in alerts._actions if isinstance(a, argparse._SubParsersAction)).choices)


def test_every_alert_setting_is_the_flag_of_its_name_in_alerts_run() -> None:
    """Each AlertSettings field, the ones added later too, is the flag `--<name>` of `alerts run`, as each MONITOR_*
    setting is of `run`: its description, its ALERTS_* variable and its default in the help."""
    from monitor.devtools.config_reference import default_text

    shown = {a.dest: a for a in _alert_actions()["run"]._actions if a.help != argparse.SUPPRESS}
    for name, field in AlertSettings.model_fields.items():
        action = shown.get(name)
        assert action is not None, f"no flag for AlertSettings.{name}"
        assert action.option_strings == ["--" + name.replace("_", "-")], name
        assert action.default is None, name  # unset flags leave the ALERTS_* variable in force
        text = " ".join((action.help or "").replace("%%", "%").split())
        default = (default_text(field) or "unset").replace("`", "")
        assert text.startswith((field.description or "").replace("`", "")), name
        assert f"[env ALERTS_{name.upper()}; default: {default}" in text, (name, text)
    for action_name in ("check", "accept", "backtest"):
        dests = {a.dest for a in _alert_actions()[action_name]._actions}
        assert {"rules", "traffic_table"} <= dests and "webhook_url" not in dests, action_name


def test_a_webhook_url_flag_says_to_keep_it_in_the_environment() -> None:
    """The flags of the URLs that carry a token say that argv shows in `ps`; the others do not."""
    helps = {a.dest: a.help or "" for a in _alert_actions()["run"]._actions}
    assert "flags show in ps" in helps["webhook_url"] and "flags show in ps" in helps["slack_webhook_url"]
    assert "flags show in ps" not in helps["alertmanager_url"] + helps["generator_url"]


def test_the_former_notify_timeout_flag_still_works_and_names_the_new_one(capsys: pytest.CaptureFixture[str]) -> None:
    """`--notify-timeout` (before the flag took its variable's name) still sets ALERTS_NOTIFY_TIMEOUT_S, with one
    stderr line naming `--notify-timeout-s`; the new spelling gives the same setting."""
    old = alert_settings(parse("alerts", "run", "--notify-timeout", "7"))
    assert capsys.readouterr().err == (
        "relevancy-monitor: --notify-timeout is now --notify-timeout-s (the old spelling still works, for now)\n"
    )
    assert old.notify_timeout_s == alert_settings(parse("alerts", "run", "--notify-timeout-s", "7")).notify_timeout_s
    assert old.notify_timeout_s == 7.0


def test_bad_input_is_a_one_line_error(populated: tuple[ClickHouseStore, list[str]], tmp_path: Path) -> None:
    """A bad rules file, time or rule name raises a one-line error naming the input."""
    from schemas.errors import RulesError, UsageError

    _, flags = populated
    bad = tmp_path / "bad.yaml"
    bad.write_text(RULES_YAML.replace("for: 10m", "for: ten minutes"), encoding="utf-8")
    with pytest.raises(
        RulesError, match=r"bad.yaml: rules\[0\] \(relevancy_drop\).for: 'ten minutes' is not a duration"
    ):
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
    """Through the real entry point, check on an empty store decides nothing, and an invalid rules file exits 2 with
    one line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MONITOR_", "ALERTS_"))}
    env["MONITOR_CLICKHOUSE_URL"] = f"chdb://{tmp_path / 'chdb'}"

    def run(*a: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", _MAIN, *a], env=env, capture_output=True, text=True, timeout=120)

    done = run("migrate")  # `alerts check` reads an existing store only; it never creates one
    assert done.returncode == 0, done.stderr
    done = run("alerts", "check", "--json")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    # Empty store: every rule is listed and none decided anything; nothing reads as firing or fine.
    assert [r["rule"] for r in rows] == [r.name for r in load_rules().rules]
    assert not any(r["sufficient"] for r in rows) and {r["state"] for r in rows} == {"inactive"}
    scores = [
        r
        for r in rows
        if r["metric"] not in ("no_data", "coverage", "scoring_lag_p90", "control_kappa")
        and not r["metric"].startswith(("canary_", "feedback_"))
    ]
    assert {r["reason"] for r in scores} == {"no judged rows in the store yet"}
    # The users' feedback rules say there is none yet, and how it arrives.
    assert {r["reason"].split(" (")[0] for r in rows if r["metric"].startswith("feedback_")} == {
        "no users' feedback in the store yet"
    }
    # The reviewers' agreement rule counts the labels it has against those it needs, in one line.
    [labels] = [r for r in rows if r["metric"] == "control_kappa"]
    assert labels["reason"].startswith("0 labels on the control slice, 50 needed") and "\n" not in labels["reason"]
    assert {r["reason"].split(" (")[0] for r in rows if r["metric"].startswith("canary_")} == {
        "no canary run in the store yet"
    }
    (tmp_path / "r.yaml").write_text("rules:\n  - name: x\n    metric: mean_score\n", encoding="utf-8")
    done = run("alerts", "check", "--rules", str(tmp_path / "r.yaml"))
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert done.stderr.startswith("relevancy-monitor: error: ") and "condition needs threshold" in done.stderr


@pytest.mark.long(seconds=20)
def test_run_logs_one_structured_line_per_round(tmp_path: Path) -> None:
    """`alerts run` logs one JSON line per round with the counts of rules, segments and states and what each notifier
    was given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MONITOR_", "ALERTS_"))}
    env.update(
        MONITOR_CLICKHOUSE_URL=f"chdb://{tmp_path / 'chdb'}",
        MONITOR_LOG_FORMAT="json",
        ALERTS_WEBHOOK_URL="http://127.0.0.1:9/hook",
    )
    assert (
        subprocess.run([sys.executable, "-c", _MAIN, "migrate"], env=env, capture_output=True, timeout=120).returncode
        == 0
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", _MAIN, "alerts", "run", "--no-lease", "--interval", "1s"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    rounds = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            entry = json.loads(line)
            if entry.get("event") == "alert round":
                rounds.append(entry)
            if len(rounds) == 2:
                break
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    first = rounds[0]
    assert (
        first["rules"] == len(load_rules().rules)
        and first["segments"] == 1
        and first["empty_rules"] == len(load_rules().rules) - 1
    )
    assert (first["firing"], first["pending"], first["resolved"], first["no_decision"], first["rule_errors"]) == (
        0,
        0,
        0,
        1,
        0,
    )
    assert first["notifications"] == {"webhook": {"sent": 0, "failed": 0}} and first["level"] == "info"


DETECTOR_YAML = """
rules:
  - name: relevancy_drop
    metric: mean_score
    segment_by: [app]
    window: 6h
    baseline: {trailing: 7d}
    detector: {shift: 0.1}
    min_baseline_events: 100
    severity: page
"""


def test_a_detector_page_is_accepted_from_the_command_line(store: ClickHouseStore, tmp_path: Path) -> None:
    """`alerts run` pages on the drop, `check` says what each segment detects and the false alarms a week expected,
    and `alerts accept` resolves the page with the new level, recording who; the next round does not page again."""
    now = datetime.now(UTC)  # `run` and `accept` work at the real time: the data is placed around it
    segs = [{"app": "a"}, {"app": "b"}]
    insert(
        store,
        stream(
            now - timedelta(hours=25), now - timedelta(minutes=40), per_minute=2, segments=segs, score=noisy(0.75, 0.1)
        ),
    )
    insert(
        store, stream(now - timedelta(minutes=40), now, per_minute=2, segments=segs[:1], score=noisy(0.45, 0.1), seed=3)
    )
    insert(
        store, stream(now - timedelta(minutes=40), now, per_minute=2, segments=segs[1:], score=noisy(0.75, 0.1), seed=4)
    )
    rules = tmp_path / "rules.yaml"
    rules.write_text(DETECTOR_YAML, encoding="utf-8")
    flags = ["--rules", str(rules), "--clickhouse-url", store.url, "--clickhouse-database", store.database]
    assert run_alerts(parse("alerts", "run", *flags, "--once", "--no-lease"), io.StringIO()) == 0
    assert [(dict(s.segment)["app"], s.state) for s in StateStore(store).load().values()] == [("a", "firing")]

    out = io.StringIO()
    assert run_check(parse("alerts", "check", *flags), out) == 0
    text = " ".join(out.getvalue().split())
    assert "judged/min, detects a" in text and "expected false alarms a week over these segments: page 1" in text, text

    out = io.StringIO()
    assert run_accept(parse("alerts", "accept", *flags, "relevancy_drop", "app=a", "--by", "oncall"), out) == 0
    assert "accepted by oncall" in out.getvalue()
    [state] = [s for s in StateStore(store).load().values() if dict(s.segment)["app"] == "a"]
    assert state.state == "resolved" and state.frozen is not None and state.frozen.accepted_by == "oncall"
    assert state.frozen.reference.mean == pytest.approx(0.45, abs=0.05)
    summary = io.StringIO()
    assert run_alerts(parse("alerts", "run", *flags, "--once", "--no-lease"), summary) == 0
    assert "0 firing" in summary.getvalue(), summary.getvalue()

    with pytest.raises(UsageError, match="no open episode to accept"):
        run_accept(parse("alerts", "accept", *flags, "relevancy_drop", "app=a"), io.StringIO())


def test_check_names_the_calls_that_came_without_content(populated: tuple[ClickHouseStore, list[str]]) -> None:
    """Calls counted as `no_content` in the last hour are named per app under the table, so a segment with no scores
    is not read as one with no traffic."""
    from monitor.judging.traffic_counts import COLUMNS, TrafficCounter

    store, flags = populated
    at = DROP_AT + timedelta(minutes=40)
    counter = TrafficCounter()
    for minutes in (5, 30, 90):  # the last is more than an hour before `at`
        counter.add((at - timedelta(minutes=minutes)).timestamp(), "voice-bot", "claude", "", "no_content")
    store.insert_table("traffic_counts", COLUMNS, counter.drain())
    out = io.StringIO()
    run_check(parse("alerts", "check", *flags, "--at", at.isoformat()), out)
    text = " ".join(out.getvalue().split())
    assert (
        "2 OpenTelemetry LLM calls in the last hour came without their text and were not scored (voice-bot 2)" in text
    )
