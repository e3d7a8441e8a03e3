"""The demo as a new user runs it: one command that ends with the planted alert, and the pure parts behind it."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from consumers.decode import decode_event
from monitor.devtools.demo import MARKER_FILE, PLANTED_RULE, plan_demo, prepare_store
from monitor.devtools.demo_traffic import APPS, REGRESSED, history, regressed_segment, story_event
from schemas.errors import DecodeError, UsageError
from schemas.events import KafkaPosition
from tests.fake_messages_api import FakeMessagesAPI
from tests.harness import cli, monitor_env


async def _cli(*args: str, limit_s: float = 240, **extra: str) -> tuple[int, str, str]:
    # A wide screen: the paths it names (longer in xdist's per-worker temporary directories) stay on one line.
    return await cli(*args, env=monitor_env(COLUMNS="250", **extra), limit_s=limit_s)


@pytest.mark.long(seconds=120)
@pytest.mark.slow
async def test_the_demo_ends_with_exactly_the_planted_alert(tmp_path: Path) -> None:
    """`demo` exits 0 having fired the shipped relevancy_drop for the regressed app's new prompt version, and no alert
    on anything else; the screen names it, the report exists, and the store keeps the alert state for `sql`."""
    store, report = tmp_path / "store", tmp_path / "report.html"
    code, out, err = await _cli(
        "demo", "--rate", "30", "--duration", "100", "--clickhouse-url", f"chdb://{store}", "--report", str(report)
    )
    screen = out + err
    assert code == 0, screen
    assert f"ALERT FIRED {PLANTED_RULE} (severity page)" in screen, screen
    segments = re.findall(r"segment +(app=.*) *\n", screen)
    assert segments and all("app=support-bot" in s and "prompt_version=v13" in s for s in segments), screen
    assert report.is_file() and str(report) in screen
    code, out, err = await _cli(
        "sql",
        "--clickhouse-url",
        f"chdb://{store}",
        "--format",
        "json",
        "SELECT rule, segment, state FROM alert_state FINAL WHERE state = 'firing'",
    )
    assert code == 0, err
    firing = [json.loads(line) for line in out.splitlines()]
    assert PLANTED_RULE in {f["rule"] for f in firing}, firing
    for f in firing:  # the shipped rules that fired, all on the planted segment
        segment = dict(json.loads(f["segment"]))
        assert regressed_segment().items() <= segment.items(), segment
    assert (store / MARKER_FILE).is_file()
    _the_console_tells_the_story(screen)
    _the_feedback_lines_show_v13_disliked_more(screen)
    _the_report_leads_with_the_change(report.read_text(encoding="utf-8"))
    _the_charts_mark_the_rollout_and_colour_what_fired(json.loads(await _charts(store)))


def _the_console_tells_the_story(screen: str) -> None:
    """The rollout is announced with its time as it happens, then what the rules decided, in that order."""
    rollout = re.search(r"^(\d\d:\d\d:\d\d) support-bot rolls out prompt v13 \(pads its answers\)$", screen, re.M)
    fired = re.search(
        r"^(\d\d:\d\d:\d\d) relevancy_drop \(page\) firing for app=support-bot.*prompt_version=v13.*: "
        r"0\.\d+ against 0\.\d+ \(n=\d+\)$",
        screen,
        re.M,
    )
    assert rollout and fired and rollout.start() < fired.start() and rollout[1] <= fired[1], screen


def _the_feedback_lines_show_v13_disliked_more(screen: str) -> None:
    """Users' thumbs-down share on the regressed app is higher on v13 than on v12, and the judge's AUC against users
    is shown (the closing lines of `monitor.devtools.demo_feedback`)."""
    shares = re.search(r"Users' thumbs-down on support-bot: v12 ([\d.]+)% \(n=\d+\), v13 ([\d.]+)% \(n=\d+\)", screen)
    assert shares and float(shares[2]) > float(shares[1]), screen
    assert re.search(r"Judge against users \(lexical[^)]*\): AUC 0\.\d\d", screen), screen


def _the_report_leads_with_the_change(html: str) -> None:
    """The report covers the whole store (history and live), leads with the headline, the rollout and the verdict,
    charts support-bot first, and shows v13's padded answers, each answer once, with the line that finds it."""
    header = html.split("</header>")[0]
    # The range runs from the history's start to the report: 6 h of history and the live run, which on a loaded
    # machine may run minutes past its --duration, so the hours shown are those of the range, at least the 6.
    shown = re.search(
        r"Range (\S+ \S+) UTC – (\S+ \S+) UTC \((\d+\.\d) h\): all the data in the store, up to 7 days", header
    )
    assert shown, header
    start, end = (datetime.fromisoformat(t) for t in shown.group(1, 2))
    hours = (end - start).total_seconds() / 3600
    assert f"{hours:.1f}" == shown[3] and 6.0 <= hours < 6.5, header
    changed = html.split('id="changed">')[1].split("</section>")[0]
    assert re.search(
        # The detector or the rollout's always-valid test, whichever fired first on the new prompt version (the
        # follow-ups' own detector is held while relevancy_drop fires on their segment).
        r"support-bot v13: relevancy 0\.\d\d against 0\.\d\d since [-0-9: ]+UTC \(-\d+ %\), firing "
        r"(relevancy_drop|prompt_rollout_regression)",
        changed,
    ), changed
    assert "support-bot v13 first appeared at" in changed and 'id="chart-zoom"' in changed
    assert "The product changed, not the judge" in changed and "canary held" in changed, changed  # lexical canary
    relevancy = html.split('id="relevancy">')[1]
    assert relevancy.index("<h3>app support-bot</h3>") < relevancy.index("<h3>app coding-assistant</h3>")
    worst = html.split('id="worst">')[1].split("</section>")[0]
    rows = worst.split("<tr>")[2:]
    assert len(rows) >= 10 and all("<td>support-bot</td><td>v13</td>" in r for r in rows), worst[:3000]
    answers = [re.findall(r'<div class="text">(.*?)</div>', r, re.S)[1] for r in rows]
    assert len(set(answers)) == len(answers)
    padded = [r for r in rows if 'class="v v-yes"' in r and 'class="v v-no"' in r]
    assert len(padded) >= 5 and all("find it: <code>relevancy-monitor sql" in r for r in rows)


