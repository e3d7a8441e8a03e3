"""`relevancy-monitor calibrate` end to end: in-process through a parser built around `register`, with the offline
judge and with the LLM judges against the fake Messages API, and once as a real subprocess for the exit code."""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len

from monitor.calibration.labels import golden_path
from monitor.cli.calibrate import LARGE_SET, labels_source, progress_mode, register, run_calibrate
from monitor.cli.calibration_tables import MAX_STATEMENTS
from schemas.errors import ConfigError, LabelsError, UsageError
from tests.fake_messages_api import FakeMessagesAPI, overloaded
from tests.monitor.calibration.test_agreement import KAPPA, MAE, RHO, TAU

ROOT = Path(__file__).resolve().parents[3]
QUESTION = "When did order A17 ship?"
RELEVANT = "Order A17 shipped on 3 March."
OFF_TOPIC = ("We also sell gift cards.", "Our shop opens at nine.", "Parking is free on Sundays.")

# The six pairs of test_agreement, as answers whose lexical (and fake-rubric) share of relevant sentences is
# the judge score there: 0, 1/2, 1/4, 3/4, 1, 3/4.
HAND_SET = [
    (0, " ".join(OFF_TOPIC[:1])),
    (1, f"{RELEVANT} {OFF_TOPIC[0]}"),
    (2, f"{RELEVANT} {' '.join(OFF_TOPIC)}"),
    (3, f"{RELEVANT} The parcel shipped from Leeds. Order A17 was tracked. {OFF_TOPIC[0]}"),
    (4, RELEVANT),
    (4, f"{RELEVANT} The parcel shipped from Leeds. Order A17 was tracked. {OFF_TOPIC[0]}"),
]

# What the console script's main() does around a subcommand, with `calibrate` registered.
SCRIPT = """
import argparse, sys
from schemas.errors import MonitorError
from monitor.cli.calibrate import register
parser = argparse.ArgumentParser(prog="relevancy-monitor")
register(parser.add_subparsers(dest="command", required=True))
ns = parser.parse_args(sys.argv[1:])
try:
    sys.exit(ns.func(ns))
except MonitorError as e:
    print(f"relevancy-monitor: error: {e}", file=sys.stderr)
    sys.exit(e.exit_code)
"""


def parse(*argv: str) -> argparse.Namespace:
    """Parse `relevancy-monitor calibrate` arguments with a parser built around `register`."""
    parser = argparse.ArgumentParser(prog="relevancy-monitor")
    register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["calibrate", *argv])


