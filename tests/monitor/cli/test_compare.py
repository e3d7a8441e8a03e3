"""`relevancy-monitor compare` on a real chDB store: hand-checkable agreement of two judges, the default choice of
judges, the statistics' edge cases, and one-line errors for bad input."""

from __future__ import annotations

import argparse
import io
import json
import os
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import clickhouse_connect
import pytest
from clickhouse_connect.driver.client import Client

import monitor.cli.main as cli_main
import monitor.store.connection as store_module
from monitor.cli.compare import register, run_compare
from monitor.compare.agreement import SharedEvent, compare
from monitor.store.connection import ClickHouseStore
from schemas.errors import UsageError
from schemas.scored import ScoredRow
from tests.monitor.alerts.conftest import T0, insert, make_row

A, B = "lexical-aaaaaaaaaaaa", "statements-bbbbbbbbbbbb"
# (event, judge a's score, judge b's score). Ranks of a: 1..5; of b: 1 2 4 5 3, so Σd² = 6 and
# ρ = 1 − 6·6 / (5·24) = 0.7. b − a = .30 .33 .35 .15 −.40: mean 0.146, |b − a| mean 0.306.
SHARED = (("e1", 0.0, 0.3), ("e2", 0.25, 0.58), ("e3", 0.5, 0.85), ("e4", 0.75, 0.9), ("e5", 1.0, 0.6))
SPAN = ["--since", (T0 - timedelta(hours=1)).isoformat(), "--until", (T0 + timedelta(hours=2)).isoformat()]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in list(os.environ):
        if k.startswith(("MONITOR_", "ALERTS_", "ANTHROPIC_")):
            monkeypatch.delenv(k)


def row(event_id: str, judge_id: str, score: float | None, minute: int, status: str = "ok") -> ScoredRow:
    """One row of `judge_id` for `event_id`, `minute` minutes after T0, with a question naming the event."""
    statements = ("Order A17 shipped.", "We sell gift cards.")
    verdicts = ("yes", "no") if (score or 0) < 0.5 else ("yes", "yes")
    base = make_row(
        T0 + timedelta(minutes=minute),
        event_id=event_id,
        judge_id=judge_id,
        judge=judge_id.split("-")[0],
        score=score,
        status=status,
        statements=statements if status == "ok" else (),
        verdicts=verdicts if status == "ok" else (),
    )
    return base.model_copy(
        update={"question": f"When did order {event_id} ship?\nPlease answer.", "app": "support-bot"}
    )


@pytest.fixture
def two_judges(store: ClickHouseStore) -> ClickHouseStore:
    """Five shared events; e6 judged by a only; e7 ok for a, an error row for b (so a has more rows, 7 to 6)."""
    rows = [r for i, (e, a, b) in enumerate(SHARED) for r in (row(e, A, a, i), row(e, B, b, i))]
    rows += [row("e6", A, 0.9, 10), row("e7", A, 0.1, 11), row("e7", B, None, 11, status="error")]
    insert(store, rows)
    return store


def parse(*argv: str) -> argparse.Namespace:
    """Parse `argv` with a parser that holds only the `compare` command."""
    parser = argparse.ArgumentParser(prog="relevancy-monitor")
    register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["compare", *argv])


def flags(store: ClickHouseStore) -> list[str]:
    """The store flags of `store`."""
    return ["--clickhouse-url", store.url, "--clickhouse-database", store.database]


def _read_only_client(url: str, **options: Any) -> Client:
    return clickhouse_connect.get_client(dsn=url, **{**options, "settings": {"readonly": 1}})


