"""`relevancy-monitor judge`, run against the fake Messages API: in-process through a parser built around
`register`, and as a real subprocess."""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.cli.judge import register, run_judge
from monitor.judges.context_window import SYSTEM_CUT_MARK
from schemas.errors import ConfigError, UsageError
from tests.fake_messages_api import FakeMessagesAPI, RecordedRequest, Reply, overloaded

QUESTION = "When did order A17 ship?"
PADDED = "Thanks for getting in touch. We also sell gift cards. Order A17 shipped on 3 March."
TIGHT = "Order A17 shipped on 3 March."
ROOT = Path(__file__).resolve().parents[3]

# The kettle follow-up of issue 43: relevant only through the earlier turns.
SYSTEM = "You are the support assistant of a kettle shop. Only answer questions about kettles and their delivery."
CONTEXT = [
    {"role": "user", "text": "Which kettles ship to Spain?"},
    {"role": "assistant", "text": "The blue and the steel kettle."},
]
FOLLOW_UP = "How long does the second one take?"
FOUR_DAYS = "About four days."

# What the console script's main() does around a subcommand, with `judge` registered.
SCRIPT = """
import argparse, sys
from schemas.errors import UsageError
from schemas.errors import ConfigError
from monitor.cli.judge import register
parser = argparse.ArgumentParser(prog="relevancy-monitor")
register(parser.add_subparsers(dest="command", required=True))
ns = parser.parse_args(sys.argv[1:])
try:
    sys.exit(ns.func(ns))
except (ConfigError, UsageError) as e:
    print(f"relevancy-monitor: error: {e}", file=sys.stderr)
    sys.exit(2)
"""


def parse(*argv: str) -> argparse.Namespace:
    """Parse `relevancy-monitor judge` arguments with a parser built around `register`."""
    parser = argparse.ArgumentParser(prog="relevancy-monitor")
    register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["judge", *argv])