def run(*argv: str, err: io.StringIO | None = None) -> tuple[int, str, str]:
    """Run the command in-process; (exit code, stdout, stderr)."""
    out, err = io.StringIO(), err or io.StringIO()
    code = run_calibrate(parse(*argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def write_labels(path: Path, rows: list[dict[str, Any]]) -> Path:
    """A labels file of `rows`, one JSON object a line."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def hand_set(tmp_path: Path) -> Path:
    """The hand-computed six pairs as a labels file, with ids and two categories."""
    rows = [
        {
            "id": f"h{n}",
            "category": "orders" if n <= 3 else "shipping",
            "question": QUESTION,
            "answer": answer,
            "label": label,
        }
        for n, (label, answer) in enumerate(HAND_SET, start=1)
    ]
    return write_labels(tmp_path / "hand.jsonl", rows)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No MONITOR_* or ANTHROPIC_* variable from the caller's environment; tables 80 columns wide."""
    for var in list(os.environ):
        if var.startswith(("MONITOR_", "ANTHROPIC_")):
            monkeypatch.delenv(var)
    monkeypatch.setenv("COLUMNS", "80")


@pytest.fixture
def api_env(fake_messages_api: FakeMessagesAPI, clean_env: None, monkeypatch: pytest.MonkeyPatch) -> FakeMessagesAPI:
    """The environment pointing the LLM judges at the fake server."""
    for k, v in fake_messages_api.env().items():
        monkeypatch.setenv(k, v)
    return fake_messages_api


def test_lexical_json_report_has_the_hand_computed_statistics(clean_env: None, tmp_path: Path) -> None:
    """The offline judge scores the hand set as test_agreement's scores, so --json carries ρ, τ, κ and MAE by hand."""
    code, out, err = run("--labels", str(hand_set(tmp_path)), "--judge", "lexical", "--json")
    assert code == 0 and err == ""
    doc = json.loads(out)
    s = doc["statistics"]
    assert s["spearman_rho"]["value"] == pytest.approx(RHO)
    assert s["kendall_tau_b"]["value"] == pytest.approx(TAU)
    assert s["weighted_kappa_quadratic"]["value"] == pytest.approx(KAPPA)
    assert s["mae"]["value"] == pytest.approx(MAE)
    assert s["confusion"]["counts"] == {
        "low": {"low": 1, "mid": 1, "high": 0},
        "mid": {"low": 1, "mid": 0, "high": 0},
        "high": {"low": 0, "mid": 0, "high": 3},
    }


def test_json_report_shape(clean_env: None, tmp_path: Path) -> None:
    """--json prints one document: judge identity, labels, counts, cost, statistics with intervals, disagreements."""
    code, out, _ = run(
        "--labels", str(hand_set(tmp_path)), "--judge", "lexical", "--json", "--resamples", "500", "--seed", "3"
    )
    assert code == 0
    doc = json.loads(out)  # one document: a second one would make this fail
    assert set(doc) == {"judge", "labels", "judged", "failed", "failures", "cost", "statistics", "disagreements"}
    assert (
        doc["judge"]["method"] == "lexical"
        and doc["judge"]["judge_id"].startswith("lexical-")
        and doc["judge"]["heuristic"] is True
    )
    assert doc["labels"] == {"source": str(tmp_path / "hand.jsonl"), "scale": "rubric", "pairs": 6}
    assert (doc["judged"], doc["failed"], doc["failures"]) == (6, 0, [])
    assert doc["cost"] == {
        "usd": 0.0,
        "calls": 6,
        "tokens": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
    }
    s = doc["statistics"]
    assert s["n"] == 6 and s["failures_excluded"] == 0
    assert s["bootstrap"] == {
        "resamples": 500,
        "seed": 3,
        "confidence": 0.95,
        "method": "percentile, pairs resampled with replacement",
    }
    rho = s["spearman_rho"]
    assert (
        rho["undefined"] is None
        and len(rho["ci"]) == 2
        and rho["ci"][0] <= rho["value"] <= rho["ci"][1]
        and 0 < rho["resamples_used"] <= 500
    )
    kappa = s["weighted_kappa_quadratic"]  # with its bootstrap interval, as the UI's agreement page shows it
    assert kappa["ci"][0] <= kappa["value"] <= kappa["ci"][1] and 0 < kappa["resamples_used"] <= 500
    assert [c["category"] for c in s["categories"]] == ["orders", "shipping"]
    assert s["categories"][0] == {
        "category": "orders",
        "n": 3,
        "mean_label": pytest.approx(0.25),  # labels 0, 1, 2 over 4
        "mean_score": pytest.approx(0.25),  # scores 0, .5, .25
        "mae": pytest.approx(1 / 6),  # gaps 0, .25, .25
        "spearman_rho": {"value": None, "ci": None, "undefined": "needs at least 5 pairs, has 3", "resamples_used": 0},
    }
    # Gaps .25 for h2, h3 and h6 (input order breaks the tie); h1, h4, h5 agree exactly and are not listed.
    assert [d["id"] for d in doc["disagreements"]] == ["h2", "h3", "h6"]
    first = doc["disagreements"][0]
    assert (
        first["line"] == 2
        and first["label"] == 1
        and first["label_unit"] == 0.25
        and first["score"] == 0.5
        and first["bucket"] == 2
    )
    assert first["gap"] == 0.25 and first["question"] == QUESTION and "1 of 2 sentences" in first["reasoning"]
    assert [st["verdict"] for st in first["statements"]] == ["yes", "no"]


def test_table_report_is_readable_at_80_columns(clean_env: None, tmp_path: Path) -> None:
    """The tables show the judge, every statistic, the confusion, categories and disagreements, no line over 80."""
    rows = [
        {
            "id": f"a-very-long-identifier-{n:03d}",
            "category": "a category name long enough to need folding",
            "question": QUESTION * 3,
            "answer": answer,
            "label": label,
        }
        for n, (label, answer) in enumerate(HAND_SET)
    ]
    code, out, _ = run("--labels", str(write_labels(tmp_path / "wide.jsonl", rows)), "--judge", "lexical")
    assert code == 0
    for needle in (
        "Calibration of the lexical judge (a word-overlap heuristic, not an LLM)",
        "judge_id: lexical-",
        "judged 6 of 6 pairs",
        "Spearman ρ",
        "Kendall τ-b",
        "Cohen's κ, quadratic",
        "mean absolute error",
        "label \\ judge",
        "By category",
        "Largest disagreements (3 of 6 judged pairs)",
        "percentile bootstrap over 2,000 resamples",
    ):
        assert needle in out, needle
    too_wide = [line for line in out.splitlines() if cell_len(line) > 80]
    assert too_wide == []


def test_undefined_statistics_are_reported_as_such(clean_env: None, tmp_path: Path) -> None:
    """With every label equal the table says ρ and τ are undefined and why, and --json gives null with the reason."""
    rows = [{"question": QUESTION, "answer": a, "label": 2} for _, a in HAND_SET[:4]]
    path = write_labels(tmp_path / "flat.jsonl", rows)
    code, out, _ = run("--labels", str(path), "--judge", "lexical")
    assert code == 0
    rho_line = next(line for line in out.splitlines() if "Spearman" in line)
    assert "undefined" in rho_line and "(all labels are equal)" in rho_line
    doc = json.loads(run("--labels", str(path), "--judge", "lexical", "--json")[1])
    assert doc["statistics"]["kendall_tau_b"] == {
        "value": None,
        "ci": None,
        "undefined": "all labels are equal",
        "resamples_used": 0,
    }


def test_two_pairs_report_without_correlations(clean_env: None, tmp_path: Path) -> None:
    """n < 3: the report still prints, the correlations say they need three pairs, MAE is there."""
    path = write_labels(
        tmp_path / "two.jsonl",
        [
            {"question": QUESTION, "answer": RELEVANT, "label": 4},
            {"question": QUESTION, "answer": OFF_TOPIC[0], "label": 1},
        ],
    )
    code, out, _ = run("--labels", str(path), "--judge", "lexical", "--json")
    s = json.loads(out)["statistics"]
    assert code == 0 and s["n"] == 2
    assert s["spearman_rho"]["undefined"] == "needs at least 3 pairs, has 2"
    assert s["mae"]["value"] == pytest.approx(0.125)  # gaps 0 and .25


def test_a_label_export_with_extra_fields_is_judged_and_its_extra_fields_listed_once(
    clean_env: None, tmp_path: Path
) -> None:
    """Lines carrying notes and annotator ids are judged; the fields read past are named once on stderr."""
    rows = [
        {"question": QUESTION, "answer": RELEVANT, "label": 4, "notes": "clear", "annotator": "a-1"},
        {"question": QUESTION, "answer": OFF_TOPIC[0], "label": 1, "notes": "off topic"},
    ]
    code, out, err = run("--labels", str(write_labels(tmp_path / "export.jsonl", rows)), "--judge", "lexical", "--json")
    assert code == 0 and json.loads(out)["statistics"]["n"] == 2
    assert err.count("fields not used, ignored: annotator, notes") == 1, err


@pytest.mark.parametrize("method", ["rubric", "statements"])
def test_llm_judges_against_the_fake_api_with_cost_and_reasons(
    api_env: FakeMessagesAPI, tmp_path: Path, method: str
) -> None:
    """An LLM judge scores the set over the real client: one request per pair, cost and tokens summed, its reasons
    shown."""
    code, out, _ = run("--labels", str(hand_set(tmp_path)), "--judge", method, "--json")
    assert code == 0
    doc = json.loads(out)
    assert (
        doc["judge"]["method"] == method
        and doc["judge"]["heuristic"] is False
        and doc["judge"]["model"] == "claude-haiku-5-5"
    )
    assert len(api_env.message_requests) == 6 == doc["cost"]["calls"]
    assert doc["cost"]["usd"] > 0 and doc["cost"]["input_tokens"] > 0 and doc["cost"]["output_tokens"] > 0
    worst = doc["disagreements"][0]
    if method == "statements":  # the same shares as the lexical judge: the hand-computed statistics again
        assert doc["statistics"]["spearman_rho"]["value"] == pytest.approx(RHO)
        assert [st["verdict"] for st in worst["statements"]] == ["yes", "no"]
        assert worst["statements"][1]["reason"] == "does not address the question"
    else:  # the fake rubric rounds 4 × share: 1/2 → 2, 1/4 → 1, 3/4 → 3, so the same buckets as well
        assert doc["statistics"]["weighted_kappa_quadratic"]["value"] == pytest.approx(KAPPA)
        assert worst["reasoning"] == "1 of 2 sentences address the question." and worst["statements"] == []


def test_statements_table_lists_each_statement_with_its_verdict(api_env: FakeMessagesAPI, tmp_path: Path) -> None:
    """In the table, a disagreement shows the judge's statements with yes/no and the reason for a no."""
    code, out, _ = run("--labels", str(hand_set(tmp_path)), "--judge", "statements")
    assert code == 0
    assert "cost: $" in out and "tokens: " in out and "(in " in out
    lines = out.splitlines()
    gift = next(line for line in lines if "We also sell gift cards. (does not address the question)" in line)
    assert gift.split()[0] == "no"
    assert any(line.split()[:2] == ["yes", "Order"] for line in lines)


def test_judge_failures_are_counted_listed_and_left_out(
    api_env: FakeMessagesAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two pairs whose calls fail (529, no retries) are counted, listed with their reason, left out of n; exit 1."""
    for k, v in {
        "MONITOR_JUDGE_MAX_RETRIES": "0",
        "MONITOR_JUDGE_EVENT_ATTEMPTS": "1",
        "MONITOR_JUDGE_CONCURRENCY": "1",
    }.items():
        monkeypatch.setenv(k, v)
    api_env.fail_next(2, overloaded())  # one call at a time, in input order: pairs h1 and h2 get the 529s
    path = hand_set(tmp_path)
    code, out, err = run("--labels", str(path), "--judge", "rubric", "--json")
    assert code == 1
    assert err == "relevancy-monitor calibrate: 2 of 6 pairs could not be judged; they are left out of the statistics\n"
    doc = json.loads(out)
    assert (doc["judged"], doc["failed"]) == (6 - 2, 2)
    assert [(f["id"], f["line"], f["reason"]) for f in doc["failures"]] == [
        ("h1", 1, "unavailable"),
        ("h2", 2, "unavailable"),
    ]
    assert "overloaded" in doc["failures"][0]["message"]
    assert doc["statistics"]["n"] == 4 and doc["statistics"]["failures_excluded"] == 2
    assert {d["id"] for d in doc["disagreements"]} <= {"h3", "h4", "h5", "h6"}
    assert doc["cost"]["calls"] == 6  # the failed calls were made, and count


def test_failures_in_the_table_are_said_to_be_left_out(
    api_env: FakeMessagesAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The table's header and a closing section name the failed pairs and say the statistics leave them out."""
    for k, v in {
        "MONITOR_JUDGE_MAX_RETRIES": "0",
        "MONITOR_JUDGE_EVENT_ATTEMPTS": "1",
        "MONITOR_JUDGE_CONCURRENCY": "1",
    }.items():
        monkeypatch.setenv(k, v)
    api_env.fail_next(1, overloaded())
    code, out, _ = run("--labels", str(hand_set(tmp_path)), "--judge", "rubric")
    assert code == 1
    text = " ".join(out.split())  # the terminal width decides where long lines wrap
    assert "judged 5 of 6 pairs; 1 failed (left out of the statistics, listed at the end)" in text
    assert "Agreement with the labels over 5 judged pairs" in text
    assert "Pairs the judge could not score (1; left out of every statistic above)" in text
    assert "h1, line 1 [orders]: unavailable:" in text


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            '{"question": "Q?", "answer": "A.", "label": 1}\n{"question": "Q?", "answer": "A.", "label": 9}\n',
            "line 2: label 9 is out of range 0–4",
        ),
        ('{"question": "Q?", "answer": "A.", "label": 1}\n\n{oops\n', "line 3: not valid JSON"),
        ('{"question": "Q?", "label": 1}\n', "line 1: missing field 'answer' (or 'response')"),
        ("", "has no labelled pairs"),
    ],
)
def test_a_malformed_file_stops_before_any_judging(
    api_env: FakeMessagesAPI, tmp_path: Path, content: str, expected: str
) -> None:
    """A bad labels file raises LabelsError naming the line, and no request reaches the judge."""
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(LabelsError, match=f"^{re.escape(str(path))} {re.escape(expected)}"):
        run("--labels", str(path), "--judge", "rubric")
    assert api_env.message_requests == []


