"""The peer benchmark (issue 13): the monitor's `statements` judge beside DeepEval's `AnswerRelevancyMetric`, the
reference implementation of statement-based answer relevancy, in the same run against the same fake Messages API.

DeepEval makes three sequential LLM calls per case (statements, then verdicts, then a reason); the statements judge
makes one (statements and verdicts together, the reasoning built from the verdicts). Both sides score the same
events (`--source traffic`: synthetic traffic decoded as the consumer decodes it; `--source golden`: the calibration
golden set) at the same concurrency C (the monitor: an asyncio semaphore around `judge`; DeepEval: `evaluate()` with
`AsyncConfig(max_concurrent=C)`, whose semaphore is also per case), with the same model name (`claude-haiku-4-5`,
known to both, so DeepEval takes its native structured-output path and the monitor its price and cache tables), against
one `FakeMessagesAPI` whose every reply waits the same `--latency-ms`. Its brain answers DeepEval's three prompts in
the JSON DeepEval asks for, with the very statements and verdicts the default brain gives the statements judge, so
the two sides must agree on every score (checked: a benchmark whose sides disagree measured something else).

Each side runs in a child process of its own, so that its CPU time is its own: the fake server's threads stay in this
process and are charged to neither. The monitor's child is this project's interpreter; DeepEval's is the bench venv's
(`.bench-venv/`, from bench/requirements-peer.txt, created here on first use; the project's venv never gets
DeepEval). Each child builds its evaluator, scores C warm-up cases (first connections, lazy imports, template
compilation), then the timed pass; the window's monotonic start and end (CLOCK_MONOTONIC is system-wide, so the
fake's arrival times compare) pick that pass's requests out of the fake's records. Reported per side: cases/s (wall),
requests per case, prompt tokens (of which read from cache) and output tokens per case as the fake billed them, CPU
per case (the child's process CPU time, all threads, over the timed pass; start-up and imports are in the JSON), the
cost per 1,000 cases at the monitor's list prices for the model, and monitor ÷ DeepEval for each. DeepEval is
measured three times, each after its own warm-up: through `evaluate()` (what the issue asks; includes its test-run
bookkeeping and local files), as bare `AnswerRelevancyMetric.a_measure` calls under the same semaphore (the metric
alone), and so again with its `AnthropicModel` made to keep one SDK client (as shipped it builds a new one, TLS
context and CA bundle included, for every request: this row says what that costs, and is not DeepEval as shipped).

Network isolation of DeepEval: DEEPEVAL_TELEMETRY_OPT_OUT=YES, DEEPEVAL_UPDATE_WARNING_OPT_IN=0 (its PyPI version
check runs on import only when that is "1"), no CONFIDENT_API_KEY, a fresh DEEPEVAL_HOME, a temporary working
directory (its `.deepeval/` files) and no dotenv or legacy key file. Checked, not assumed: each child installs an
audit hook (`sys.addaudithook`) before importing anything else that records every `socket.connect`/`sendto`/
`sendmsg` and name lookup and refuses (PermissionError) any whose address is not loopback; it proves itself at start
by catching a connect to 192.0.2.1 (TEST-NET-1). The benchmark fails (IsolationError) if either child made a
non-loopback attempt. The hook sees Python's socket module, not sockets a C extension opens by itself (DeepEval
imports grpc), so where strace can trace, each child is then run again on a few cases under
`strace -f --seccomp-bpf -e trace=connect,sendto,sendmsg,sendmmsg`: the kernel's list of peers must hold no
non-loopback address, and it must count at least the loopback connects the hook counted. That pass is apart from the
measured one because strace slows DeepEval (a new connection per request) by about a third. The DeepEval child also
reports which telemetry backend it chose, whether it counts as logged in to Confident AI, and whether grpc or posthog
were imported.

Prints a table and writes JSON (`--json PATH`). Run: `python -m bench.peer_deepeval [--events 300] [--concurrency 16]
[--latency-ms 200] [--source traffic|golden] [--tiny] [--json PATH]` or `make bench-peer`.

This file is also both children (`--worker monitor|deepeval`): DeepEval's runs under the bench venv's interpreter,
which has neither the project nor its dependencies, so everything beyond the standard library is imported inside
the functions that need it."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import ipaddress
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.fake_messages_api import FakeMessagesAPI, RecordedRequest

REPO = Path(__file__).resolve().parent.parent
THIS_FILE = Path(__file__).resolve()
PEER_VENV = REPO / ".bench-venv"
PEER_REQUIREMENTS = REPO / "bench" / "requirements-peer.txt"
DEFAULT_JSON = Path(".relevancy-monitor/bench/peer_deepeval.json")

MODEL = "claude-haiku-4-5"  # in DeepEval's model registry (structured outputs, prices) and in the monitor's tables
EVENTS = 300
CONCURRENCY = 16
LATENCY_MS = 200.0
TINY = {"events": 8, "concurrency": 4}
STRACE_CASES = 8  # the strace pass: every code path (import, telemetry set-up, evaluate(), wrap-up) on a few cases
CHILD_TIMEOUT_S = 1800
INSTALL_TIMEOUT_S = 900
SELF_TEST_ADDRESS = ("192.0.2.1", 9)  # TEST-NET-1: never routed; the hook refuses it before any packet anyway

# The openings of DeepEval 4.3's AnswerRelevancyMetric templates (metrics/answer_relevancy/templates/*.txt): how the
# brain tells its three prompts apart. An opening, not a substring, so judged text cannot pass for a prompt.
DEEPEVAL_PROMPTS = {
    "statements": "Given the text, breakdown and generate a list of statements presented.",
    "verdicts": (
        "For the provided list of statements, determine whether each statement is relevant to address the input."
    ),
    "reason": (
        "Given the answer relevancy score, the list of reasons of irrelevant statements made in the actual output"
    ),
}


class PeerUnavailable(RuntimeError):
    """The bench venv with DeepEval could not be had (offline, no venv module, ...): the peer side is skipped."""


class IsolationError(RuntimeError):
    """A child tried to reach a non-loopback address: the figures were taken, but the run does not count."""


# ---- the fake's brain for DeepEval's prompts (runs in this process, in the fake's server threads) --------------


def request_kind(request: RecordedRequest) -> str:
    """Which prompt a request carries: one of DeepEval's three (by the template's opening), else "judge"."""
    text = request.user_text
    for kind, opening in DEEPEVAL_PROMPTS.items():
        if text.startswith(opening):
            return kind
    return "judge"


def _between(text: str, start: str, end: str) -> str:
    """The text after the first `start` and before the last `end` (the template's own markers frame the data)."""
    head = text.index(start) + len(start)
    return text[head : text.rindex(end)]


def _default_verdicts(question: str, response: str) -> tuple[list[str], list[dict[str, str]]]:
    """The statements and verdicts the fake's default brain gives the statements judge for this pair.

    Built by asking `default_brain` itself (through a request in the judge's delimited format and schema), so
    DeepEval's side is answered by the very same rule, through the fake's public interface."""
    from tests.fake_messages_api import RecordedRequest, default_brain

    code = "peer0bench"
    user = (
        f"<user_question_{code}>\n{question}\n</user_question_{code}>\n"
        f"<assistant_response_{code}>\n{response}\n</assistant_response_{code}>"
    )
    body = {
        "messages": [{"role": "user", "content": user}],
        "output_config": {
            "format": {"type": "json_schema", "schema": {"properties": {"statements": {}, "verdicts": {}}}}
        },
    }
    reply = default_brain(RecordedRequest(method="POST", path="/v1/messages", headers={}, raw=b"", body=body, at=0.0))
    assert isinstance(reply, dict), reply
    assert "statements" in reply, reply
    return list(reply["statements"]), list(reply["verdicts"])


def peer_brain(request: RecordedRequest) -> str | dict[str, Any]:
    """Answers DeepEval's statements, verdicts and reason prompts in the JSON shapes its schemas take
    (`Statements`, `Verdicts`, `AnswerRelevancyScoreReason`); delegates every other request to the default brain."""
    import ast

    from tests.fake_messages_api import default_brain

    kind = request_kind(request)
    text = request.user_text
    if kind == "statements":
        # "...**\n\nText:\n{actual_output}\n\nJSON:\n" (the example above it says "Example text:", lower case)
        statements, _ = _default_verdicts("", _between(text, "\nText:\n", "\n\nJSON:"))
        return {"statements": statements}
    if kind == "verdicts":
        # "...\nInput:\n{input}\n\nStatements:\n{python repr of the list}\n\nJSON:\n"; a repr has no raw newline,
        # so the last "\n\nStatements:\n" is the template's
        head = text.rindex("\n\nStatements:\n")
        question = text[text.index("\nInput:\n") + len("\nInput:\n") : head]
        listed = ast.literal_eval(_between(text[head:], "\n\nStatements:\n", "\n\nJSON:"))
        verdicts: list[dict[str, str]] = []
        for statement in listed:
            _, marks = _default_verdicts(question, str(statement))
            off = next((m for m in marks if m["verdict"] == "no"), None)
            # DeepEval asks for a reason only with "no" or "borderline"
            verdicts.append({"verdict": "no", "reason": off["reason"]} if off else {"verdict": "yes"})
        return {"verdicts": verdicts}
    if kind == "reason":
        score = _between(text, "Answer Relevancy Score:\n", "\n\nReasons why the score").strip()
        return {"reason": f"The score is {score} because the statements that do not address the input lower it."}
    return default_brain(request)


# ---- the fake, metered ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Billed:
    """One answered request: when it arrived (monotonic), which prompt it carried, the usage the fake sent back."""

    at: float
    kind: str
    usage: dict[str, int]
    structured: bool  # whether it asked for output_config.format (DeepEval's native structured outputs)


def meter(api: FakeMessagesAPI) -> list[Billed]:
    """Record the usage of every reply the fake sends (its records keep requests, not what it billed; the usage it
    sends back is the count both sides are charged by). Wraps the instance's reply builder; the fake itself is
    unchanged."""
    billed: list[Billed] = []
    build = api._reply_body

    def reply_body(req: Any, step: Any) -> bytes:
        body = build(req, step)
        structured = bool(((req.body or {}).get("output_config") or {}).get("format"))
        billed.append(Billed(req.at, request_kind(req), json.loads(body)["usage"], structured))  # list.append is atomic
        return body

    api._reply_body = reply_body  # type: ignore[method-assign]
    return billed


# ---- events -----------------------------------------------------------------------------------------------------


def load_cases(n: int, source: str = "traffic", seed: int = 7) -> list[dict[str, str]]:
    """`n` (question, response) pairs: synthetic traffic decoded as the consumer decodes records, or the golden set
    (cycled to `n`). Empty responses are dropped: the monitor scores them 0 without a call, DeepEval would call."""
    if source == "golden":
        from monitor.calibration.labels import golden_path, read_labels

        golden = [{"question": p.question, "response": p.answer} for p in read_labels(golden_path())]
        cases = [golden[i % len(golden)] for i in range(n)]
    else:
        from consumers.decode import decode_event
        from monitor.devtools.traffic import generate_events
        from schemas.events import KafkaPosition

        cases = []
        for i, value in enumerate(generate_events(n, seed=seed, malformed_share=0.0)):
            event = decode_event(
                value, position=KafkaPosition(topic="bench", partition=0, offset=i), record_timestamp_ms=None
            )
            cases.append({"question": event.question, "response": event.response})
    return [c for c in cases if c["response"].strip()]


# ---- the bench venv ---------------------------------------------------------------------------------------------


def peer_python(create: bool = True) -> Path:
    """The bench venv's interpreter, with bench/requirements-peer.txt installed (created or refreshed when the pins
    changed, if `create`); raises `PeerUnavailable` with a one-line reason."""
    python = PEER_VENV / "bin" / "python"
    stamp = PEER_VENV / ".requirements-sha256"
    want = hashlib.sha256(PEER_REQUIREMENTS.read_bytes()).hexdigest()
    if python.exists() and stamp.exists() and stamp.read_text(encoding="utf-8").strip() == want:
        return python
    if not create:
        raise PeerUnavailable(f"{PEER_VENV.name}/ is missing or out of date (run `make bench-peer`)")
    print(
        f"creating the bench venv {PEER_VENV.name}/ from {PEER_REQUIREMENTS.relative_to(REPO)} (once; DeepEval never "
        "enters .venv)"
    )
    base = getattr(sys, "_base_executable", sys.executable)  # the venv's own python would do too; the base is plainer
    steps = [
        [base, "-m", "venv", "--clear", str(PEER_VENV)],
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", str(PEER_REQUIREMENTS)],
    ]
    for cmd in steps:
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise PeerUnavailable(f"could not create {PEER_VENV.name}/: {e}") from e
        if done.returncode != 0:
            lines = [
                ln
                for ln in (done.stderr or done.stdout).splitlines()
                if ln.strip() and not ln.startswith("WARNING: Location")
            ]
            raise PeerUnavailable(
                f"could not create {PEER_VENV.name}/: {lines[-1] if lines else f'exit {done.returncode}'}"
            )
    stamp.write_text(want + "\n", encoding="utf-8")
    return python


def child_env(side: str, home: Path) -> dict[str, str]:
    """The child's environment: this one without any Anthropic, DeepEval, Confident AI or monitor setting (both
    sides get everything from their arguments), plus DeepEval's switches for its side."""
    drop = ("ANTHROPIC_", "DEEPEVAL_", "CONFIDENT_", "MONITOR_", "OPENAI_", "PYTHON")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(drop)}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"  # the fake is local whatever proxy the shell has
    if side == "deepeval":
        env.update(
            DEEPEVAL_TELEMETRY_OPT_OUT="YES",
            DEEPEVAL_UPDATE_WARNING_OPT_IN="0",  # deepeval/__init__.py checks PyPI on import only when this is "1"
            DEEPEVAL_HOME=str(home / "deepeval-home"),  # where its anonymous id and key file would live
            DEEPEVAL_DISABLE_DOTENV="1",
            DEEPEVAL_DISABLE_LEGACY_KEYFILE="1",
            DEEPEVAL_NO_INSPECT_PROMPT="1",
            DEEPEVAL_RESULTS_FOLDER=str(home / "results"),
        )
    return env