def test_compare_reports_hand_checkable_agreement_between_two_judges(
    two_judges: ClickHouseStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the five shared events (both ok): ρ 0.7, mean b − a 0.146 with its t interval, MAE 0.306, the low/high
    table and the disagreements largest first with both verdict lists, read through a read-only session."""
    monkeypatch.setattr(store_module, "open_client", _read_only_client)  # any DDL or write would fail
    out = io.StringIO()
    assert run_compare(parse(*flags(two_judges), *SPAN, "--json"), out) == 0
    doc = json.loads(out.getvalue())
    assert (
        doc["judge_a"]["judge_id"],
        doc["judge_a"]["rows"],
        doc["judge_b"]["judge_id"],
        doc["judge_b"]["ok_rows"],
    ) == (A, 7, B, 5)
    assert doc["shared_events"] == 5
    assert doc["spearman_rho"]["value"] == pytest.approx(0.7)
    diff = doc["mean_difference_b_minus_a"]
    assert diff["value"] == pytest.approx(0.146) and diff["ci"] == pytest.approx(
        [-0.2453, 0.5373], abs=1e-3
    )  # ± t(.975, 4)·s/√5
    assert doc["mean_absolute_difference"]["value"] == pytest.approx(0.306)
    assert {k: v for k, v in doc["confusion"].items() if k != "low_below"} == {
        "a_low_b_low": 1,
        "a_low_b_high": 1,
        "a_high_b_low": 0,
        "a_high_b_high": 3,
    }
    worst = doc["disagreements"]
    assert [d["event_id"] for d in worst] == ["e5", "e3", "e2", "e1", "e4"]
    assert worst[0] == {
        "event_id": "e5",
        "app": "support-bot",
        "question": "When did order e5 ship?\nPlease answer.",
        "score_a": 1.0,
        "score_b": 0.6,
        "difference": pytest.approx(-0.4),
        "verdicts_a": ["yes", "yes"],
        "verdicts_b": ["yes", "yes"],
    }

    text = io.StringIO()
    assert run_compare(parse(*flags(two_judges), *SPAN), text, width=80) == 0
    shown = text.getvalue()
    print(shown)
    lines = shown.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "Spearman ρ                           0.700" in lines
    assert "mean difference b - a                +0.146  95% CI -0.245 .. +0.537" in lines
    assert "  same side: 4 of 5 (80%)" in lines
    first = lines.index("   b - a      a      b  app / event_id") + 1
    assert lines[first : first + 3] == [
        "  -0.400  1.000  0.600  support-bot / e5",
        "         q: When did order e5 ship? Please answer.",
        "         verdicts a: yes yes  b: yes yes",
    ]


def test_a_replay_with_a_new_judge_is_compared_with_the_live_judge(store: ClickHouseStore) -> None:
    """Judge b's rows written by `relevancy-monitor replay` (replay_run set) are compared with judge a's live rows of
    the same events, exactly as two live judges are: same shared events, ρ and verdicts."""
    rows = [
        r
        for i, (e, a, b) in enumerate(SHARED)
        for r in (row(e, A, a, i), row(e, B, b, i).model_copy(update={"replay_run": "run-1"}))
    ]
    insert(store, rows)
    out = io.StringIO()
    assert run_compare(parse(*flags(store), *SPAN, "--json"), out) == 0
    doc = json.loads(out.getvalue())
    assert (doc["judge_a"]["judge_id"], doc["judge_b"]["judge_id"], doc["judge_b"]["rows"], doc["shared_events"]) == (
        A,
        B,
        5,
        5,
    )
    assert doc["spearman_rho"]["value"] == pytest.approx(0.7)
    assert doc["disagreements"][0]["verdicts_b"] == ["yes", "yes"]


def test_the_default_judges_are_the_only_two_in_the_range(
    two_judges: ClickHouseStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two judges in the range are taken as a (more rows) and b, or one is named and the other taken; a third
    judge makes the command list the judges with their rows and stop with one line asking to choose."""
    for given in ([], ["--judge-b", B], ["--judge-a", B]):
        out = io.StringIO()
        run_compare(parse(*flags(two_judges), *SPAN, "--json", *given), out)
        doc = json.loads(out.getvalue())
        want = (B, A) if given == ["--judge-a", B] else (A, B)
        assert (doc["judge_a"]["judge_id"], doc["judge_b"]["judge_id"]) == want
    insert(two_judges, [row("e1", "rubric-cccccccccccc", 0.5, 1)])
    listing = io.StringIO()
    with pytest.raises(UsageError) as info:
        run_compare(parse(*flags(two_judges), *SPAN), listing, width=80)
    assert str(info.value).startswith("3 judge(s) have rows between ") and str(info.value).endswith(
        "choose two with --judge-a and --judge-b"
    )
    shown = listing.getvalue()
    assert all(j in shown for j in (A, B, "rubric-cccccccccccc")) and "3 row(s)" in shown
    as_json = io.StringIO()
    with pytest.raises(UsageError):
        run_compare(parse(*flags(two_judges), *SPAN, "--json"), as_json)
    assert [(j["judge_id"], j["rows"]) for j in json.loads(as_json.getvalue())["judges"]] == [
        (A, 7),
        (B, 6),
        ("rubric-cccccccccccc", 1),
    ]
    out = io.StringIO()
    assert (
        run_compare(parse(*flags(two_judges), *SPAN, "--json", "--judge-a", A, "--judge-b", "rubric-cccccccccccc"), out)
        == 0
    )
    assert json.loads(out.getvalue())["shared_events"] == 1
    with pytest.raises(UsageError, match=r"^no judge has rows between .*: widen --since/--until$"):
        run_compare(parse(*flags(two_judges), "--since", "2020-01-01", "--until", "2020-01-02"), io.StringIO())


@pytest.fixture
def wired_main(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`monitor.cli.main.main` with `compare` registered the way the lead will wire it (as is, if already wired)."""
    build = cli_main.build_parser

    def with_compare() -> argparse.ArgumentParser:
        parser = build()
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        if "compare" not in sub.choices:
            register(sub)
        return parser

    monkeypatch.setattr(cli_main, "build_parser", with_compare)
    yield


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--since", "yesterday"], "--since: 'yesterday' is neither ISO 8601"),
        (
            ["--since", "2026-11-03", "--until", "2026-11-02"],
            "--until (2026-11-02T00:00:00+00:00) must be after --since (2026-11-03T00:00:00+00:00)",
        ),
        (["--judge-a", A, "--judge-b", A], f"--judge-a and --judge-b are both {A}: name two judges"),
        (
            [*SPAN, "--judge-b", "nope-1"],
            "--judge-b: judge nope-1 has no rows between 2026-11-01 23:00:00 UTC and 2026-11-02 02:00:00 UTC",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    two_judges: ClickHouseStore, wired_main: None, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """A bad time, an empty range, the same judge twice or an unknown judge id: exit 2 and one line naming the input."""
    assert cli_main.main(["compare", *flags(two_judges), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"relevancy-monitor: error: {message}"), err


def test_a_missing_table_is_one_line_and_creates_nothing(
    store: ClickHouseStore, wired_main: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a database without the scores table, `compare` exits 1 with one line saying to migrate, like the other read
    paths."""
    assert (
        cli_main.main(["compare", "--clickhouse-url", store.url, "--clickhouse-database", f"{store.database}_missing"])
        == 1
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{store.database}_missing.relevancy_scores not found" in err, err


def test_agreement_is_undefined_rather_than_made_up_on_degenerate_input() -> None:
    """No shared events, one event, or a judge giving one score throughout: the statistics say why they are
    undefined."""
    empty = compare([])
    assert (empty.n, empty.spearman.value, empty.mean_difference.value, empty.mae.value, empty.disagreements) == (
        0,
        None,
        None,
        None,
        (),
    )
    one = compare([SharedEvent("a", "e1", 0.2, 0.6)])
    assert (
        one.mean_difference.value == pytest.approx(0.4)
        and one.mean_difference.ci is None
        and one.mean_difference.undefined
    )
    flat = compare([SharedEvent("a", f"e{i}", 0.5, s) for i, s in enumerate((0.1, 0.5, 0.9))])
    assert flat.spearman.value is None and "all judge a's scores are equal" in (flat.spearman.undefined or "")
    assert [e.event_id for e in flat.disagreements] == [
        "e0",
        "e2",
    ]  # exact agreement is no disagreement; ties keep input order
    assert flat.confusion.a_high_b_low == 1 and flat.confusion.a_high_b_high == 2