def run(*argv: str) -> tuple[int, str, str]:
    """Run the command in-process like main() does; (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        code = run_judge(parse(*argv), out=out, err=err)
    except (ConfigError, UsageError) as e:
        return 2, out.getvalue(), str(e)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def api_env(fake_messages_api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch) -> FakeMessagesAPI:
    """The environment pointing the judges at the fake server (and nothing else from the caller's env)."""
    for var in list(os.environ):
        if var.startswith(("MONITOR_", "ANTHROPIC_")):
            monkeypatch.delenv(var)
    for k, v in fake_messages_api.env().items():
        monkeypatch.setenv(k, v)
    return fake_messages_api


@pytest.mark.parametrize("method", ["statements", "rubric"])
def test_json_output_for_one_pair(api_env: FakeMessagesAPI, method: str) -> None:
    """--json prints one line with the padded pair's score, the judge, usage and cost, from one request."""
    code, out, _ = run("--judge", method, "--question", QUESTION, "--answer", PADDED, "--format", "json")
    assert code == 0
    [line] = out.splitlines()
    obj = json.loads(line)
    assert obj["ok"] is True and obj["judge"]["method"] == method and obj["judge"]["heuristic"] is False
    assert obj["score"] == pytest.approx(1 / 3 if method == "statements" else 0.25)
    assert obj["usage"]["input_tokens"] > 0 and obj["usage"]["cost_usd"] > 0
    if method == "statements":
        assert [s["verdict"] for s in obj["statements"]] == ["no", "no", "yes"]
    assert len(api_env.message_requests) == 1


def test_table_shows_score_reasoning_tokens_and_cost(api_env: FakeMessagesAPI) -> None:
    """The table shows the judge, score, reasoning and cost, and no statements without --verbose."""
    code, out, _ = run("--judge", "statements", "-q", QUESTION, "-a", TIGHT)
    assert code == 0
    assert "statements judge" in out and "1.000" in out and "address the question" in out
    assert "cost USD" in out
    assert "Order A17 shipped" not in out  # statements only with --verbose


def test_verbose_shows_each_statement_with_its_verdict_and_reason(api_env: FakeMessagesAPI) -> None:
    """--verbose lists each statement with its verdict, and the reason for a no."""
    code, out, _ = run("--judge", "statements", "-q", QUESTION, "-a", PADDED, "--verbose")
    assert code == 0
    lines = out.splitlines()
    gift = next(ln for ln in lines if "We also sell gift cards." in ln)
    shipped = next(ln for ln in lines if "Order A17 shipped on 3 March." in ln)
    assert " no " in gift and "does not address" in gift
    assert " yes " in shipped


def test_file_of_pairs_with_both_key_spellings_and_a_bad_line(api_env: FakeMessagesAPI, tmp_path: Path) -> None:
    """A pairs file takes both key spellings and skips blank lines; a broken line is reported and exits 1."""
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(
        json.dumps({"question": QUESTION, "answer": TIGHT})
        + "\n"
        + "\n"
        + json.dumps({"user_message": QUESTION, "response": PADDED})
        + "\n"
        + "{broken\n",
        encoding="utf-8",
    )
    code, out, err = run("--judge", "statements", "--file", str(pairs), "--format", "json")
    assert code == 1
    objs = [json.loads(ln) for ln in out.splitlines()]
    assert [o["index"] for o in objs] == [1, 3, 4]
    assert objs[0]["score"] == 1.0 and objs[1]["score"] == pytest.approx(1 / 3)
    assert objs[2]["ok"] is False and objs[2]["error"]["reason"] == "bad_input"
    assert "pair 4" in err and "line 4" in err
    assert len(api_env.message_requests) == 2


def turns_of(req: RecordedRequest) -> list[dict[str, str]]:
    """The earlier turns in the request's conversation section, as a model would read them ([] without one)."""
    section = req.section("conversation_before")
    if section is None:
        return []
    code = re.findall(r"</assistant_response_([0-9a-f]+)>", req.user_text)[-1]
    found = re.findall(rf'<turn_{code} role="([^"]*)">\n(.*?)\n</turn_{code}>', section, re.DOTALL)
    return [{"role": role, "text": text} for role, text in found]


def follow_up_file(tmp_path: Path, **line: object) -> Path:
    """A pairs file of one line: the kettle follow-up with its context and brief, updated by `line`."""
    path = tmp_path / "pairs.jsonl"
    obj = {"question": FOLLOW_UP, "answer": FOUR_DAYS, "context": CONTEXT, "system": SYSTEM, **line}
    path.write_text(json.dumps(obj) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("method", ["statements", "rubric"])
def test_a_follow_up_line_reaches_the_judge_with_its_context_in_its_sections(
    api_env: FakeMessagesAPI, tmp_path: Path, method: str
) -> None:
    """A line's system instructions and earlier turns arrive in their own sections before the judged pair, through
    the real SDK; the JSON output says how many earlier messages the judge read."""
    code, out, err = run("--judge", method, "--file", str(follow_up_file(tmp_path)), "--format", "json")
    assert code == 0, err
    [req] = api_env.message_requests
    assert req.section("system_instructions") == SYSTEM
    assert turns_of(req) == CONTEXT
    assert req.section("user_question") == FOLLOW_UP and req.section("assistant_response") == FOUR_DAYS
    assert req.user_text.index("<conversation_before_") < req.user_text.index("<user_question_")
    [obj] = [json.loads(ln) for ln in out.splitlines()]
    assert obj["ok"] is True and obj["context_turns"] == 2


def test_a_pair_without_context_reads_none(api_env: FakeMessagesAPI) -> None:
    """A pair from the flags has no context: no context sections, and context_turns 0."""
    code, out, _ = run("--judge", "rubric", "-q", QUESTION, "-a", TIGHT, "--format", "json")
    assert code == 0 and json.loads(out)["context_turns"] == 0
    [req] = api_env.message_requests
    assert req.section("conversation_before") is None and req.section("system_instructions") is None


LONG_BRIEF = SYSTEM * 3  # 309 characters
LONG_TURN = {"role": "user", "text": "Hello! " * 40}  # 280 characters


@pytest.mark.parametrize(
    ("env", "line", "turns", "system"),
    [
        ({"MONITOR_JUDGE_CONTEXT_TURNS": "1"}, {}, CONTEXT[-1:], SYSTEM),
        (
            {"MONITOR_JUDGE_CONTEXT_MAX_CHARS": "200"},
            {"context": [LONG_TURN, *CONTEXT], "system": LONG_BRIEF},
            CONTEXT,
            LONG_BRIEF[: 200 - len(SYSTEM_CUT_MARK)] + SYSTEM_CUT_MARK,
        ),
        ({"MONITOR_JUDGE_CONTEXT_TURNS": "0", "MONITOR_JUDGE_CONTEXT_SYSTEM": "false"}, {}, [], None),
    ],
    ids=["one-turn", "max-chars", "off"],
)
def test_the_context_window_caps_what_the_judge_reads(
    api_env: FakeMessagesAPI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    line: dict[str, object],
    turns: list[dict[str, str]],
    system: str | None,
) -> None:
    """The configured window cuts a line's context as the service would: the newest turns kept, the oldest dropped
    for length, the instructions cut at their end or left out; context_turns counts what was read."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    code, out, err = run("--judge", "rubric", "--file", str(follow_up_file(tmp_path, **line)), "--format", "json")
    assert code == 0, err
    [req] = api_env.message_requests
    assert turns_of(req) == turns
    assert req.section("system_instructions") == system
    assert json.loads(out)["context_turns"] == len(turns)


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ({"context": "Which kettles ship to Spain?"}, "context must be an array of turns, not string"),
        ({"context": [{"role": "user"}]}, "context turn 1 must have exactly 'role' and 'text', has role"),
        ({"context": [{"role": "user", "text": 4}]}, "context turn 1: text must be a string, not number"),
        ({"context": [{"role": "system", "text": SYSTEM}]}, "context turn 1 is a system message"),
        ({"system": ["be brief"]}, "system must be a string, not array"),
    ],
    ids=["not-an-array", "turn-without-text", "text-not-a-string", "system-turn", "system-not-a-string"],
)
def test_a_malformed_context_is_a_one_line_input_error_for_that_line(
    api_env: FakeMessagesAPI, tmp_path: Path, line: dict[str, object], problem: str
) -> None:
    """A line whose context or system instructions are malformed is that line's input error, named on one line,
    while the next line is judged; exit 1, no request for the bad line."""
    path = follow_up_file(tmp_path, **line)
    path.write_text(path.read_text(encoding="utf-8") + json.dumps({"question": QUESTION, "answer": TIGHT}) + "\n")
    code, out, err = run("--judge", "rubric", "--file", str(path), "--format", "json")
    assert code == 1
    bad, good = [json.loads(ln) for ln in out.splitlines()]
    assert bad["ok"] is False and bad["error"]["reason"] == "bad_input"
    assert bad["error"]["message"].startswith(f"line 1: {problem}")
    assert good["ok"] is True
    [err_line] = err.splitlines()
    assert err_line.startswith(f"relevancy-monitor judge: pair 1: bad_input: line 1: {problem}")
    assert len(api_env.message_requests) == 1


def test_verbose_says_how_many_earlier_messages_the_judge_read(api_env: FakeMessagesAPI, tmp_path: Path) -> None:
    """--verbose names, above a follow-up's statements, the earlier messages the judge read."""
    code, out, err = run("--judge", "statements", "--file", str(follow_up_file(tmp_path)), "--verbose")
    assert code == 0, err
    assert "pair 1 (after 2 earlier messages)" in out


def test_judge_failure_is_reported_for_that_pair_and_exits_1(
    api_env: FakeMessagesAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pair whose judge fails is reported on stdout and stderr while the next pair scores; exits 1."""
    api_env.script(Reply("not json"), Reply("not json"))  # pair 1 fails with judge_max_retries=1, pair 2 is fine
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(
        "\n".join(json.dumps({"question": QUESTION, "answer": a}) for a in (PADDED, TIGHT)), encoding="utf-8"
    )
    monkeypatch.setenv("MONITOR_JUDGE_MAX_RETRIES", "1")
    monkeypatch.setenv("MONITOR_JUDGE_CONCURRENCY", "1")
    code, out, err = run("--judge", "rubric", "--file", str(pairs))
    assert code == 1
    assert "invalid_reply" in out and "error" in out
    assert "pair 1: invalid_reply" in err and "pair 2" not in err
    assert "1.000" in out  # the second pair still scored


def test_a_transient_overload_is_ridden_out_by_the_services_guards(
    api_env: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`judge` goes through the same guards as the service: an overload past the client's retries is judged again."""
    api_env.script(overloaded())  # then the default brain answers
    monkeypatch.setenv("MONITOR_JUDGE_MAX_RETRIES", "0")  # the client gives up at once: only the guard retries
    code, out, err = run("--judge", "rubric", "--question", QUESTION, "--answer", TIGHT, "--format", "json")
    assert code == 0, err
    assert json.loads(out)["ok"] is True and len(api_env.message_requests) == 2


@pytest.mark.timeout(90)
def test_a_judge_that_stays_down_ends_the_command_with_every_pair_an_error(
    api_env: FakeMessagesAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Enough failures to open the circuit do not keep a one-shot command waiting: each pair errs, and it exits 1."""
    api_env.always(overloaded())
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("\n".join(json.dumps({"question": QUESTION, "answer": TIGHT}) for _ in range(8)), encoding="utf-8")
    monkeypatch.setenv("MONITOR_JUDGE_MAX_RETRIES", "0")
    monkeypatch.setenv("MONITOR_BREAKER_THRESHOLD", "2")
    code, out, err = run("--judge", "rubric", "--file", str(pairs), "--format", "json")
    assert code == 1
    assert [json.loads(line)["ok"] for line in out.splitlines()] == [False] * 8, err


def test_lexical_needs_no_api(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lexical judge runs without any API key and is reported as heuristic."""
    for var in ("MONITOR_JUDGE", "MONITOR_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    code, out, _ = run("--judge", "lexical", "-q", QUESTION, "-a", PADDED, "--format", "json")
    assert code == 0 and json.loads(out)["judge"]["heuristic"] is True


def test_llm_judge_without_key_is_a_one_line_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """An LLM judge without an API key exits 2 with one line naming MONITOR_ANTHROPIC_API_KEY."""
    for var in ("MONITOR_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    code, _, err = run("--judge", "rubric", "-q", QUESTION, "-a", TIGHT)
    assert code == 2 and "MONITOR_ANTHROPIC_API_KEY" in err and "\n" not in err


@pytest.mark.parametrize(
    "argv",
    [(), ("-q", QUESTION), ("--file", "x.jsonl", "-q", QUESTION), ("--file", "/nonexistent/pairs.jsonl")],
    ids=["nothing", "no-answer", "file-and-question", "missing-file"],
)
def test_usage_errors(argv: tuple[str, ...]) -> None:
    """No input, a question without an answer, --file with -q, or a missing file exits 2 with one line."""
    code, _, err = run("--judge", "lexical", *argv)
    assert code == 2 and err and "\n" not in err


def _subprocess(api: FakeMessagesAPI, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MONITOR_", "ANTHROPIC_"))}
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, "judge", *argv],
        env={**base, **api.env(), **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_subprocess_json_stays_clean_while_retries_are_logged_to_stderr(fake_messages_api: FakeMessagesAPI) -> None:
    """In a subprocess, --json stdout holds only the result while the 529 retry is logged to stderr."""
    fake_messages_api.script(overloaded())
    proc = _subprocess(
        fake_messages_api,
        "--judge",
        "statements",
        "-q",
        QUESTION,
        "-a",
        PADDED,
        "--format",
        "json",
        MONITOR_LOG_LEVEL="debug",
        MONITOR_LOG_FORMAT="json",
    )
    assert proc.returncode == 0, proc.stderr
    [obj] = [json.loads(ln) for ln in proc.stdout.splitlines()]
    assert obj["score"] == pytest.approx(1 / 3)
    assert "judge_retry" in proc.stderr and "overloaded" in proc.stderr
    assert fake_messages_api.statuses() == [529, 200]


@pytest.mark.long(seconds=13)
def test_subprocess_failure_exits_1_with_a_clear_error(fake_messages_api: FakeMessagesAPI) -> None:
    """A subprocess whose judge stays overloaded exits 1 naming the pair and reason, without a traceback."""
    fake_messages_api.always(overloaded())
    proc = _subprocess(
        fake_messages_api, "--judge", "rubric", "-q", QUESTION, "-a", TIGHT, MONITOR_JUDGE_MAX_RETRIES="0"
    )
    assert proc.returncode == 1
    assert "pair 1: unavailable: overloaded" in proc.stderr
    assert "Traceback" not in proc.stderr