# ---- running a side -----------------------------------------------------------------------------------------------


STRACE_CALLS = "connect,sendto,sendmsg,sendmmsg"  # every way a socket names a peer; -s 0 leaves payloads out
_SOCKADDR_V4 = re.compile(r'sin_port=htons\((\d+)\), sin_addr=inet_addr\("([^"]+)"\)')
_STRACE_PID = re.compile(r"^\d+\s+")
_SOCKADDR_V6 = re.compile(r'sin6_port=htons\((\d+)\).*?inet_pton\(AF_INET6, "([^"]+)"')


def strace_prefix(trace: Path) -> list[str]:
    """strace, following threads and forks, stopping the child only at the calls that name a peer (seccomp-bpf)."""
    return [
        "strace",
        "-f",
        "-qq",
        "--seccomp-bpf",
        "-s",
        "0",
        "-e",
        f"trace={STRACE_CALLS}",
        "-e",
        "signal=none",
        "-o",
        str(trace),
    ]


def strace_unusable() -> str | None:
    """None when strace can trace a child here, else why not (not installed; ptrace refused, as in some containers)."""
    if shutil.which("strace") is None:
        return "not run: no strace on PATH"
    with tempfile.TemporaryDirectory() as tmp:
        try:
            done = subprocess.run(
                [*strace_prefix(Path(tmp) / "t"), "true"], capture_output=True, text=True, timeout=30, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"not run: strace failed ({e})"
    lines = done.stderr.strip().splitlines()
    return (
        None
        if done.returncode == 0
        else f"not run: strace cannot trace here ({lines[-1] if lines else done.returncode})"
    )


def parse_strace(text: str) -> dict[str, Any]:
    """The kernel's view of a child's peers: IP connects and sends with an address, loopback or not. Sees what the
    audit hook cannot (a C extension's own sockets), and its loopback count should equal the hook's."""
    loopback = 0
    others: list[str] = []
    for line in text.splitlines():
        call = _STRACE_PID.sub("", line)  # "1234 connect(...)"; padded ("1234   connect") once there are threads
        if not call.startswith(tuple(STRACE_CALLS.split(","))):
            continue
        for port, host in [*_SOCKADDR_V4.findall(call), *_SOCKADDR_V6.findall(call)]:
            if _is_loopback(host):
                loopback += call.startswith("connect(")
            else:
                others.append(f"{call.split('(', 1)[0]} {host}:{port}")
    return {"loopback_connects": loopback, "non_loopback": others}


def run_side(
    side: str,
    python: Path,
    api: FakeMessagesAPI,
    billed: list[Billed],
    cases: list[dict[str, str]],
    concurrency: int,
    use_strace: bool,
) -> dict[str, Any]:
    """Run one side's child against `api` (under strace if `use_strace`), then attribute to each of its timed passes
    the requests that arrived in its window; returns the child's report with the fake's counts."""
    from tests.fake_messages_api import API_KEY

    with tempfile.TemporaryDirectory(prefix=f"peer-{side}-") as tmp:
        home = Path(tmp)
        spec = {
            "side": side,
            "base_url": api.base_url,
            "api_key": API_KEY,
            "model": MODEL,
            "concurrency": concurrency,
            "cases": cases,
        }
        (home / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        out = home / "out.json"
        if side == "monitor":
            # -m from the repo root: `bench`, `tests` and the (editable) project import as in every benchmark
            cmd, cwd = [str(python), "-m", "bench.peer_deepeval"], REPO
        else:
            # -I: no PYTHON* variables, no user site, not even this file's folder on sys.path: DeepEval's venv alone
            cmd, cwd = [str(python), "-I", str(THIS_FILE)], home
        cmd += ["--worker", side, "--spec", str(home / "spec.json"), "--out", str(out)]
        trace = home / "strace.txt"
        if use_strace:
            cmd = [*strace_prefix(trace), *cmd]
        fake_cpu = time.process_time()
        done = subprocess.run(
            cmd,
            cwd=cwd,
            env=child_env(side, home),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
        )
        fake_cpu = time.process_time() - fake_cpu
        if done.returncode != 0 or not out.exists():
            tail = "\n".join((done.stderr or done.stdout).splitlines()[-25:])
            raise RuntimeError(f"the {side} child failed (exit {done.returncode}):\n{tail}")
        report: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
        if use_strace:
            report["audit"]["kernel"] = parse_strace(trace.read_text(encoding="utf-8", errors="replace"))
    report["fake_server_cpu_s"] = fake_cpu  # this process's CPU while the child ran: the fake's threads, mostly
    failed = [r for r in api.requests if r.status != 200 and r.path.startswith("/v1/messages")]
    report["non_200_responses"] = len(failed)
    for run in report["runs"]:
        window = [b for b in billed if run["t_start"] <= b.at <= run["t_end"]]
        n = run["cases"]
        prompt = sum(
            b.usage["input_tokens"] + b.usage["cache_read_input_tokens"] + b.usage["cache_creation_input_tokens"]
            for b in window
        )
        run.update(
            requests=len(window),
            requests_by_kind=dict(sorted(Counter(b.kind for b in window).items())),
            structured_requests=sum(b.structured for b in window),
            requests_per_case=len(window) / n,
            prompt_tokens_per_case=prompt / n,
            cache_read_tokens_per_case=sum(b.usage["cache_read_input_tokens"] for b in window) / n,
            output_tokens_per_case=sum(b.usage["output_tokens"] for b in window) / n,
            cases_per_s=n / run["wall_s"],
            cpu_ms_per_case=1000 * run["cpu_s"] / n,
            cost_per_1000_usd=_cost_per_1000(window, n),
        )
        run["tokens_per_case"] = run["prompt_tokens_per_case"] + run["output_tokens_per_case"]
    return report


def _cost_per_1000(window: list[Billed], n: int) -> float | None:
    """USD per 1,000 cases at the monitor's list prices for MODEL (the same prices for both sides)."""
    from monitor.judges.pricing import DEFAULT_PRICES

    price = DEFAULT_PRICES.get(MODEL)
    if price is None:
        return None
    total = sum(
        price.cost(
            b.usage["input_tokens"],
            b.usage["output_tokens"],
            b.usage["cache_read_input_tokens"],
            b.usage["cache_creation_input_tokens"],
        )
        for b in window
    )
    return total / n * 1000


def measure(
    events: int = EVENTS,
    concurrency: int = CONCURRENCY,
    latency_ms: float = LATENCY_MS,
    source: str = "traffic",
    sides: Sequence[str] = ("monitor", "deepeval"),
    create_venv: bool = True,
    kernel_check: bool = True,
) -> dict[str, Any]:
    """Score the same cases with each side against one fake Messages API; returns the figures. The DeepEval side is
    skipped (with its reason in the result) when the bench venv cannot be had. `kernel_check`: after each measured
    child, run it again on a few cases under strace, when strace can trace here."""
    from monitor.judges.cache_minimums import CHARS_PER_TOKEN, assumed_min_tokens
    from tests.fake_messages_api import FakeMessagesAPI, slow

    cases = load_cases(events, source)
    result: dict[str, Any] = {
        "events": len(cases),
        "source": source,
        "concurrency": concurrency,
        "latency_ms": latency_ms,
        "model": MODEL,
        "chars_per_token": CHARS_PER_TOKEN,
        "cache_min_tokens": assumed_min_tokens(MODEL),
        "cpus": os.cpu_count(),
        "sides": {},
        "skipped": {},
    }
    why_not = strace_unusable() if kernel_check else "off"
    use_strace = why_not is None
    result["kernel_check"] = "strace" if use_strace else why_not
    pythons: dict[str, Path] = {}
    for side in sides:
        if side == "monitor":
            pythons[side] = Path(sys.executable)
        else:
            try:
                pythons[side] = peer_python(create_venv)
            except PeerUnavailable as e:
                result["skipped"][side] = str(e)
    # The model's cache minimum and the judges' characters per token, as bench/prompt_cache.py emulates them: the
    # statements judge's system prompt is then cached as the real API would cache it, and DeepEval (which sends no
    # system prompt and no cache_control) pays for every prompt token.
    with FakeMessagesAPI(
        peer_brain, cache_min_tokens=result["cache_min_tokens"], chars_per_token=CHARS_PER_TOKEN
    ) as api:
        api.always(slow(latency_ms / 1000))  # every reply, both sides: the same model latency
        billed = meter(api)

        def fresh() -> None:
            api.reset()  # an empty record and cache for the next child; reset() also drops the latency, so again:
            api.always(slow(latency_ms / 1000))
            billed.clear()

        for side, python in pythons.items():
            report = run_side(side, python, api, billed, cases, concurrency, use_strace=False)
            if len(billed) != sum(r.status == 200 for r in api.message_requests):
                raise RuntimeError(
                    "the fake's usage was not metered for every reply (has FakeMessagesAPI._reply_body changed?)"
                )
            result["sides"][side] = report
            fresh()
            if use_strace:
                # The same child, code paths and checks on a few cases, under strace: apart from the measured run,
                # which strace would slow (DeepEval's more, at a new connection per request; -30 % cases/s here).
                few = cases[:STRACE_CASES]
                probe = run_side(side, python, api, billed, few, min(concurrency, len(few)), use_strace=True)
                hook = probe["audit"]
                report["audit"]["strace_pass"] = {
                    "cases": len(few),
                    "kernel": hook["kernel"],
                    "hook": {k: hook[k] for k in ("non_loopback", "lookups", "loopback_connects", "self_test_caught")},
                }
                fresh()
    result["scores_agree"] = _agreement(result)
    result["ratios"] = _ratios(result)
    result["isolation"] = {side: r["audit"] for side, r in result["sides"].items()}
    return result


def _agreement(result: dict[str, Any]) -> dict[str, Any] | None:
    """Per-case score agreement between the monitor and each DeepEval pass (the brain gives both the same verdicts)."""
    sides = result["sides"]
    if "monitor" not in sides or "deepeval" not in sides:
        return None
    ours = sides["monitor"]["runs"][0]["scores"]
    out: dict[str, Any] = {}
    for run in sides["deepeval"]["runs"]:
        same = sum(abs(a - b) < 1e-9 for a, b in zip(ours, run["scores"], strict=True))
        out[run["name"]] = {"equal": same, "of": len(ours)}
    return out


RATIO_KEYS = (
    "cases_per_s",
    "requests_per_case",
    "tokens_per_case",
    "prompt_tokens_per_case",
    "output_tokens_per_case",
    "cpu_ms_per_case",
    "cost_per_1000_usd",
)


def _ratios(result: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """monitor ÷ peer for each figure and each DeepEval pass."""
    sides = result["sides"]
    if "monitor" not in sides or "deepeval" not in sides:
        return {}
    ours = sides["monitor"]["runs"][0]
    out: dict[str, dict[str, float | None]] = {}
    for run in sides["deepeval"]["runs"]:
        out[run["name"]] = {k: (ours[k] / run[k] if ours[k] is not None and run[k] else None) for k in RATIO_KEYS}
    return out


# ---- the report -----------------------------------------------------------------------------------------------------


LABELS = {
    "monitor": "monitor statements judge",
    "evaluate": "DeepEval evaluate()",
    "a_measure": "DeepEval a_measure",
    "a_measure_reused_client": "DeepEval a_measure, 1 client*",
}
COLUMNS = (  # (heading, key, width, format)
    ("cases/s", "cases_per_s", 9, ".1f"),
    ("req/case", "requests_per_case", 10, ".2f"),
    ("prompt tok", "prompt_tokens_per_case", 12, ",.0f"),
    ("(cached)", "cache_read_tokens_per_case", 10, ",.0f"),
    ("out tok", "output_tokens_per_case", 9, ",.0f"),
    ("tok/case", "tokens_per_case", 10, ",.0f"),
    ("CPU ms/case", "cpu_ms_per_case", 13, ".2f"),
    ("$/1,000", "cost_per_1000_usd", 9, ".3f"),
)
WIDTH = 32


def report_lines(r: dict[str, Any]) -> list[str]:
    """The figures as a table for people."""
    lines = [
        f"{r['events']} cases ({r['source']}), concurrency {r['concurrency']}, {r['latency_ms']:g} ms per request at a "
        "local fake Messages API,",
        f"model {r['model']} on both sides; tokens as the fake billed them ({r['chars_per_token']:g} chars/token, "
        f"{r['cache_min_tokens']:,}-token cache minimum); {r['cpus']} CPUs",
        "",
        f"{'side':<{WIDTH}}" + "".join(f"{h:>{w}}" for h, _, w, _ in COLUMNS),
    ]

    def cell(x: float | None, w: int, f: str) -> str:
        return f"{'n/a' if x is None else format(x, f):>{w}}"

    for rep in r["sides"].values():
        for run in rep["runs"]:
            lines.append(
                f"{LABELS.get(run['name'], run['name']):<{WIDTH}}"
                + "".join(cell(run[k], w, f) for _, k, w, f in COLUMNS)
            )
    for side, reason in r["skipped"].items():
        lines.append(f"{side:<{WIDTH}}skipped: {reason}")
    for name, q in r["ratios"].items():
        label = "monitor ÷ " + LABELS[name].removeprefix("DeepEval ")
        lines.append(
            f"{label:<{WIDTH}}"
            + "".join(cell(q.get(k), w, ".2f") if k in q else f"{'':>{w}}" for _, k, w, _ in COLUMNS)
        )
    if "deepeval" in r["sides"]:
        lines.append(
            "* not DeepEval as shipped: its AnthropicModel builds a new SDK client (TLS context, pool, connection) per "
            "call"
        )
    lines.append("")
    for side, rep in r["sides"].items():
        by_kind = ", ".join(f"{k} {v}" for k, v in rep["runs"][0]["requests_by_kind"].items())
        lines.append(
            f"{side}: {rep['versions']}; timed requests: {by_kind}; non-200: {rep['non_200_responses']}; "
            f"process CPU {rep['process_cpu_s']:.1f} s (start-up, imports, warm-up {rep['startup_cpu_s']:.1f} s); "
            f"fake server CPU {rep['fake_server_cpu_s']:.1f} s"
        )
    if r["scores_agree"]:
        lines.append(
            "scores equal to the monitor's: "
            + ", ".join(f"{LABELS[k]} {v['equal']}/{v['of']}" for k, v in r["scores_agree"].items())
        )
    for side, audit in r["isolation"].items():
        traced = audit.get("strace_pass")
        if traced:
            k = traced["kernel"]
            seen = (
                f"under strace, a separate {traced['cases']}-case pass: {len(k['non_loopback'])} "
                f"(loopback connects {k['loopback_connects']}, the hook counted {traced['hook']['loopback_connects']})"
            )
        else:
            seen = f"strace {r['kernel_check']}"
        lines.append(
            f"{side}: non-loopback connections: {len(audit['non_loopback'])} (audit hook, the measured run; self-test "
            "caught: "
            f"{'yes' if audit['self_test_caught'] else 'NO'}; loopback connects {audit['loopback_connects']}); {seen}; "
            f"non-loopback name lookups: {len(audit['lookups'])}"
        )
        if side == "deepeval":
            modules = ", ".join(audit["network_modules"]) or "none of grpc, posthog"
            lines.append(
                f"deepeval: telemetry backend {audit.get('telemetry_backend')}, Confident AI login "
                f"{'yes' if audit.get('confident') else 'no'}, "
                f"update check {'on' if audit.get('update_check') else 'off'}; imported: {modules}"
            )
    return lines


def check_isolation(r: dict[str, Any]) -> None:
    """Raise `IsolationError` if a child attempted a non-loopback connection or lookup (by the audit hook or by
    strace), its audit hook failed its self-test, or strace saw fewer connects than the hook (a misread trace)."""
    bad = []
    for side, audit in r["isolation"].items():
        checks = [audit, *([audit["strace_pass"]["hook"]] if audit.get("strace_pass") else [])]
        found = [x for a in checks for x in (*a["non_loopback"], *a["lookups"])]
        if audit.get("strace_pass"):
            traced = audit["strace_pass"]
            found += traced["kernel"]["non_loopback"]
            if traced["kernel"]["loopback_connects"] < traced["hook"]["loopback_connects"]:
                # the kernel must see at least every connect the hook saw; fewer means strace's output was misread
                found.append(
                    f"strace saw {traced['kernel']['loopback_connects']} connects, the hook "
                    f"{traced['hook']['loopback_connects']}"
                )
        if found or not all(a["self_test_caught"] for a in checks):
            bad.append(
                f"{side}: {found[:5]}, self-test {'passed' if all(a['self_test_caught'] for a in checks) else 'FAILED'}"
            )
    if bad:
        raise IsolationError("network isolation failed: " + "; ".join(bad))


def main(
    events: int = EVENTS,
    concurrency: int = CONCURRENCY,
    latency_ms: float = LATENCY_MS,
    source: str = "traffic",
    json_path: Path | None = DEFAULT_JSON,
    sides: Sequence[str] = ("monitor", "deepeval"),
    create_venv: bool = True,
    kernel_check: bool = True,
) -> dict[str, Any]:
    """Run the benchmark; print the table and write the JSON; after that, raise `IsolationError` if isolation failed
    and RuntimeError if a DeepEval pass disagrees with the monitor on any score."""
    from bench.output import emit

    result = measure(events, concurrency, latency_ms, source, sides, create_venv, kernel_check)
    emit(report_lines(result), result, json_path)
    check_isolation(result)
    for name, agree in (result["scores_agree"] or {}).items():
        if agree["equal"] != agree["of"]:  # same verdicts from the brain, so a difference is a fault of this benchmark
            raise RuntimeError(f"DeepEval {name} agrees with the monitor on {agree['equal']} of {agree['of']} scores")
    return result


# ---- the children -------------------------------------------------------------------------------------------------


def _is_loopback(host: Any) -> bool:
    if host is None:
        return True  # a passive or unspecified lookup asks no server
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    host = str(host)
    if host.lower() == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False  # a name other than localhost: resolving it would ask a server
    mapped = getattr(ip, "ipv4_mapped", None)  # ::ffff:127.0.0.1 is loopback too
    return bool(ip.is_loopback or (mapped is not None and mapped.is_loopback))


def install_socket_audit() -> dict[str, Any]:
    """Record and refuse every non-loopback socket connect/send and name lookup of this process from now on
    (`sys.addaudithook`; hooks cannot be removed), and prove it with a connect to TEST-NET-1. Returns the live
    record."""
    audit: dict[str, Any] = {
        "non_loopback": [],
        "lookups": [],
        "loopback_connects": 0,
        "local_connects": 0,
        "self_test_caught": False,
    }
    connects = {"socket.connect", "socket.sendto", "socket.sendmsg"}
    lookups = {"socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex", "socket.gethostbyaddr"}

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if not event.startswith("socket."):
            return  # the hook sees every audited event (imports, opens); leave those at once
        if event in connects:
            address = args[1] if len(args) > 1 else None
            if address is None or isinstance(address, str | bytes):
                audit["local_connects"] += 1  # AF_UNIX path (or a connected socket's send): not a network
                return
            if _is_loopback(address[0]):
                audit["loopback_connects"] += event == "socket.connect"
                return
            audit["non_loopback"].append(f"{event} {address!r}")
            raise PermissionError(f"bench isolation: {event} to {address!r} refused")
        if event in lookups:
            host = args[0] if args else None
            if not _is_loopback(host):
                audit["lookups"].append(f"{event} {host!r}")
                raise PermissionError(f"bench isolation: {event} of {host!r} refused")

    sys.addaudithook(hook)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(0.2)
            s.connect(SELF_TEST_ADDRESS)
    except PermissionError:
        audit["self_test_caught"] = bool(audit["non_loopback"])
    except OSError:
        pass  # reached the network stack: the hook did not refuse it, and self_test_caught stays False
    audit["non_loopback"].clear()
    return audit


def _finish_audit(audit: dict[str, Any]) -> dict[str, Any]:
    audit["network_modules"] = sorted(m for m in ("grpc", "posthog", "sentry_sdk") if m in sys.modules)
    return audit


async def _monitor_passes(spec: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    from monitor.config import load_settings
    from monitor.judges.factory import build_judge

    settings = load_settings(
        judge="statements",
        judge_model=spec["model"],
        anthropic_base_url=spec["base_url"],
        anthropic_api_key=spec["api_key"],
    )
    judge = build_judge(settings.judge)
    sem = asyncio.Semaphore(spec["concurrency"])

    async def one(case: dict[str, str]) -> float:
        async with sem:
            return (await judge.judge(case["question"], case["response"])).score

    cases = spec["cases"]
    try:
        await asyncio.gather(*(one(c) for c in cases[: spec["concurrency"]]))  # warm-up
        t_start, cpu = time.monotonic(), time.process_time()
        scores = await asyncio.gather(*(one(c) for c in cases))
        cpu, t_end = time.process_time() - cpu, time.monotonic()
    finally:
        await judge.aclose()
    from importlib.metadata import version

    return [
        _run("monitor", t_start, t_end, cpu, scores)
    ], f"relevancy-monitor {version('relevancy-monitor')}, anthropic {version('anthropic')}"


def _deepeval_passes(spec: dict[str, Any], audit: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    # Only the bench venv has DeepEval (hence the ignores: the project's mypy never sees it installed)
    import deepeval  # type: ignore[import-not-found]
    from deepeval import evaluate
    from deepeval.evaluate.configs import AsyncConfig, CacheConfig, DisplayConfig, ErrorConfig  # type: ignore[import-not-found]
    from deepeval.metrics import AnswerRelevancyMetric  # type: ignore[import-not-found]
    from deepeval.models import AnthropicModel  # type: ignore[import-not-found]
    from deepeval.test_case import LLMTestCase  # type: ignore[import-not-found]

    class ReusedClientModel(AnthropicModel):  # type: ignore[misc]
        """AnthropicModel keeping the SDK client it builds. As shipped, `a_generate` calls `load_model`, which builds
        a new AsyncAnthropic (a new TLS context with the CA bundle loaded, a new connection pool, so a new TCP
        connection) for every request; this pass measures the metric without that, and is not DeepEval as shipped."""

        _clients: dict[bool, Any]

        def load_model(self, async_mode: bool = False) -> Any:
            if not hasattr(self, "_clients"):
                self._clients = {}
            if async_mode not in self._clients:
                self._clients[async_mode] = super().load_model(async_mode)
            return self._clients[async_mode]

    def model_of(cls: Any) -> Any:
        # AnthropicModel hands its unrecognised keyword arguments to the SDK client it builds (`_client_kwargs`),
        # so base_url reaches anthropic.AsyncAnthropic directly: no subclass, no ANTHROPIC_BASE_URL.
        return cls(model=spec["model"], api_key=spec["api_key"], base_url=spec["base_url"])

    concurrency = spec["concurrency"]
    cases = [
        LLMTestCase(input=c["question"], actual_output=c["response"], name=f"case-{i}")
        for i, c in enumerate(spec["cases"])
    ]
    shipped = model_of(AnthropicModel)

    def metric(model: Any) -> Any:
        return AnswerRelevancyMetric(model=model, threshold=0.5, include_reason=True, async_mode=True)

    def run_evaluate(batch: list[Any]) -> list[float]:
        res = evaluate(
            batch,
            [metric(shipped)],
            async_config=AsyncConfig(run_async=True, max_concurrent=concurrency, throttle_value=0),
            display_config=DisplayConfig(show_indicator=False, print_results=False, inspect_after_run=False),
            cache_config=CacheConfig(write_cache=False, use_cache=False),
            error_config=ErrorConfig(ignore_errors=False),
        )
        by_name = {tr.name: tr.metrics_data[0] for tr in res.test_results}
        bad = [n for n, m in by_name.items() if m.error or m.score is None]
        if bad or len(by_name) != len(batch):
            raise RuntimeError(f"DeepEval scored {len(by_name)} of {len(batch)} cases; errors in {bad[:3]}")
        return [float(by_name[c.name].score) for c in batch]

    async def measure_pass(name: str, model_cls: Any) -> dict[str, Any]:
        # In a loop of its own (evaluate() keeps the one it made): the model, and so any client it keeps, too.
        model = model_of(model_cls)
        sem = asyncio.Semaphore(concurrency)

        async def one(case: Any) -> float:
            async with sem:
                m = metric(
                    model
                )  # a metric keeps per-case state (statements, verdicts): one per case, as evaluate() copies
                return float(await m.a_measure(case, _show_indicator=False))

        await asyncio.gather(*(one(c) for c in cases[:concurrency]))  # warm-up, in this loop
        t_start, cpu = time.monotonic(), time.process_time()
        scores = list(await asyncio.gather(*(one(c) for c in cases)))
        cpu, t_end = time.process_time() - cpu, time.monotonic()
        return _run(name, t_start, t_end, cpu, scores)

    run_evaluate(cases[:concurrency])  # warm-up: the SDK import, template compilation, the first connections
    t_start, cpu = time.monotonic(), time.process_time()
    scores = run_evaluate(cases)
    cpu, t_end = time.process_time() - cpu, time.monotonic()
    runs = [_run("evaluate", t_start, t_end, cpu, scores)]
    runs.append(asyncio.run(measure_pass("a_measure", AnthropicModel)))
    runs.append(asyncio.run(measure_pass("a_measure_reused_client", ReusedClientModel)))

    from importlib.metadata import version

    from deepeval.confident.api import is_confident  # type: ignore[import-not-found]
    from deepeval.telemetry import client as telemetry  # type: ignore[import-not-found]

    audit["telemetry_backend"] = type(telemetry.get_backend()).__name__
    audit["telemetry_opted_out"] = telemetry.telemetry_opt_out()
    audit["confident"] = bool(is_confident())
    audit["update_check"] = bool(deepeval.update_warning_opt_in())
    return runs, f"deepeval {version('deepeval')}, anthropic {version('anthropic')}"


def _run(name: str, t_start: float, t_end: float, cpu: float, scores: list[float]) -> dict[str, Any]:
    return {
        "name": name,
        "cases": len(scores),
        "t_start": t_start,
        "t_end": t_end,
        "wall_s": t_end - t_start,
        "cpu_s": cpu,
        "scores": scores,
    }


def worker(side: str, spec_path: Path, out_path: Path) -> None:
    """A child: audit sockets, build the side's evaluator, score warm-up then timed passes, write the report."""
    cpu0 = time.process_time()
    audit = install_socket_audit()  # before any import that could open a socket
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    if side == "monitor":
        runs, versions = asyncio.run(_monitor_passes(spec))
    else:
        runs, versions = _deepeval_passes(spec, audit)
    total = time.process_time() - cpu0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    report = {
        "side": side,
        "runs": runs,
        "versions": versions,
        "python": sys.version.split()[0],
        "startup_cpu_s": total - sum(r["cpu_s"] for r in runs),  # imports, construction and warm-up
        "process_cpu_s": usage.ru_utime + usage.ru_stime,  # since the interpreter started
        "process_max_rss_mb": usage.ru_maxrss / 1024,
        "audit": _finish_audit(audit),
    }
    out_path.write_text(json.dumps(report), encoding="utf-8")


# ---- command line ---------------------------------------------------------------------------------------------------


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.peer_deepeval", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    p.add_argument(
        "--events",
        type=int,
        default=None,
        help=f"cases scored by each side (default {EVENTS}; --tiny {TINY['events']})",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help=f"cases in flight on each side (default {CONCURRENCY}; --tiny {TINY['concurrency']})",
    )
    p.add_argument(
        "--latency-ms",
        type=float,
        default=LATENCY_MS,
        help=f"the fake's delay before every reply (default {LATENCY_MS:g})",
    )
    p.add_argument(
        "--source",
        choices=("traffic", "golden"),
        default="traffic",
        help="synthetic traffic (default) or the calibration golden set",
    )
    p.add_argument("--tiny", action="store_true", help="CI size")
    p.add_argument("--monitor-only", action="store_true", help="skip DeepEval (no bench venv needed)")
    p.add_argument(
        "--no-strace", action="store_true", help="skip the kernel-level (strace) view of the children's connections"
    )
    p.add_argument(
        "--no-create", action="store_true", help=f"do not create {PEER_VENV.name}/; skip DeepEval if it is missing"
    )
    p.add_argument(
        "--json", type=Path, default=DEFAULT_JSON, help=f"where to write the figures (default {DEFAULT_JSON})"
    )
    p.add_argument("--worker", choices=("monitor", "deepeval"), help=argparse.SUPPRESS)
    p.add_argument("--spec", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def cli(argv: Sequence[str] | None = None) -> int:
    """The command line: 0 when both sides ran and isolation held; 1 when DeepEval was skipped; 2 on isolation
    failure."""
    a = _parse(argv)
    if a.worker:
        worker(a.worker, a.spec, a.out)
        return 0
    events = a.events or (TINY["events"] if a.tiny else EVENTS)
    concurrency = a.concurrency or (TINY["concurrency"] if a.tiny else CONCURRENCY)
    sides = ("monitor",) if a.monitor_only else ("monitor", "deepeval")
    try:
        result = main(events, concurrency, a.latency_ms, a.source, a.json, sides, not a.no_create, not a.no_strace)
    except IsolationError as e:
        print(e, file=sys.stderr)
        return 2
    if result["skipped"]:
        print("DeepEval skipped: " + "; ".join(result["skipped"].values()), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(cli())


__all__ = [
    "Billed",
    "IsolationError",
    "PeerUnavailable",
    "cli",
    "load_cases",
    "main",
    "measure",
    "peer_brain",
    "request_kind",
]