async def _charts(store: Path) -> str:
    """The demo store's report charts as JSON, read in a process of their own (chDB holds one store per process)."""
    script = (
        "import json, sys\n"
        "from datetime import UTC, datetime\n"
        "from monitor.report.queries import fetch_report_data\n"
        "from monitor.report.buckets import bucket_seconds\n"
        "from monitor.report.write import charts_of, default_since\n"
        "from monitor.store.connection import ClickHouseStore\n"
        "store = ClickHouseStore(sys.argv[1], 'relevancy', 'relevancy_scores')\n"
        "store.open_for_reads()\n"
        "until = datetime.now(UTC)\n"
        "since = default_since(store, until)\n"
        "charts, _ = charts_of(fetch_report_data(store, since, until, bucket_seconds(since, until)))\n"
        "print(json.dumps([{'key': c.key, 'marks': [m.label for m in c.marks], 'spans': [s.state for s in c.spans],\n"
        "  'lines': [[l.label, l.muted] for l in c.panels[0].lines]} for c in charts]))\n"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, f"chdb://{store}", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    return out.decode()


def _the_charts_mark_the_rollout_and_colour_what_fired(charts: list[dict[str, object]]) -> None:
    """The zoom on support-bot comes first, with v13's first-seen mark and the firing shading; v13 is in colour and
    v12 in grey behind it."""
    zoom, first_app = charts[0], charts[1]
    assert zoom["key"] == "zoom" and first_app["key"] == "relevancy-support-bot", charts
    for chart in (zoom, first_app):
        marks, spans, lines = chart["marks"], chart["spans"], dict(chart["lines"])  # type: ignore[call-overload]
        assert any(str(m).startswith("v13 first seen ") for m in marks) and "firing" in spans, chart  # type: ignore[attr-defined]
        (v13,) = [muted for label, muted in lines.items() if label.startswith("v13 ")]
        (v12,) = [muted for label, muted in lines.items() if label.startswith("v12 ")]
        assert (v13, v12) == (False, True), chart


@pytest.mark.long(seconds=138)
@pytest.mark.slow
async def test_with_an_api_key_the_demo_judges_with_the_llm(tmp_path: Path, fake_messages_api: FakeMessagesAPI) -> None:
    """With an API key (here the suite's fake Messages API) the demo says it uses the statements LLM judge, every
    event goes to the API, and the planted regression still fires."""
    store, report = tmp_path / "store", tmp_path / "report.html"
    args = ("demo", "--duration", "150", "--clickhouse-url", f"chdb://{store}", "--report", str(report))
    code, out, err = await _cli(*args, limit_s=300, **fake_messages_api.env())
    screen = out + err
    assert code == 0, screen
    assert "judge statements: the LLM splits" in screen and f"ALERT FIRED {PLANTED_RULE}" in screen, screen
    assert len(fake_messages_api.requests) >= 300  # the history alone


def test_the_judge_follows_the_api_key(tmp_path: Path) -> None:
    """With ANTHROPIC_API_KEY the demo uses the statements LLM judge and at most 4 events/s; without, the lexical
    one."""
    offline = plan_demo(60, 40, tmp_path, tmp_path / "r.html", {})
    online = plan_demo(60, 40, tmp_path, tmp_path / "r.html", {"ANTHROPIC_API_KEY": "sk-test"})
    assert (
        plan_demo(60, 40, tmp_path, tmp_path / "r.html", {"MONITOR_ANTHROPIC_API_KEY": "sk-test"}).judge == "statements"
    )
    assert (offline.judge, offline.rate) == ("lexical", 40)
    assert (online.judge, online.rate) == ("statements", 4.0) and online.history_events < offline.history_events


@pytest.mark.parametrize(("duration", "rate"), [(10, 40), (60, 0), (60, 10_000)])
def test_a_bad_duration_or_rate_is_a_usage_error(tmp_path: Path, duration: float, rate: float) -> None:
    """Too short a run, or a rate outside 1..5000 per second, is refused in one line."""
    with pytest.raises(UsageError):
        plan_demo(duration, rate, tmp_path, tmp_path / "r.html", {})


def test_the_store_is_replaced_only_when_the_demo_wrote_it(tmp_path: Path) -> None:
    """An earlier demo's store is replaced; a store without the marker, or written after it, is refused."""
    store = tmp_path / "store"
    (store / "data").mkdir(parents=True)
    (store / "data" / "part.bin").write_bytes(b"x")
    with pytest.raises(UsageError, match="did not write"):
        prepare_store(store)
    (store / MARKER_FILE).write_text("{}")
    later = (store / MARKER_FILE).stat().st_mtime + 3600
    os.utime(store / "data" / "part.bin", (later, later))
    with pytest.raises(UsageError, match="written to after"):
        prepare_store(store)
    os.utime(store / "data" / "part.bin", (later - 7200, later - 7200))
    prepare_store(store)
    assert not store.exists()


def test_history_spreads_over_the_hours_before_now_and_decodes() -> None:
    """History events are in time order within the hours before now, almost all decode, and none is regressed."""
    now = datetime.now(UTC)
    values = history(random.Random(1), now, 6, 500)
    events = []
    for i, v in enumerate(values):
        try:
            events.append(
                decode_event(v, position=KafkaPosition(topic="t", partition=0, offset=i), record_timestamp_ms=None)
            )
        except DecodeError:
            pass
    assert 470 <= len(events) < 500  # about 1% malformed on purpose
    times = [e.event_time for e in events]
    assert times == sorted(times) and now - timedelta(hours=6) <= times[0] and times[-1] <= now
    assert {e.prompt_version for e in events if e.app == REGRESSED.name} == {REGRESSED.version}
    assert {e.app for e in events} == {a.name for a in APPS}


def test_the_regressed_version_pads_more() -> None:
    """After the rollout the regressed app runs its new version, and its answers are longer (padded) more often."""
    rng, now = random.Random(2), datetime.now(UTC)

    def padded_share(regressed: bool) -> float:
        answers = []
        for i in range(3000):
            try:
                e = decode_event(
                    story_event(rng, now, regressed=regressed),
                    position=KafkaPosition(topic="t", partition=0, offset=i),
                    record_timestamp_ms=None,
                )
            except DecodeError:
                continue
            if e.app == REGRESSED.name:
                answers.append((e.prompt_version, e.response.count(". ") + e.response.count("! ")))
        assert {v for v, _ in answers} == {REGRESSED.new_version if regressed else REGRESSED.version}
        return sum(n >= 1 for _, n in answers) / len(answers)

    assert padded_share(True) > padded_share(False) + 0.4


def test_the_demo_runs_the_shipped_rules_only() -> None:
    """The evaluator runs the shipped rules, and the rule the demo waits for is one of them (no demo-only rule)."""
    from monitor.alerts.rules import load_rules
    from monitor.devtools import demo

    assert PLANTED_RULE in {r.name for r in load_rules().rules}
    assert not hasattr(demo, "DEMO_RULE")


def test_the_demo_store_is_embedded_and_defaults_to_the_one_run_uses(tmp_path: Path) -> None:
    """The flag wins, then an embedded MONITOR_CLICKHOUSE_URL, then the default store of `run`; a server is refused."""
    from monitor.cli.demo import demo_directory
    from monitor.store.settings import DEFAULT_CLICKHOUSE_URL
    from monitor.store.urls import chdb_directory

    assert demo_directory(f"chdb://{tmp_path}/a", {"MONITOR_CLICKHOUSE_URL": f"chdb://{tmp_path}/b"}) == tmp_path / "a"
    assert demo_directory(None, {"MONITOR_CLICKHOUSE_URL": f"chdb://{tmp_path}/b"}) == tmp_path / "b"
    assert demo_directory(None, {"MONITOR_CLICKHOUSE_URL": "https://ch.example:8443"}) == chdb_directory(
        DEFAULT_CLICKHOUSE_URL
    )
    with pytest.raises(UsageError, match="embedded"):
        demo_directory("https://ch.example:8443", {})


def test_the_final_screen_says_what_the_rules_decided_for_each_app() -> None:
    """Each app gets what the last round decided for it (firing, pending, inactive, nothing), never a blanket "no
    alert" for the apps meant to stay stable (the OTLP demo once paged on one while saying it had no alert)."""
    from monitor.devtools.demo_screen import app_decisions

    decided = [
        ("support-bot", "relevancy_drop", "firing"),
        ("support-bot", "no_data", "inactive"),
        ("coding-assistant", "relevancy_drop", "firing"),
        ("coding-assistant", "low_score_share_rise", "pending"),
        ("travel-agent", "relevancy_drop", "inactive"),
        ("travel-agent", "no_data", "inactive"),
    ]
    lines = [line for line, _style in app_decisions(["support-bot", "coding-assistant", "travel-agent", "x"], decided)]
    assert lines == [
        "support-bot: firing relevancy_drop.",
        "coding-assistant: firing relevancy_drop.",
        "travel-agent: no alert (2 rules evaluated, none firing).",
        "x: no rule could decide (too few events, or no evaluation ran).",
    ]


def test_the_demo_closes_with_the_web_ui_and_the_fired_alerts_page() -> None:
    """The last lines name `ui` with the store flag the other commands use, and the alert page of the planted rule
    (the headline, whatever fired before it) on the UI's default address, its segment as alert_state keys it; with
    nothing fired, the overview."""
    from urllib.parse import parse_qs, urlsplit

    from monitor.alerts.evaluator import AlertState
    from monitor.devtools.demo_screen import ui_lines

    segment = (("app", "support-bot"), ("model", "m"), ("prompt_version", "v13"), ("judge_id", "lexical@1"))
    fired = [AlertState("prompt_rollout_regression", segment, "firing"), AlertState(PLANTED_RULE, segment, "firing")]
    flag = " --clickhouse-url chdb:///tmp/demo-store"
    header, command, url = ui_lines(fired, "relevancy-monitor", flag)
    assert "web UI" in header
    assert command == '  relevancy-monitor ui --clickhouse-url chdb:///tmp/demo-store --reviewer "${USER:-me}"'
    parts = urlsplit(url.strip())
    assert (parts.scheme, parts.netloc, parts.path) == ("http", "127.0.0.1:8787", "/alert")
    query = parse_qs(parts.query)
    assert query["rule"] == [PLANTED_RULE]
    assert [tuple(pair) for pair in json.loads(query["segment"][0])] == list(segment)
    assert query["segment"] == [AlertState(PLANTED_RULE, segment).key[1]]
    _, command, url = ui_lines([], ".venv/bin/relevancy-monitor")
    assert (command, url) == ('  .venv/bin/relevancy-monitor ui --reviewer "${USER:-me}"', "  http://127.0.0.1:8787/")