def test_a_malformed_file_exits_2_with_one_line_from_the_console(clean_env: None, tmp_path: Path) -> None:
    """As a process: exit 2 and exactly one stderr line naming the file and the line; nothing on stdout."""
    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"question": "Q?", "answer": "A.", "label": 1}\n{"question": "Q?", "answer": "A.", "label": "high"}\n',
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, "calibrate", "--labels", str(path), "--judge", "lexical"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f'relevancy-monitor: error: {path} line 2: label must be a number, not "high"\n'


def test_an_llm_judge_without_a_key_is_a_config_error(clean_env: None, tmp_path: Path) -> None:
    """The rubric judge with no API key stops with the one-line ConfigError of `judge` (exit 2)."""
    with pytest.raises(ConfigError, match="MONITOR_ANTHROPIC_API_KEY") as caught:
        run("--labels", str(hand_set(tmp_path)), "--judge", "rubric")
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("method", ["rubric", "statements"])
def test_a_dry_run_prices_the_set_without_a_key(
    fake_messages_api: FakeMessagesAPI, clean_env: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    """--dry-run with an LLM judge and no API key prints the calls, tokens and USD of the set and sends nothing."""
    monkeypatch.setenv("MONITOR_ANTHROPIC_BASE_URL", fake_messages_api.base_url)
    code, out, _ = run("--labels", str(hand_set(tmp_path)), "--judge", method, "--dry-run")
    assert code == 0 and fake_messages_api.message_requests == []
    assert "to judge  6 pairs: 6 judge calls" in out and "nothing was judged (--dry-run)" in out, out
    usd = float(re.search(r"estimate  \$([0-9.]+), list prices", out).group(1))  # type: ignore[union-attr]
    assert 0 < usd < 0.01, out


def test_golden_means_the_packaged_set_and_excludes_labels() -> None:
    """--golden resolves to golden_set.jsonl in monitor/calibration; with --labels too, argparse refuses."""
    assert labels_source(parse("--golden")) == golden_path()
    assert labels_source(parse("--labels", "mine.jsonl")) == Path("mine.jsonl")
    with pytest.raises(SystemExit) as caught:
        parse("--golden", "--labels", "mine.jsonl")
    assert caught.value.code == 2


def test_labels_source_without_either_is_a_usage_error() -> None:
    """Called with neither --labels nor --golden (a namespace built by hand), it is a one-line UsageError."""
    with pytest.raises(UsageError, match="give --labels FILE or --golden"):
        labels_source(argparse.Namespace(golden=False, labels=None))


def test_unit_scale_labels(clean_env: None, tmp_path: Path) -> None:
    """--label-scale unit reads 0..1 labels with decimals and reports them on that scale."""
    rows = [
        {"question": QUESTION, "answer": a, "label": round(label / 4 - 0.05 * (label > 0), 2)} for label, a in HAND_SET
    ]
    code, out, _ = run(
        "--labels",
        str(write_labels(tmp_path / "unit.jsonl", rows)),
        "--judge",
        "lexical",
        "--label-scale",
        "unit",
        "--json",
    )
    doc = json.loads(out)
    assert code == 0 and doc["labels"]["scale"] == "unit"
    assert doc["disagreements"][0]["label"] == doc["disagreements"][0]["label_unit"]


def test_progress_goes_to_stderr_as_lines_for_a_large_redirected_set(clean_env: None, tmp_path: Path) -> None:
    """With stderr not a terminal, a large set gets one progress line per tenth on stderr; stdout stays one JSON
    document."""
    rows = [
        {"question": QUESTION, "answer": RELEVANT if n % 2 else OFF_TOPIC[0], "label": 4 if n % 2 else n % 3}
        for n in range(LARGE_SET)
    ]
    code, out, err = run("--labels", str(write_labels(tmp_path / "large.jsonl", rows)), "--judge", "lexical", "--json")
    assert code == 0 and json.loads(out)["judged"] == LARGE_SET
    lines = err.splitlines()
    assert lines[-1] == f"relevancy-monitor calibrate: judged {LARGE_SET} of {LARGE_SET} pairs"
    assert len(lines) == 10


def test_a_terminal_gets_a_progress_bar_on_stderr_only(clean_env: None, tmp_path: Path) -> None:
    """When stderr is a terminal the rich bar is drawn there, and the JSON on stdout is untouched."""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    code, out, err = run("--labels", str(hand_set(tmp_path)), "--judge", "lexical", "--json", err=Terminal())
    assert code == 0 and json.loads(out)["judged"] == 6
    assert "judging" in err and "6/6" in err


def test_progress_mode_decisions() -> None:
    """A terminal always gets the bar; a redirected stderr gets lines from LARGE_SET pairs, nothing below."""
    assert progress_mode(True, 3) == "bar"
    assert progress_mode(False, LARGE_SET) == "lines"
    assert progress_mode(False, LARGE_SET - 1) == "none"


def test_every_option_in_the_help_has_a_description_and_a_default() -> None:
    """Each calibrate option says what it does and its default (or that it is required, or is a switch)."""
    parser = argparse.ArgumentParser(prog="relevancy-monitor")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    calibrate = sub.choices["calibrate"]
    for action in calibrate._actions:
        if isinstance(action, argparse._HelpAction) or not action.option_strings:
            continue
        assert action.help, action.option_strings
        switch = action.nargs == 0 or isinstance(action, argparse.BooleanOptionalAction)
        assert switch or "default" in action.help or "required" in action.help, action.option_strings
    text = calibrate.format_help()
    for flag in (
        "--labels",
        "--golden",
        "--label-scale",
        "--json",
        "--judge",
        "--judge-model",
        "--anthropic-base-url",
        "--judge-concurrency",
    ):
        assert flag in text, flag
    assert "--judge-timeout-s" in text and "--judge-requests-per-minute" in text and "--redact" in text


def test_a_long_answer_shows_its_first_statements_and_says_how_many_more(clean_env: None, tmp_path: Path) -> None:
    """A disagreement over an answer of 10 statements lists MAX_STATEMENTS of them and the count of the rest."""
    long_answer = " ".join(f"Sentence number {n} is about parking." for n in range(10))
    rows = [
        {"question": QUESTION, "answer": a, "label": label}
        for label, a in [(4, long_answer), (4, RELEVANT), (0, OFF_TOPIC[0])]
    ]
    code, out, _ = run("--labels", str(write_labels(tmp_path / "long.jsonl", rows)), "--judge", "lexical")
    assert code == 0
    assert sum(line.split()[:2] == ["no", "Sentence"] for line in out.splitlines()) == MAX_STATEMENTS
    assert f"… {10 - MAX_STATEMENTS} more statements (--json lists them all)" in out
    doc = json.loads(run("--labels", str(tmp_path / "long.jsonl"), "--judge", "lexical", "--json")[1])
    assert len(doc["disagreements"][0]["statements"]) == 10 and doc["disagreements"][0]["label"] == 4


def test_golden_runs_end_to_end_on_the_shipped_set(clean_env: None) -> None:
    """--golden judges every pair of the packaged set (with the offline judge here) and names it as the source."""
    pairs = sum(1 for line in golden_path().read_text(encoding="utf-8").splitlines() if line.strip())
    code, out, _ = run("--golden", "--judge", "lexical", "--json")
    doc = json.loads(out)
    assert (
        code == 0
        and doc["labels"] == {"source": str(golden_path()), "scale": "rubric", "pairs": pairs}
        and doc["judged"] == pairs
    )


FOLLOW_UP_CASE: dict[str, Any] = {
    "id": "m1",
    "category": "followup_relevant",
    "tags": ["multi_turn"],
    "system": "You help the customers of a kettle shop.",
    "context": [
        {"role": "user", "text": "Which kettles ship to Spain?"},
        {"role": "assistant", "text": "The blue and the steel kettle."},
    ],
    "question": "How long does the second one take?",
    "answer": "About four days.",
    "label": 4,
}


@pytest.mark.usefixtures("clean_env")
def test_calibrate_judges_multi_turn_cases_with_the_settings_window_and_breaks_figures_down_by_tag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The judge is handed each case's context cut to MONITOR_JUDGE_CONTEXT_TURNS, with its brief and turn index;
    the report gives the figures per tag (untagged pairs apart) and shows a disagreeing case's context."""
    import monitor.calibration.run as run_module
    from tests.monitor.calibration.test_run import _Recorder

    recorder = _Recorder(monkeypatch, run_module)
    monkeypatch.setenv("MONITOR_JUDGE_CONTEXT_TURNS", "1")
    labels = hand_set(tmp_path).read_text(encoding="utf-8") + json.dumps(FOLLOW_UP_CASE) + "\n"
    path = tmp_path / "mixed.jsonl"
    path.write_text(labels, encoding="utf-8")
    code, out, _ = run("--labels", str(path), "--judge", "lexical", "--json")
    assert code == 0
    [event] = [e for e in recorder.events if e.event_id == "m1"]
    assert [(t.role, t.text) for t in event.context] == [("assistant", "The blue and the steel kettle.")]
    assert (event.system, event.turn, event.shape) == ("You help the customers of a kettle shop.", 1, "chat")
    assert all(e.context == () and e.turn == 0 for e in recorder.events if e.event_id != "m1")
    doc = json.loads(out)
    tags = {row["tag"]: row for row in doc["statistics"]["tags"]}
    assert set(tags) == {"multi_turn", None} and (tags["multi_turn"]["n"], tags[None]["n"]) == (1, 6)
    assert (tags["multi_turn"]["mean_label"], tags["multi_turn"]["mean_score"]) == (1.0, 0.0)  # context-blind
    [shown] = [d for d in doc["disagreements"] if d["id"] == "m1"]
    assert shown["context"] == FOLLOW_UP_CASE["context"] and shown["tags"] == ["multi_turn"]

    _, table, _ = run("--labels", str(path), "--judge", "lexical")
    assert "By tag" in table and "multi_turn" in table and "(untagged)" in table


@pytest.mark.usefixtures("clean_env")
def test_a_set_without_tags_has_no_tag_breakdown(tmp_path: Path) -> None:
    """Old-format labels (no tags, no context) give an empty tag list and no "By tag" table."""
    _, out, _ = run("--labels", str(hand_set(tmp_path)), "--judge", "lexical", "--json")
    assert json.loads(out)["statistics"]["tags"] == []
    _, table, _ = run("--labels", str(hand_set(tmp_path)), "--judge", "lexical")
    assert "By tag" not in table


@pytest.mark.usefixtures("clean_env")
def test_a_dry_run_counts_the_context_the_judge_would_read(
    fake_messages_api: FakeMessagesAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The estimate of a multi-turn case grows with its earlier turns and brief, and shrinks back to the case alone
    with MONITOR_JUDGE_CONTEXT_TURNS=0 and MONITOR_JUDGE_CONTEXT_SYSTEM=false."""
    monkeypatch.setenv("MONITOR_ANTHROPIC_BASE_URL", fake_messages_api.base_url)
    long_context = [{"role": "user", "text": "Which kettles ship to Spain? " * 40}, FOLLOW_UP_CASE["context"][1]]
    with_context = write_labels(tmp_path / "with.jsonl", [{**FOLLOW_UP_CASE, "context": long_context}])
    alone = {k: v for k, v in FOLLOW_UP_CASE.items() if k not in ("context", "system")}
    without = write_labels(tmp_path / "without.jsonl", [alone])

    def input_tokens(path: Path) -> int:
        _, out, _ = run("--labels", str(path), "--judge", "rubric", "--dry-run")
        return int(re.search(r"about ([0-9,]+) input", out).group(1).replace(",", ""))  # type: ignore[union-attr]

    assert input_tokens(with_context) > input_tokens(without) + 200
    monkeypatch.setenv("MONITOR_JUDGE_CONTEXT_TURNS", "0")
    monkeypatch.setenv("MONITOR_JUDGE_CONTEXT_SYSTEM", "false")
    assert input_tokens(with_context) == input_tokens(without)
